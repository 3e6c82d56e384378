"""Each rule: the parsed job, its topology and the scanned logs -> findings, each with the line that
shows the mistake and the corrected line. Fixes are text the doctor writes; nothing from the input
is placed in a fix except the user's own launch line, quoted as evidence or edited word by word."""

import re

from .findings import finding
from .parse import FIRST_NODE
from .topology import JOB_ID, is_loopback

EVIDENCE_CHARS = 500
FIRST_NODE_COMMAND = 'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)'


def line_evidence(step):
    return {"line": step["line"], "text": step["text"][:EVIDENCE_CHARS]}


def directive(alloc_sources, name):
    source = alloc_sources.get(name)
    return source["text"][:EVIDENCE_CHARS] if source else None


def replace_option(text, names, value):
    """`text` with the first option in `names` set to `value` (added after the launcher word if absent)."""
    for name in names:
        pattern = re.compile(r"(%s)(=|\s+)(\"[^\"]*\"|'[^']*'|\S+)" % re.escape(name))
        if pattern.search(text):
            return pattern.sub(lambda m: "%s=%s" % (m.group(1), value), text, count=1)
    return None


def torchrun_steps(topo):
    return [s for s in topo["steps"] if s.get("launcher_kind") == "torchrun"]


def rule_nested_launcher(job, topo, logs):
    found = []
    alloc = topo["allocation"]
    for step in torchrun_steps(topo):
        if step["launcher"] != "srun" or not step["agents_per_node"] or step["agents_per_node"] <= 1:
            continue
        cores = alloc["cpus_on_node"]
        fix_lines = ["#SBATCH --ntasks-per-node=1"]
        if cores:
            fix_lines.append("#SBATCH --cpus-per-task=%d" % cores)
        fix = ("start one torchrun agent per node: in the job script use %s (replacing %s), and keep the launch "
               "line; or, to keep the other steps as they are, run this step as: %s"
               % (" and ".join("`%s`" % line for line in fix_lines),
                  "`%s`" % directive(job["option_sources"], "ntasks-per-node") if directive(
                      job["option_sources"], "ntasks-per-node") else "the task count",
                  srun_one_per_node(step, alloc)))
        found.append(finding("doctor-nested-launcher", dict(line_evidence(step), **{
            "srun_tasks": step["tasks"], "nodes": step["nodes"], "agents_per_node": step["agents_per_node"],
            "torchrun_nnodes": step["nnodes"], "agents_joining": step["agents_joined"],
            "agents_failing": step["agents_failing"], "world_size": step["world_size"],
            "why": "srun starts one torchrun per task, so %d agents on %d nodes race for a %s-agent rendezvous: "
                   "the first %d form a world of %s ranks squeezed into their tasks' CPUs, the rest fail with "
                   "RendezvousConnectionError when the store's host exits, and SLURM marks the step FAILED"
                   % (step["tasks"], step["nodes"], step["nnodes"], step["agents_joined"], step["world_size"])}),
            fix))
    for log in logs:
        if log["agents"] < 2 or "doctor-log-store-lost" not in log["signatures"]:
            continue
        per_node = {}
        for entry in log["srun_failed_tasks"]:
            per_node[entry["node"]] = per_node.get(entry["node"], 0) + entry["count"]
        nodes = topo["allocation"]["nodes"] if job["source"] != "log" else len(per_node) or None
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
            "start one torchrun per node: #SBATCH --ntasks-per-node=1 with #SBATCH --cpus-per-task=<all the "
            "cores the node's ranks need>; %s JOB_SCRIPT shows the corrected lines" % TOOL_COMMAND()))
    return found


def TOOL_COMMAND():
    from .findings import TOOL
    return TOOL.command()


def srun_one_per_node(step, alloc):
    cores = alloc["cpus_on_node"]
    text = step["text"].strip()
    head = "srun --ntasks=%d --ntasks-per-node=1%s" % (
        step["nodes"] or 1, " --cpus-per-task=%d" % cores if cores else "")
    rest = re.sub(r"^.*?\bsrun\b((\s+-\S+(\s+(?!-)\S+)?)*?)\s+(?=\S*(torchrun|python))", "", text, count=1)
    return "`%s %s`" % (head, rest if rest != text else "<the torchrun command>")


