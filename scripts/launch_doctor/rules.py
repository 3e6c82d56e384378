"""Each rule: the facts (the parsed job, its topology, the scanned logs, the inputs) and the options ->
findings, each with the line that shows the mistake and the fix. Rules decide on the structured facts
only. A fix is a value (launch_doctor.fixes): corrected lines are rebuilt from the parsed words, the
doctor's own words after a `#` are prose, and nothing of the input is spliced into a fix."""

import re

from diagnostics_core import command
from . import counts
from .findings import TOOL, finding
from .fixes import FIRST_NODE_COMMAND, Edits, fix_text, option
from .shell import FIRST_NODE
from .topology import JOB_ID, allocation_of, is_loopback, whole

EVIDENCE_CHARS = 500
# Variables a launch reads in its tasks: dropped by srun --export, the ranks run without them.
LAUNCH_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK",
                    "LOCAL_RANK", "CUDA_VISIBLE_DEVICES", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME",
                    "PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "CONDA_PREFIX", "PATH")


def line_evidence(step):
    return {"line": step["line"], "text": step["text"][:EVIDENCE_CHARS]}


def job_step(facts, shape):
    """The parsed step (its words) a topology shape was computed from."""
    return next(s for s in facts["job"]["steps"] if s["kind"] == "step" and s["line"] == shape["line"])


def torchrun_steps(topo):
    return [s for s in topo["steps"] if s.get("launcher_kind") == "torchrun"]


def script_path(facts):
    return (facts["inputs"].get("script") or {}).get("path") or "JOB_SCRIPT"


# --- the script itself -----------------------------------------------------------------------------------

def rule_encoding(facts, options):
    """What sbatch refuses before bash reads a line (measured on 22.05.8): CRLF line breaks, a byte-order
    mark at the start (or before a later #SBATCH, which then is no directive), no #! first line."""
    seen = facts["job"].get("encoding")
    if not seen:
        return []
    path, found = script_path(facts), []
    if seen["crlf_count"]:
        found.append(finding("doctor-script-dos-line-breaks", {
            "lines": seen["crlf_lines"], "count": seen["crlf_count"],
            "sbatch_says": "sbatch: error: Batch script contains DOS line breaks (\\r\\n) / instead of expected UNIX "
                           "line breaks (\\n).", "note": "the topology below is the script's once the line breaks are fixed"},
            "%s  # or dos2unix: sbatch refuses a script with DOS line breaks" % command.line("sed", "-i", "s/\\r$//", path)))
    if seen["bom_lines"]:
        at_start = seen["bom_lines"][0] == 1
        found.append(finding("doctor-script-byte-order-mark", {
            "lines": seen["bom_lines"], "at_start": at_start,
            "sbatch_says": "sbatch: error: This does not look like a batch script.  The first line must start with #! "
                           "followed by the path to an interpreter." if at_start else None,
            "why": "a UTF-8 byte-order mark before #! makes the first line no interpreter line: sbatch refuses the "
                   "script" if at_start else "a byte-order mark before a line makes it no #SBATCH directive: sbatch "
                   "stops reading directives there (that one and those after it are ignored) and bash runs the line as "
                   "a command ('command not found')"},
            "%s  # the byte-order mark an editor saved" % command.line("sed", "-i", "s/^\\xEF\\xBB\\xBF//", path)))
    if not seen["interpreter_line"] and not (seen["bom_lines"] and seen["bom_lines"][0] == 1):
        found.append(finding("doctor-script-no-interpreter-line", {
            "first_line": seen["first_line"][:EVIDENCE_CHARS],
            "sbatch_says": "sbatch: error: This does not look like a batch script.  The first line must start with #! "
                           "followed by the path to an interpreter."},
            "%s  # sbatch reads the first line as the interpreter" % command.line("sed", "-i", "1i #!/bin/bash", path)))
    return found


def rule_invalid_counts(facts, options):
    """Counts sbatch, srun or torchrun refuse (or silently wrap): each on the line where it stands."""
    found = []
    for problem in facts["job"]["invalid"]:
        evidence = dict(problem, text=(problem.get("text") or "")[:EVIDENCE_CHARS])
        evidence.pop("step_line", None)
        found.append(finding("doctor-directive-invalid", evidence, invalid_fix(facts, problem)))
    return found