def rule_counts(job, topo, logs):
    found = []
    alloc = topo["allocation"]
    for step in topo["steps"]:
        problems = list(step["notes"]) if step["step_fails"] or any("ignores" in n for n in step["notes"]) else []
        fixes = []
        if step["step_fails"]:
            fixes.append("ask for no more CPUs per task than the job holds per node: srun --cpus-per-task=%d "
                         "(the job's %s CPUs per node / %s tasks)" % (
                             max(1, (alloc["cpus_on_node"] or 1) // (step["tasks_per_node"] or 1)),
                             alloc["cpus_on_node"], step["tasks_per_node"]))
        if any("ignores" in n for n in step["notes"]):
            fixes.append("give srun the total too: srun --ntasks=%d %s" % (
                (whole_int(re.search(r"--ntasks-per-node[= ](\d+)", step["text"])) or 1) * (step["nodes"] or 1),
                "--ntasks-per-node=%s ..." % (whole_int(re.search(r"--ntasks-per-node[= ](\d+)", step["text"])) or 1)))
        if step["launcher"] == "srun" and alloc["nodes"] and step["nodes"] and step["nodes"] > alloc["nodes"]:
            problems.append("srun asks for %d nodes; the job holds %d" % (step["nodes"], alloc["nodes"]))
            fixes.append("srun -N %d (or #SBATCH --nodes=%d)" % (alloc["nodes"], step["nodes"]))
        if step.get("launcher_kind") == "torchrun":
            agents, low, high = step["agents"], step["nnodes_min"], step["nnodes_max"]
            per_node = step["agents_per_node"] or 1
            if agents is not None and low and agents < low:
                problems.append("torchrun waits for %s agents (--nnodes=%s) but %s starts %d: the rendezvous "
                                "times out" % (low, step["nnodes"], step["launcher"], agents))
                fixes.append(nnodes_fix(step, agents, alloc))
            elif agents is not None and high and agents > high and per_node == 1:
                problems.append("%d agents start for a %d-agent rendezvous: %d fail" % (agents, high, agents - high))
                fixes.append(nnodes_fix(step, agents, alloc))
        exported = step.get("world_size_exported")
        if exported is not None and step.get("launcher_kind") in ("srun", "none"):
            value = re.match(r"^\d+$", str(exported))
            if value and step["world_size"] and int(exported) != step["world_size"]:
                problems.append("WORLD_SIZE=%s but the step starts %d ranks" % (exported, step["world_size"]))
                fixes.append("WORLD_SIZE=$SLURM_NTASKS inside the srun command (bash -c '...'), not a number")
        if problems:
            found.append(finding("doctor-count-mismatch", dict(line_evidence(step), problems=problems,
                                                               nodes=step["nodes"], tasks=step["tasks"],
                                                               job_nodes=alloc["nodes"]), "; ".join(fixes)))
    for log in logs:
        if log["ntasks_per_node_ignored"]:
            found.append(finding("doctor-count-mismatch", {"log": log["ntasks_per_node_ignored"],
                                                           "problems": ["srun ignored --ntasks-per-node"]},
                                 "give srun --ntasks=<nodes x tasks per node> with --ntasks-per-node (srun ignores "
                                 "--ntasks-per-node alone when the job's SLURM_NTASKS differs)"))
    return dedupe(found)


def whole_int(match):
    return int(match.group(1)) if match else None


def nnodes_fix(step, agents, alloc):
    text = step["text"].strip()
    nodes = alloc["nodes"] or agents
    if step["launcher"] != "srun":
        return ("start one agent per node: srun --ntasks=%d --ntasks-per-node=1%s %s"
                % (nodes, " --cpus-per-task=%d" % alloc["cpus_on_node"] if alloc["cpus_on_node"] else "", text))
    fixed = replace_option(text, ("--nnodes",), "$SLURM_NNODES")
    return fixed or "torchrun --nnodes=$SLURM_NNODES ..."


def dedupe(found):
    seen, kept = set(), []
    for item in found:
        key = (item["id"], repr(item["evidence"].get("line")), repr(item["evidence"].get("log")))
        if key not in seen:
            seen.add(key)
            kept.append(item)
    return kept


def rule_cpus(job, topo, logs):
    found = []
    alloc = topo["allocation"]
    for step in topo["steps"]:
        if step["step_fails"] or not alloc["cpus_on_node"] or (step.get("agents_per_node") or 1) > 1:
            continue  # a nested launcher is its own finding, with its own fix
        ranks = step.get("ranks_per_node")
        ranks = max(ranks) if isinstance(ranks, list) else ranks
        if not ranks:
            continue
        fair = alloc["cpus_on_node"] / ranks
        shortfalls = []
        for label, shape in step["version_shapes"]:
            per_rank = shape.get("cpus_per_rank")
            if per_rank is not None and per_rank + 1e-9 < fair:
                shortfalls.append({"slurm": label, "cpus_per_task": shape["cpus_per_task"],
                                   "cpus_per_rank": per_rank, "because": shape["cpus_source"]})
        if not shortfalls:
            continue
        per_task = alloc["cpus_on_node"] // (step["tasks_per_node"] or 1)
        found.append(finding("doctor-cpus-not-given", dict(line_evidence(step), **{
            "job_cpus_per_node": alloc["cpus_on_node"], "ranks_per_node": ranks, "fair_share": round(fair, 3),
            "given": shortfalls}),
            "say it on the srun line, which every SLURM version honours: srun --cpus-per-task=%d ... (the job "
            "holds %d CPUs per node for %d task(s)), and export OMP_NUM_THREADS=%d for its %d rank(s) per task"
            % (per_task, alloc["cpus_on_node"], step["tasks_per_node"] or 1,
               max(1, int(fair)), max(1, ranks // (step["tasks_per_node"] or 1)))))
    return found


def rule_one_thread(job, topo, logs):
    found = []
    for step in torchrun_steps(topo):
        threads = step["threads_per_rank"]
        per_rank = step["cpus_per_rank"]
        if per_rank is None:
            per_rank = min((s.get("cpus_per_rank") or 0) for _, s in step["version_shapes"])
        if threads["value"] == 1 and threads["source"].startswith("torchrun") and per_rank and per_rank >= 2:
            found.append(finding("doctor-omp-one-thread", dict(line_evidence(step), **{
                "nproc_per_node": step["nproc_per_node"], "cpus_per_rank": per_rank, "threads": threads}),
                "export OMP_NUM_THREADS=%d before line %d (torchrun then leaves it as it is)" % (
                    int(per_rank), step["line"])))
    return found


def rule_gpus(job, topo, logs):
    gpus = topo["allocation"]["gpus_per_node"]
    found = []
    if not gpus:
        return found
    for step in topo["steps"]:
        ranks = step.get("ranks_per_node")
        ranks = max(ranks) if isinstance(ranks, list) else ranks
        if ranks and ranks > gpus:
            found.append(finding("doctor-gpu-count-mismatch", dict(line_evidence(step), ranks_per_node=ranks,
                                                                   gpus_per_node=gpus),
                                 "one rank per GPU: %s" % ("torchrun --nproc-per-node=%d" % gpus
                                                           if step.get("launcher_kind") == "torchrun"
                                                           else "#SBATCH --ntasks-per-node=%d" % gpus)))
    return found


def multi_node(step):
    if step.get("launcher_kind") == "torchrun":
        return (step.get("nnodes_max") or 1) > 1
    return (step.get("nodes") or 1) > 1 and (step.get("tasks") or 1) > 1


def rule_rendezvous(job, topo, logs):
    found = []
    for step in topo["steps"]:
        rdzv = step.get("rendezvous")
        if not rdzv or not multi_node(step):
            continue
        host = rdzv["host_resolved"]
        if rdzv["given"].get("standalone") or (host is not None and is_loopback(host)):
            why = ("--standalone starts a private rendezvous on each node" if rdzv["given"].get("standalone") else
                   "%s is this node itself on every node: each node waits at its own endpoint%s" % (
                       host or "(no endpoint)", "" if any(rdzv["given"].values()) else
                       " (no --rdzv-endpoint or --master-addr given: torchrun's default)"))
            port = rdzv["port"] if rdzv["port"] else 29400
            if step.get("launcher_kind") == "torchrun":
                fixed = replace_option(step["text"].strip(), ("--rdzv-endpoint", "--rdzv_endpoint"),
                                       "$MASTER_ADDR:%d" % port)
                fixed = fixed or "torchrun --rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:%d ..." % port
                fixed = fixed.replace("--standalone", "--rdzv-backend=c10d --rdzv-id=$SLURM_JOB_ID")
            else:
                fixed = "export MASTER_PORT=%d before the srun line" % port
            found.append(finding("doctor-rendezvous-unreachable", dict(line_evidence(step), rendezvous=rdzv, why=why),
                                 "%s before line %d, then: %s" % (FIRST_NODE_COMMAND.replace("MASTER_ADDR=",
                                                                                             "export MASTER_ADDR="),
                                                                   step["line"], fixed)))
    return found


def rule_unique(job, topo, logs):
    found = []
    for step in torchrun_steps(topo):
        rdzv = step.get("rendezvous")
        if not rdzv or not multi_node(step) or rdzv["backend"] == "static" or rdzv["given"].get("standalone"):
            continue
        problems = []
        if rdzv["id"] in (None, "none") or JOB_ID not in (rdzv["id_resolved"] or JOB_ID):
            problems.append("--rdzv-id=%s is the same in every job: a second job at the same endpoint joins this "
                            "one's rendezvous" % rdzv["id"])
        host = rdzv["host_resolved"]
        if host and host != FIRST_NODE and not is_loopback(host) and "$" not in rdzv["host"]:
            problems.append("the endpoint host %s is written into the script: the next allocation may not "
                            "include it" % host)
        if problems:
            fixed = replace_option(step["text"].strip(), ("--rdzv-id", "--rdzv_id"), "$SLURM_JOB_ID") or (
                step["text"].strip() + " --rdzv-id=$SLURM_JOB_ID")
            found.append(finding("doctor-rendezvous-not-unique", dict(line_evidence(step), problems=problems,
                                                                      rendezvous=rdzv),
                                 "%s; derive the host from the job: export %s" % (fixed, FIRST_NODE_COMMAND)))
    return found


def rule_ports(job, topo, logs):
    """Steps that overlap in time (a step ended with & runs until `wait`) must not share a port:
    one finding per port, naming the first two steps and how many clash."""
    clashes, running = {}, []
    by_line = dict((s["line"], s) for s in topo["steps"])
    for entry in job["steps"]:
        if entry["kind"] == "wait":
            running = []
            continue
        step = by_line.get(entry["line"])
        if step is None or not step.get("rendezvous") or step["rendezvous"]["port"] is None:
            continue
        port = step["rendezvous"]["port"]
        other = next((o for o in running if o["rendezvous"]["port"] == port and o["line"] != step["line"]), None)
        if other is not None:
            clash = clashes.setdefault(port, {"first": other, "second": step, "steps": set()})
            clash["steps"].update((other["line"], step["line"]))
        if step["background"]:
            running.append(step)
    found = []
    for port, clash in sorted(clashes.items()):
        step = clash["second"]
        fixed = replace_option(step["text"].strip(), ("--rdzv-endpoint", "--rdzv_endpoint"),
                               "%s:%d" % (step["rendezvous"]["host"] or "$MASTER_ADDR", port + 1)) or \
            replace_option(step["text"].strip(), ("--master-port", "--master_port"), str(port + 1)) or \
            "MASTER_PORT=%d for the second step" % (port + 1)
        found.append(finding("doctor-port-clash", {
            "port": port, "first": line_evidence(clash["first"]), "second": line_evidence(step),
            "steps_on_this_port": len(clash["steps"]),
            "why": "these steps run at once (the earlier ones end with &) and bind the same port on the node "
                   "that hosts them: the later ones fail with 'address already in use'"},
            "give each concurrent step its own port, e.g. line %d as: %s" % (step["line"], fixed)))
    return found


def rule_log_signatures(job, topo, logs):
    found = []
    fixes = {
        "doctor-log-store-lost": "the agent that hosted the store exited first: check for more agents than "
                                 "--nnodes (one torchrun per node: #SBATCH --ntasks-per-node=1) or a crashed "
                                 "node-0 agent earlier in the log",
        "doctor-log-loopback": "export GLOO_SOCKET_IFNAME=<the interface that routes to MASTER_ADDR: "
                               "ip route get $MASTER_ADDR> and use a MASTER_ADDR every node reaches (%s)"
                               % FIRST_NODE_COMMAND,
        "doctor-log-timeout": "count what joined against what was asked: torchrun --nnodes=$SLURM_NNODES and one "
                              "agent per node; if all joined, a rank died or hung earlier in the log",
        "doctor-log-address-in-use": "give each concurrent step (and each job sharing a node) its own port: "
                                     "MASTER_PORT=$((29500 + SLURM_JOB_ID % 1000)) or --rdzv-endpoint=HOST:0 "
                                     "is not allowed, pick a distinct one",
        "doctor-log-duplicate-device": "one rank per GPU: torchrun --nproc-per-node=<GPUs per node>, and "
                                       "torch.cuda.set_device(LOCAL_RANK) before init_process_group",
    }
    for log in logs:
        for finding_id, entry in sorted(log["signatures"].items()):
            evidence = dict(entry)
            if finding_id == "doctor-log-store-lost" and log["srun_failed_tasks"]:
                evidence["srun_failed_tasks"] = log["srun_failed_tasks"][:8]
                evidence["torchrun_agents_logged"] = log["agents"]
            found.append(finding(finding_id, evidence, fixes[finding_id]))
    return found


def rule_input(job, topo, logs):
    found = []
    if job.get("steps_not_analysed"):
        job["not_understood"].append({"line": None, "text": "", "why": [
            "%d commands past the first %d launch lines were counted, not analysed" % (
                job["steps_not_analysed"], len(job["steps"]))]})
    if job["not_understood"]:
        found.append(finding("doctor-line-not-understood", {
            "lines": [dict(item, text=item["text"][:EVIDENCE_CHARS]) for item in job["not_understood"][:20]],
            "count": len(job["not_understood"]),
            "note": "nothing in the script was run or expanded; the topology leaves out what these lines decide"},
            "write the launch with literal values or plain $VARIABLES (e.g. export NPROC=4, then "
            "--nproc-per-node=$NPROC) so the doctor can follow it, or pass the launch line itself with --command"))
    if job["source"] != "log" and not [s for s in topo["steps"] if s["launcher_kind"] in ("torchrun", "mpirun") or s["launcher"] == "srun"]:
        found.append(finding("doctor-no-launch-line", {"steps_read": len(topo["steps"]),
                                                      "directives": len(job["directives"])},
                             "pass the job script that runs srun/torchrun/mpirun, or the launch line itself: "
                             "%s --command 'srun torchrun ...' --sbatch '--nodes=2 --ntasks-per-node=1'"
                             % TOOL_COMMAND()))
    return found


RULES = (rule_input, rule_nested_launcher, rule_counts, rule_cpus, rule_one_thread, rule_gpus, rule_rendezvous,
         rule_unique, rule_ports, rule_log_signatures)


def diagnose(job, topo, logs):
    findings = []
    for rule in RULES:
        findings.extend(rule(job, topo, logs))
    return findings