def invalid_fix(facts, problem):
    name, suggested, line = problem["option"], problem["suggested"], problem.get("line")
    wanted = "a whole number of at least 1" if name not in ("nodes", "nnodes") else \
        "a node count of at least 1 (MIN-MAX with MIN <= MAX)" if name == "nodes" else "MIN:MAX with 0 < MIN <= MAX"
    where = "line %d" % line if line else "the sbatch command line"
    if suggested is None:
        return "# %s: give --%s %s%s" % (where, name, wanted, ", or leave it out (SLURM derives it)"
                                         if name in ("ntasks", "ntasks-per-node", "gpus", "gpus-per-node",
                                                     "gpus-per-task") else "")
    # the corrected line carries every suggested value for the line, so that it is whole when pasted
    siblings = [p for p in facts["job"]["invalid"] if p["where"] == problem["where"] and p.get("line") == line
                and p["suggested"] is not None]
    if problem["where"] in ("srun", "torchrun"):
        step = next(s for s in facts["job"]["steps"] if s["kind"] == "step" and s["line"] == problem["step_line"])
        edits = Edits()
        for other in siblings:
            if other["where"] == "srun":
                edits.set_srun(other["option"], other["suggested"])
            else:
                edits.set_launcher(other["option"], other["suggested"])
        return fix_text(step, edits, "--%s=%s" % (name, suggested), "give --%s %s" % (name, wanted))
    words = problem.get("words") or directive_words(facts, problem)
    for other in siblings:
        words = rebuilt_options(words, other["option"], other["suggested"])
    if problem["where"] == "sbatch":
        return "%s  # the sbatch command line, corrected" % command.line("sbatch", words, script_path(facts))
    return "%s  # %s, corrected" % (command.line("#SBATCH", words).replace("'#SBATCH'", "#SBATCH", 1), where)


def directive_words(facts, problem):
    component = facts["job"]["components"][problem.get("component") or 0]
    source = component["option_sources"].get(problem["option"]) or {}
    return source.get("words") or []


def rebuilt_options(words, name, value):
    """sbatch option words with --name set to value (the doctor's word in place of the user's)."""
    out, skip = [], False
    short = {"nodes": "-N", "ntasks": "-n", "cpus-per-task": "-c"}.get(name)
    for index, word in enumerate(words):
        if skip:
            skip = False
            continue
        if word == "--" + name or (short and word == short):
            out.append("--%s=%s" % (name, value))
            skip = True
        elif word.startswith("--%s=" % name) or (short and word.startswith(short) and len(word) > 2):
            out.append("--%s=%s" % (name, value))
        else:
            out.append(word)
    return out


# --- the steps -----------------------------------------------------------------------------------------

def one_agent_per_node(shape, alloc):
    edits = Edits().set_srun("ntasks", shape["nodes"] or 1).set_srun("ntasks-per-node", 1)
    if alloc["cpus_on_node"]:
        edits.set_srun("cpus-per-task", alloc["cpus_on_node"])
    return edits


def rule_nested_launcher(facts, options):
    topo, found = facts["topology"], []
    for shape in torchrun_steps(topo):
        if shape["launcher"] != "srun" or not shape["agents_per_node"] or shape["agents_per_node"] <= 1:
            continue
        alloc = allocation_of(topo, shape)
        cores = alloc["cpus_on_node"]
        directives = ["#SBATCH --ntasks-per-node=1"] + (["#SBATCH --cpus-per-task=%d" % cores] if cores else [])
        source = facts["job"]["option_sources"].get("ntasks-per-node")
        also = "; or keep the line and set %s%s" % (" and ".join(directives), " (line %d)" % source["line"]
                                                   if source and source.get("line") else "")
        srun_words = command.line("srun", option("ntasks", shape["nodes"] or 1), option("ntasks-per-node", 1),
                                  [option("cpus-per-task", cores)] if cores else [])
        fix = fix_text(job_step(facts, shape), one_agent_per_node(shape, alloc), "one torchrun agent per node with all "
                       "its CPUs", "start it with %s before torchrun" % srun_words, also)
        found.append(finding("doctor-nested-launcher", dict(line_evidence(shape), **{
            "srun_tasks": shape["tasks"], "nodes": shape["nodes"], "agents_per_node": shape["agents_per_node"],
            "torchrun_nnodes": shape["nnodes"], "agents_joining": shape["agents_joined"],
            "agents_failing": shape["agents_failing"], "world_size": shape["world_size"],
            "why": "srun starts one torchrun per task, so %d agents on %d nodes race for a %s-agent rendezvous: "
                   "the first %d form a world of %s ranks squeezed into their tasks' CPUs, the rest die when the store's "
                   "host exits (RendezvousConnectionError, or AttributeError: 'NoneType' object has no attribute "
                   "'is_failed'), and SLURM marks the step FAILED"
                   % (shape["tasks"], shape["nodes"], shape["nnodes"], shape["agents_joined"], shape["world_size"])}),
            fix))
    for log in facts["logs"]:
        if log["agents"] < 2 or "doctor-log-store-lost" not in log["signatures"]:
            continue
        per_node = {}
        for entry in log["srun_failed_tasks"]:
            per_node[entry["node"]] = per_node.get(entry["node"], 0) + entry["count"]
        nodes = topo["allocation"]["nodes"] if facts["job"]["source"] != "log" else len(per_node) or None
        crowded = sorted(node for node, count in per_node.items() if count > 1)
        if not crowded and not (nodes and log["agents"] > nodes):
            continue
        why = "%d torchrun agents logged (distinct process ids in torch/distributed/run.py and elastic lines)" % (
            log["agents"])
        if crowded:
            why += "; srun reports several failed tasks of the step on %s: more than one agent per node" % (
                ", ".join(crowded))
        else:
            why += " for %d node(s): more than one agent per node" % nodes
        found.append(finding("doctor-nested-launcher", {
            "file": log["file"], "torchrun_agents_logged": log["agents"], "agent_pids": log["agent_pids"][:16],
            "failed_tasks_per_node": per_node, "failed_tasks": log["srun_failed_tasks"][:8],
            "store_lost": log["signatures"]["doctor-log-store-lost"], "why": why + ", and the extra ones lost the store"},
            "%s JOB_SCRIPT  # prints the corrected lines; one torchrun per node: #SBATCH --ntasks-per-node=1 with "
            "#SBATCH --cpus-per-task=<all the cores the node's ranks need>" % TOOL.command()))
    return found


# srun before the option's version, measured on 22.05.8 (tests/test_launch_cluster.py): exit 255, no step
SRUN_REFUSES_SAYS = "srun: unrecognized option '%s' / Try \"srun --help\" for more information"
PLAIN_VARIABLE = re.compile(r"^\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)$")


def tasks_one_per_node(step):
    """srun's --ntasks for one task on each node the line's srun runs on: its --nodes (a count or a plain
    $NAME), else the job's."""
    given = (step.get("srun") or {}).get("nodes")
    if not isinstance(given, str):
        return "$SLURM_NNODES"
    return whole(given, counts.NODES_MAX) or (given if PLAIN_VARIABLE.match(given) else "$SLURM_NNODES")


def rule_srun_refuses(facts, options):
    """An srun option this SLURM version does not have: srun exits 255 and nothing starts. With the version
    unknown, the ranges that refuse it (a warning: from the option's version on, the line runs). The fix is
    the line every version runs: for --external-launcher, one task per node holding the node's CPUs."""
    topo, found, seen = facts["topology"], [], set()
    for shape in topo["steps"]:
        refusing = [(label, s["srun_refuses"]) for label, s in shape["version_shapes"] if s["srun_refuses"]]
        if not refusing or shape["line"] in seen:
            continue
        seen.add(shape["line"])
        name, since = refusing[0][1]["option"], refusing[0][1]["since"]
        known = len(shape["version_shapes"]) == 1
        step, cores = job_step(facts, shape), allocation_of(topo, shape)["cpus_on_node"]
        edits = Edits().set_srun(name[2:], None)
        done = "without %s, which srun before %s does not have" % (name, since)
        if name == "--external-launcher":
            edits.set_srun("ntasks", tasks_one_per_node(step)).set_srun("ntasks-per-node", 1)
            if cores:
                edits.set_srun("cpus-per-task", cores)
            done = "one task per node holding %s, as %s gives from %s; every version runs this" % (
                "its %d CPUs" % cores if cores else "the whole node", name, since)
        words = [option(key, value) for key, value in edits.srun if value is not None]
        why = ("srun %s has no %s (it came in %s): srun exits 255 and the step never starts" % (
            refusing[0][0], name, since) if known else
            "srun before %s has no %s: it exits 255 and the step never starts; from %s on it runs (give "
            "--slurm-version to know which)" % (since, name, since))
        found.append(finding("doctor-srun-option-unsupported", dict(line_evidence(shape), **{
            "option": name, "since": since, "slurm_version": refusing[0][0] if known else None,
            "refused_by": [label for label, _ in refusing], "srun_says": SRUN_REFUSES_SAYS % name,
            "exit_code": 255, "why": why}),
            fix_text(step, edits, done, "give srun %s instead of %s" % (" ".join(words), name)),
            severity=None if known else "warning"))
    return found


def rule_counts(facts, options):
    topo, found = facts["topology"], []
    for shape in topo["steps"]:
        alloc = allocation_of(topo, shape)
        problems, edits, steps_done, prose = [], Edits(), [], []
        if shape["step_fails"]:
            per_task = max(1, (alloc["cpus_on_node"] or 1) // (shape["tasks_per_node"] or 1))
            problems.append("srun fails: %d tasks x %d CPUs exceed the job's %s CPUs on a node (\"More processors "
                            "requested than permitted\")" % (shape["tasks_per_node"], shape["cpus_per_task"],
                                                               alloc["cpus_on_node"]))
            edits.set_srun("cpus-per-task", per_task)
            steps_done.append("no more CPUs per task than the job holds per node (%s CPUs / %s tasks)" % (
                alloc["cpus_on_node"], shape["tasks_per_node"]))
        ignored = shape["ntasks_per_node_ignored"]
        if ignored:
            problems.append("srun ignores --ntasks-per-node=%d: the job's SLURM_NTASKS=%d is not %d x %d nodes (srun "
                            "warns \"can't honor --ntasks-per-node\")" % (ignored["ntasks_per_node"], ignored["job_tasks"],
                                                                          ignored["ntasks_per_node"], ignored["nodes"]))
            edits.set_srun("ntasks", ignored["ntasks_per_node"] * ignored["nodes"])
            steps_done.append("srun given the total with --ntasks-per-node, which it then honours")
        if shape["nodes_over_job"]:
            problems.append("srun asks for %d nodes; the job holds %d" % (shape["nodes"], alloc["nodes"]))
            edits.set_srun("nodes", alloc["nodes"])
            steps_done.append("srun's nodes within the job's (or #SBATCH --nodes=%d)" % shape["nodes"])
        if shape.get("launcher_kind") == "torchrun":
            agents, low, high = shape["agents"], shape["nnodes_min"], shape["nnodes_max"]
            per_node = shape["agents_per_node"] or 1
            mismatch = False
            if agents is not None and low and agents < low:
                problems.append("torchrun waits for %s agents (--nnodes=%s) but %s starts %d: the rendezvous "
                                "times out" % (low, shape["nnodes"], shape["launcher"], agents))
                mismatch = True
            elif agents is not None and high and agents > high and per_node == 1:
                problems.append("%d agents start for a %d-agent rendezvous: %d fail" % (agents, high, agents - high))
                mismatch = True
            if mismatch and shape["launcher"] != "srun":
                edits.run_under_srun([("ntasks", alloc["nodes"] or agents), ("ntasks-per-node", 1)] + (
                    [("cpus-per-task", alloc["cpus_on_node"])] if alloc["cpus_on_node"] else []))
                edits.set_launcher("nnodes", "$SLURM_NNODES")
                steps_done.append("one agent per node, and torchrun waits for the job's nodes")
            elif mismatch:
                edits.set_launcher("nnodes", "$SLURM_NNODES")
                steps_done.append("torchrun waits for as many agents as the job's nodes")
        exported = shape.get("world_size_exported")
        if exported is not None and shape.get("launcher_kind") in ("srun", "none"):
            if str(exported).isdigit() and len(str(exported)) < 10 and shape["world_size"] \
                    and int(exported) != shape["world_size"]:
                problems.append("WORLD_SIZE=%s but the step starts %d ranks" % (exported, shape["world_size"]))
                prose.append("set WORLD_SIZE=$SLURM_NTASKS inside the srun command (bash -c '...'), not a number")
        if not problems:
            continue
        step = job_step(facts, shape)
        fixes = [fix_text(step, edits, "; ".join(steps_done), "on its srun or torchrun: %s" % "; ".join(steps_done))] \
            if steps_done else []
        fixes += ["# " + text for text in prose]
        found.append(finding("doctor-count-mismatch", dict(line_evidence(shape), problems=problems,
                                                           nodes=shape["nodes"], tasks=shape["tasks"],
                                                           job_nodes=alloc["nodes"], het_group=shape["het_group"]),
                             "\n".join(fixes)))
    for log in facts["logs"]:
        if log["ntasks_per_node_ignored"]:
            found.append(finding("doctor-count-mismatch", {"log": log["ntasks_per_node_ignored"],
                                                           "problems": ["srun ignored --ntasks-per-node"]},
                                 "# give srun --ntasks=<nodes x tasks per node> with --ntasks-per-node (srun ignores "
                                 "--ntasks-per-node alone when the job's SLURM_NTASKS differs)"))
    return dedupe(found)


def dedupe(found):
    seen, kept = set(), []
    for item in found:
        key = (item["id"], repr(item["evidence"].get("line")), repr(item["evidence"].get("log")),
               repr(item["evidence"].get("het_group")))
        if key not in seen:
            seen.add(key)
            kept.append(item)
    return kept


def rule_cpus(facts, options):
    topo, found = facts["topology"], []
    for shape in topo["steps"]:
        alloc = allocation_of(topo, shape)
        if shape["step_fails"] or not alloc["cpus_on_node"] or (shape.get("agents_per_node") or 1) > 1:
            continue  # a nested launcher is its own finding, with its own fix
        ranks = shape.get("ranks_per_node")
        ranks = max(ranks) if isinstance(ranks, list) else ranks
        if not ranks:
            continue
        fair = alloc["cpus_on_node"] / ranks
        shortfalls = []
        for label, version_shape in shape["version_shapes"]:
            per_rank = version_shape.get("cpus_per_rank")
            if per_rank is not None and per_rank + 1e-9 < fair:
                shortfalls.append({"slurm": label, "cpus_per_task": version_shape["cpus_per_task"],
                                   "cpus_per_rank": per_rank, "because": version_shape["cpus_source"]})
        if not shortfalls:
            continue
        per_task = alloc["cpus_on_node"] // (shape["tasks_per_node"] or 1)
        threads = max(1, int(fair))
        fix = "%s  # before line %d, for its %d rank(s) per task\n%s" % (
            command.line("export", "OMP_NUM_THREADS=%d" % threads), shape["line"],
            max(1, ranks // (shape["tasks_per_node"] or 1)),
            fix_text(job_step(facts, shape), Edits().set_srun("cpus-per-task", per_task),
                     "say it on the srun line, which every SLURM version honours (the job holds %d CPUs per node for "
                     "%d task(s))" % (alloc["cpus_on_node"], shape["tasks_per_node"] or 1),
                     "give srun --cpus-per-task=%d" % per_task))
        found.append(finding("doctor-cpus-not-given", dict(line_evidence(shape), **{
            "job_cpus_per_node": alloc["cpus_on_node"], "ranks_per_node": ranks, "fair_share": round(fair, 3),
            "given": shortfalls}), fix))
    return found


def rule_one_thread(facts, options):
    found = []
    for shape in torchrun_steps(facts["topology"]):
        threads = shape["threads_per_rank"]
        per_rank = shape["cpus_per_rank"]
        if per_rank is None:  # the fewest of the versions that start the step
            per_rank = min([s.get("cpus_per_rank") or 0 for _, s in shape["version_shapes"]
                            if not s["srun_refuses"]] or [0])
        if threads["value"] == 1 and threads["default"] == "torchrun" and per_rank and per_rank >= 2:
            found.append(finding("doctor-omp-one-thread", dict(line_evidence(shape), **{
                "nproc_per_node": shape["nproc_per_node"], "cpus_per_rank": per_rank, "threads": threads}),
                "%s  # before line %d (torchrun then leaves it as it is%s)" % (
                    command.line("export", "OMP_NUM_THREADS=%d" % int(per_rank)), shape["line"],
                    "; srun --export must pass it too" if shape["export"]["mode"] != "all" else "")))
    return found


def rule_gpus(facts, options):
    topo, found = facts["topology"], []
    for shape in topo["steps"]:
        gpus = allocation_of(topo, shape)["gpus_per_node"]
        ranks = shape.get("ranks_per_node")
        ranks = max(ranks) if isinstance(ranks, list) else ranks
        if not gpus or not ranks or ranks <= gpus:
            continue
        if shape.get("launcher_kind") == "torchrun":
            fix = fix_text(job_step(facts, shape), Edits().set_launcher("nproc-per-node", gpus), "one rank per GPU",
                           "give torchrun --nproc-per-node=%d" % gpus)
        else:
            fix = "#SBATCH --ntasks-per-node=%d  # one rank per GPU" % gpus
        found.append(finding("doctor-gpu-count-mismatch", dict(line_evidence(shape), ranks_per_node=ranks,
                                                               gpus_per_node=gpus), fix))
    return found


def multi_node(shape):
    if shape.get("launcher_kind") == "torchrun":
        return (shape.get("nnodes_max") or 1) > 1
    return (shape.get("nodes") or 1) > 1 and (shape.get("tasks") or 1) > 1


def rule_rendezvous(facts, options):
    found = []
    for shape in facts["topology"]["steps"]:
        rdzv = shape.get("rendezvous")
        if not rdzv or not multi_node(shape):
            continue
        host = rdzv["host_resolved"]
        if not (rdzv["given"].get("standalone") or (host is not None and is_loopback(host))):
            continue
        why = ("--standalone starts a private rendezvous on each node" if rdzv["given"].get("standalone") else
               "%s is this node itself on every node: each node waits at its own endpoint%s" % (
                   host or "(no endpoint)", "" if any(rdzv["given"].values()) else
                   " (no --rdzv-endpoint or --master-addr given: torchrun's default)"))
        port = rdzv["port"] if rdzv["port"] else 29400
        if shape.get("launcher_kind") == "torchrun":
            edits = Edits().set_launcher("standalone", None).set_launcher("master-addr", None).set_launcher(
                "master-port", None).set_launcher("rdzv-backend", "c10d").set_launcher(
                "rdzv-endpoint", "$MASTER_ADDR:%d" % port).set_launcher("rdzv-id", "$SLURM_JOB_ID")
            fix = fix_text(job_step(facts, shape), edits, "the c10d rendezvous at the job's first node",
                           "%s before it, and give torchrun %s" % (FIRST_NODE_COMMAND, " ".join(
                               [option("rdzv-backend", "c10d"), option("rdzv-endpoint", "$MASTER_ADDR:%d" % port),
                                option("rdzv-id", "$SLURM_JOB_ID")])))
        else:
            fix = "%s; %s  # before line %d" % (FIRST_NODE_COMMAND, command.line("export", "MASTER_PORT=%d" % port),
                                                 shape["line"])
        found.append(finding("doctor-rendezvous-unreachable", dict(line_evidence(shape), rendezvous=rdzv, why=why), fix))
    return found


def rule_unique(facts, options):
    found = []
    for shape in torchrun_steps(facts["topology"]):
        rdzv = shape.get("rendezvous")
        if not rdzv or not multi_node(shape) or rdzv["backend"] == "static" or rdzv["given"].get("standalone"):
            continue
        problems, edits = [], Edits()
        if rdzv["id"] in (None, "none") or JOB_ID not in (rdzv["id_resolved"] or JOB_ID):
            problems.append("--rdzv-id=%s is the same in every job: a second job at the same endpoint joins this "
                            "one's rendezvous" % rdzv["id"])
            edits.set_launcher("rdzv-id", "$SLURM_JOB_ID")
        host = rdzv["host_resolved"]
        if host and host != FIRST_NODE and not is_loopback(host) and rdzv["host_written"]:
            problems.append("the endpoint host %s is written into the script: the next allocation may not "
                            "include it" % host)
            edits.set_launcher("rdzv-endpoint", "$MASTER_ADDR:%d" % (rdzv["port"] or 29400))
        if problems:
            fix = fix_text(job_step(facts, shape), edits, "an id and endpoint of this job",
                           "give torchrun %s among its options" % option("rdzv-id", "$SLURM_JOB_ID"))
            if FIRST_NODE_COMMAND not in fix:
                fix += "\n%s  # the endpoint host from the job's nodes, if it needs one" % FIRST_NODE_COMMAND
            found.append(finding("doctor-rendezvous-not-unique", dict(line_evidence(shape), problems=problems,
                                                                      rendezvous=rdzv), fix))
    return found


def rule_ports(facts, options):
    """Steps that overlap in time (a step ended with & runs until `wait`) must not share a port:
    one finding per port, naming the first two steps and how many clash."""
    topo, clashes, running = facts["topology"], {}, []
    by_line = {}
    for shape in topo["steps"]:
        by_line.setdefault(shape["line"], shape)
    for entry in facts["job"]["steps"]:
        if entry["kind"] == "wait":
            running = []
            continue
        shape = by_line.get(entry["line"])
        if shape is None or not shape.get("rendezvous") or shape["rendezvous"]["port"] is None:
            continue
        port = shape["rendezvous"]["port"]
        other = next((o for o in running if o["rendezvous"]["port"] == port and o["line"] != shape["line"]), None)
        if other is not None:
            clash = clashes.setdefault(port, {"first": other, "second": shape, "steps": set()})
            clash["steps"].update((other["line"], shape["line"]))
        if shape["background"]:
            running.append(shape)
    found = []
    for port, clash in sorted(clashes.items()):
        shape = clash["second"]
        rdzv, given = shape["rendezvous"], shape["rendezvous"]["given"]
        edits = Edits()
        if given.get("rdzv-endpoint"):
            host = rdzv["host"] if plain_host(rdzv["host"]) else "$MASTER_ADDR"
            edits.set_launcher("rdzv-endpoint", "%s:%d" % (host.replace(FIRST_NODE, "$MASTER_ADDR"), port + 1))
        elif shape.get("launcher_kind") == "torchrun":
            edits.set_launcher("master-port", port + 1)
        else:
            edits.set_env("MASTER_PORT", port + 1)
        fix = fix_text(job_step(facts, shape), edits, "its own port, %d" % (port + 1),
                       "give it its own port, %d" % (port + 1))
        found.append(finding("doctor-port-clash", {
            "port": port, "first": line_evidence(clash["first"]), "second": line_evidence(shape),
            "steps_on_this_port": len(clash["steps"]),
            "why": "these steps run at once (the earlier ones end with &) and bind the same port on the node "
                   "that hosts them: the later ones fail with 'address already in use'"}, fix))
    return found


def plain_host(host):
    """A host word the doctor may carry into its own word: a name, an address, $NAME or the first node."""
    return bool(re.match(r"^([A-Za-z0-9_.-]+|\$[A-Za-z_][A-Za-z0-9_]*|\$\{[A-Za-z_][A-Za-z0-9_]*\}|%s)$"
                         % re.escape(FIRST_NODE), host or ""))


def rule_export(facts, options):
    """srun --export (or SRUN_EXPORT_ENV) without ALL: the tasks get only the names it lists, and SLURM_*.
    A program named without a path then is not found (no PATH); variables the script exported for the
    launch do not reach the ranks."""
    found, seen = [], set()
    for shape in facts["topology"]["steps"]:
        export = shape.get("export") or {}
        if export.get("mode", "all") == "all" or shape["line"] in seen:
            continue
        seen.add(shape["line"])
        step = job_step(facts, shape)
        given = export["given"]
        if not export["program_found"]:
            value = "PATH" if export["mode"] == "none" else "PATH," + given
            fix = fix_text(step, Edits().set_srun("export", value) if export["source"] == "srun --export" else
                           Edits().set_env("SRUN_EXPORT_ENV", value), "PATH reaches the tasks",
                           "give srun --export=PATH,... (or the program's full path)",
                           "; or name the program by its full path")
            found.append(finding("doctor-export-program-not-found", dict(line_evidence(shape), export=export, **{
                "program": step["words"][step["srun_options_end"]]["value"][:200]
                if step.get("srun_options_end") is not None and step["srun_options_end"] < len(step["words"]) else None,
                "slurm_says": "slurmstepd: error: execve(): <program>: No such file or directory (exit code 2)"}), fix))
        dropped = [name for name in export["dropped"] if name in LAUNCH_VARIABLES or name.startswith(("NCCL_", "GLOO_"))]
        setup = [entry for entry in facts["job"]["environment_setup"] if entry["line"] < shape["line"]]
        if dropped or setup:
            names = [name for name in dropped if name != "PATH"]
            fix = fix_text(step, Edits().set_srun("export", "ALL") if export["source"] == "srun --export" else
                           Edits().set_env("SRUN_EXPORT_ENV", "ALL"), "the script's variables reach the tasks",
                           "give srun --export=ALL", "; or keep the list and add %s" % ",".join(names)
                           if names else "")
            found.append(finding("doctor-export-drops-variables", dict(line_evidence(shape), export=export, **{
                "dropped": dropped, "environment_setup_lines": [entry["line"] for entry in setup][:16],
                "why": "srun --export=%s passes only %s to the tasks: what the script exported%s is not there" % (
                    given, "SLURM_* variables" if export["mode"] == "none" else "the names it lists and SLURM_*",
                    " and what its environment setup (source, module load, conda activate) set" if setup else "")}),
                fix))
    return found


# --- the logs -------------------------------------------------------------------------------------------

LOG_FIXES = {
    "doctor-log-store-lost": "# the agent that hosted the store exited first: check for more agents than --nnodes (one "
                             "torchrun per node: #SBATCH --ntasks-per-node=1) or a crashed node-0 agent earlier in the log",
    "doctor-log-loopback": FIRST_NODE_COMMAND + "  # a MASTER_ADDR every node reaches; and export GLOO_SOCKET_IFNAME="
                                                "<the interface that routes to it: ip route get $MASTER_ADDR>",
    "doctor-log-timeout": "# count what joined against what was asked: torchrun --nnodes=$SLURM_NNODES and one agent per "
                          "node; if all joined, a rank died or hung earlier in the log",
    "doctor-log-address-in-use": "export MASTER_PORT=$((29500 + SLURM_JOB_ID % 1000))  # a port of its own for each "
                                 "concurrent step and each job sharing a node",
    "doctor-log-duplicate-device": "# one rank per GPU: torchrun --nproc-per-node=<GPUs per node>, and "
                                   "torch.cuda.set_device(LOCAL_RANK) before init_process_group",
}


def rule_log_signatures(facts, options):
    found = []
    for log in facts["logs"]:
        for finding_id, entry in sorted(log["signatures"].items()):
            evidence = dict(entry)
            if finding_id == "doctor-log-store-lost" and log["srun_failed_tasks"]:
                evidence["srun_failed_tasks"] = log["srun_failed_tasks"][:8]
                evidence["torchrun_agents_logged"] = log["agents"]
            found.append(finding(finding_id, evidence, LOG_FIXES[finding_id]))
    return found


def rule_log_truncated(facts, options):
    found = []
    for entry in facts["inputs"]["logs"]:
        if entry["read"]["skipped_bytes"] or entry["partial"]:
            found.append(finding("doctor-log-truncated", dict(entry["read"], file=entry["path"],
                                                              deadline_reached=entry["partial"]),
                                 "%s | head  # the middle of the log" % command.line(
                                     "grep", "-n", "-E", "Error|error:|Timed out", entry["path"])))
    return found


def rule_input(facts, options):
    job, topo, found = facts["job"], facts["topology"], []
    if job["not_understood"]:
        found.append(finding("doctor-line-not-understood", {
            "lines": [dict(item, text=item["text"][:EVIDENCE_CHARS]) for item in job["not_understood"][:20]],
            "count": len(job["not_understood"]),
            "note": "nothing in the script was run or expanded; the topology leaves out what these lines decide"},
            "# write the launch with literal values or plain $VARIABLES (export NPROC=4, then --nproc-per-node=$NPROC) "
            "so the doctor can follow it, or pass the launch line itself with --command"))
    if job["source"] != "log" and not [s for s in topo["steps"] if s["launcher_kind"] in ("torchrun", "mpirun")
                                       or s["launcher"] == "srun"]:
        found.append(finding("doctor-no-launch-line", {"steps_read": len(topo["steps"]),
                                                      "directives": len(job["directives"]),
                                                      "lines_not_read": [item["line"] for item in job["not_understood"]][:20]},
                             "%s  # the job script that runs srun/torchrun/mpirun, or the launch line itself" %
                             TOOL.command("--command", "srun torchrun ...", "--sbatch", "--nodes=2 --ntasks-per-node=1")))
    return found


RULES = (rule_encoding, rule_input, rule_invalid_counts, rule_srun_refuses, rule_nested_launcher, rule_counts,
         rule_cpus, rule_one_thread, rule_gpus, rule_rendezvous, rule_unique, rule_ports, rule_export,
         rule_log_signatures, rule_log_truncated)
