"""What a job starts, computed from its words: the allocation (per heterogeneous component), then per step
(and per component a step runs in) the tasks per node, the CPUs each task is bound to (by this SLURM
version's srun), the variables that reach the tasks (srun --export), the launcher agents, ranks, threads,
GPUs and the rendezvous. Plain bounded arithmetic over the parsed options; the SLURM behaviours it
encodes are the ones measured on a real 22.05.8 cluster (tests/test_launch_cluster.py) or cited by
release in references/distributed-workflows.md."""

import math
import re

from . import counts
from .shell import FIRST_NODE

# Which variable srun reads as its --cpus-per-task, by version (SLURM's RELEASE_NOTES of 22.05 and 23.11).
SRUN_CPU_VARIABLES = (((0, 0), "SLURM_CPUS_PER_TASK"), ((22, 5), "SRUN_CPUS_PER_TASK"),
                      ((23, 11), "SLURM_CPUS_PER_TASK"))
VERSION_RANGES = (("before 22.05", (21, 8)), ("22.05 to 23.02", (22, 5)), ("23.11 and later", (23, 11)))
# srun options newer than some versions: an older srun exits 255 ("unrecognized option", measured on 22.05.8)
# and starts no step. --external-launcher: SLURM's RELEASE_NOTES of slurm-23-11-0-1 and its srun.1.
SRUN_OPTIONS_SINCE = {"external-launcher": (23, 11)}
# What srun --external-launcher ignores (srun.1 of 23.11): it starts one task per node of the step, and the
# task holds all the job's CPUs and GPUs there (step_mgr.c, _build_ext_launcher_step).
EXTERNAL_LAUNCHER_IGNORES = ("ntasks", "ntasks-per-node", "ntasks-per-socket", "ntasks-per-core", "ntasks-per-gpu",
                             "cpus-per-task", "cpus-per-gpu", "mem", "mem-per-cpu", "mem-per-gpu", "gres",
                             "tres-per-task")
JOB_ID = "<job id>"
TASK_VALUE = "<per task>"
VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")
LOOPBACK = re.compile(r"^(localhost|127\.[0-9.]+|::1|0\.0\.0\.0|ip6-localhost|)$")


def parse_version(text):
    match = re.search(r"(\d{2})\.(\d{2})(?:\.(\d+))?", text or "")
    return tuple(int(part) for part in match.groups() if part is not None) if match else None


def srun_cpu_variable(version):
    chosen = None
    for since, name in SRUN_CPU_VARIABLES:
        if tuple(version[:2]) >= since:
            chosen = name
    return chosen


def whole(text, cap=counts.TASKS_MAX):
    """A bounded whole number from text like "4", "4-8" (the lower bound), "2k" (nodes) or "a100:4" (the
    count); None otherwise, or past `cap`."""
    if isinstance(text, bool) or text is None:
        return None
    text = str(text).strip()
    bounds = counts.nodes_range(text)
    if bounds is not None and bounds[0] > 0 and (bounds[1] is None or bounds[1] >= bounds[0]):
        return bounds[0] if bounds[0] <= cap else None
    match = re.match(r"^(?:[A-Za-z0-9_]+:)*([0-9]+)$", text)
    return counts.number(match.group(1), cap) if match else None


def gpu_count(gres):
    """GPUs per node from --gres (gpu:4, gpu:a100:4, gres/gpu:2), or None."""
    for part in str(gres or "").split(","):
        fields = part.replace("gres/", "").split(":")
        if fields[0] == "gpu":
            return whole(fields[-1], counts.GPUS_MAX) if len(fields) > 1 else 1
    return None


def valid(options, name, cap):
    """An option's count when it is valid (the invalid ones are findings of their own), else None."""
    if counts.check(name, options.get(name)):
        return None
    return whole(options.get(name), cap)


def allocation(options):
    nodes_raw = options.get("nodes")
    ntasks = valid(options, "ntasks", counts.TASKS_MAX)
    per_node = valid(options, "ntasks-per-node", counts.PER_NODE_MAX)
    nodes = valid(options, "nodes", counts.NODES_MAX) if nodes_raw else (1 if ntasks is None or per_node else None)
    if nodes is None and not nodes_raw and ntasks and per_node:
        nodes = math.ceil(ntasks / per_node)
    cpus = valid(options, "cpus-per-task", counts.CPUS_PER_TASK_MAX)
    tasks_on_node = per_node or (math.ceil(ntasks / nodes) if ntasks and nodes else 1)
    gpus = valid(options, "gpus-per-node", counts.GPUS_MAX) or gpu_count(options.get("gres"))
    per_task = valid(options, "gpus-per-task", counts.GPUS_MAX)
    if gpus is None and per_task:
        gpus = per_task * tasks_on_node
    total = valid(options, "gpus", counts.GPUS_MAX * counts.NODES_MAX)
    if gpus is None and total and nodes:
        gpus = math.ceil(total / nodes)
    if gpus is None and not any(k in options for k in ("gpus-per-node", "gres", "gpus-per-task", "gpus",
                                                       "gpus-per-socket", "tres-per-task")):
        gpus = 0  # nothing asked: SLURM gives the job no GPU
    exclusive = "exclusive" in options
    return {
        "nodes": nodes, "nodes_range": nodes_raw if nodes_raw and not str(nodes_raw).isdigit() else None,
        "ntasks": ntasks if ntasks else (per_node * nodes if per_node and nodes else None),
        "ntasks_per_node": per_node, "tasks_on_node": tasks_on_node,
        "cpus_per_task": cpus if cpus else 1, "cpus_per_task_set": bool(cpus),
        # CR_Core: a job holds its tasks' CPUs on each node; --exclusive holds the whole node (count unknown).
        "cpus_on_node": None if exclusive else tasks_on_node * (cpus or 1),
        "gpus_per_node": gpus, "exclusive": exclusive,
    }


class Resolver(object):
    """$NAME and ${NAME:-default} in a word, from the script's own assignments and the SLURM variables
    the allocation sets in the batch shell; None when something stays unknown."""

    def __init__(self, allocs, exports, env=None):
        alloc = allocs[0]
        known = {"SLURM_JOB_ID": JOB_ID, "SLURM_JOBID": JOB_ID, "SLURM_PROCID": TASK_VALUE,
                 "SLURM_LOCALID": TASK_VALUE, "SLURM_NODEID": TASK_VALUE, "SLURMD_NODENAME": TASK_VALUE,
                 "HOSTNAME": TASK_VALUE}
        if alloc["nodes"]:
            known["SLURM_NNODES"] = known["SLURM_JOB_NUM_NODES"] = str(alloc["nodes"])
        if alloc["ntasks"]:
            known["SLURM_NTASKS"] = known["SLURM_NPROCS"] = str(alloc["ntasks"])
        if alloc["ntasks_per_node"]:
            known["SLURM_NTASKS_PER_NODE"] = str(alloc["ntasks_per_node"])
        # a heterogeneous job's batch shell has no SLURM_CPUS_PER_TASK (22.05.8): only *_HET_GROUP_<n>
        if alloc["cpus_per_task_set"] and len(allocs) == 1:
            known["SLURM_CPUS_PER_TASK"] = str(alloc["cpus_per_task"])
        if alloc["gpus_per_node"]:
            known["SLURM_GPUS_ON_NODE"] = known["SLURM_GPUS_PER_NODE"] = str(alloc["gpus_per_node"])
        if len(allocs) > 1:
            for index, component in enumerate(allocs):
                for name, key in (("SLURM_NNODES", "nodes"), ("SLURM_JOB_NUM_NODES", "nodes"), ("SLURM_NTASKS", "ntasks"),
                                  ("SLURM_CPUS_PER_TASK", "cpus_per_task")):
                    if component[key] and (key != "cpus_per_task" or component["cpus_per_task_set"]):
                        known["%s_HET_GROUP_%d" % (name, index)] = str(component[key])
        self.values = dict(known)
        for name, entry in exports.items():
            if entry.get("value") is not None:
                self.values[name] = entry["value"]
        self.values.update(env or {})

    def resolve(self, text, depth=0):
        if text is None or depth > 5:
            return None
        unknown = []

        def substitute(match):
            name = match.group(1) or match.group(4)
            value = self.values.get(name)
            if value is None and match.group(2):
                value = match.group(3)
            if value is None:
                unknown.append(name)
                return ""
            return self.resolve(value, depth + 1) or ""
        resolved = VARIABLE.sub(substitute, str(text)[:2000])
        if unknown or "$" in resolved:
            return None
        return resolved

    def number(self, text, cap=counts.TASKS_MAX):
        value = self.resolve(text)
        return whole(value, cap) if value is not None else None


# --- the variables that reach a step's tasks (srun --export) -------------------------------------------

def export_rule(step):
    """How srun passes the batch shell's variables to its tasks: {"mode": all|none|list, "names", "values",
    "given": the option's text, "source"}. Measured on 22.05.8: NONE (and NIL) keep only SLURM_* (no PATH:
    a program named without a path fails "execve(): NAME: No such file or directory"); a list without ALL
    passes only the listed names; ALL,NAME=value passes everything and the script's own NAME wins."""
    given, source = None, None
    if step["srun"] is not None and isinstance(step["srun"].get("export"), str):
        given, source = step["srun"]["export"], "srun --export"
    elif step["launcher"] == "srun":
        batch = dict((k, v.get("value")) for k, v in step["exports"].items() if v.get("exported"))
        batch.update(step.get("env") or {})
        if batch.get("SRUN_EXPORT_ENV"):
            given, source = batch["SRUN_EXPORT_ENV"], "SRUN_EXPORT_ENV"
    if given is None:
        return {"mode": "all", "names": [], "values": {}, "given": None, "source": "default"}
    items = [item for item in str(given).split(",") if item]
    head = items[0].upper() if items else "ALL"
    if head in ("NONE", "NIL"):
        return {"mode": "none", "names": [], "values": {}, "given": given, "source": source}
    names, values = [], {}
    for item in items[1:] if head == "ALL" else items:
        name, equals, value = item.partition("=")
        if equals:
            values[name] = value
        else:
            names.append(name)
    return {"mode": "all" if head == "ALL" else "list", "names": names, "values": values, "given": given,
            "source": source}


def step_env(step, program):
    """(variables the step's processes see, the export rule, the script's variables that do not reach
    them): exported ones and the srun line's own assignments, filtered by srun --export, then the
    program's own (env A=1, a shell's exports)."""
    batch = dict((k, v["value"]) for k, v in step["exports"].items() if v.get("exported") and v["value"] is not None)
    batch.update(step.get("env") or {})
    rule = export_rule(step)
    if rule["mode"] == "all":
        env = dict(rule["values"])
        env.update(batch)
    elif rule["mode"] == "none":
        env = {}
    else:
        env = dict((name, batch[name]) for name in rule["names"] if name in batch)
        env.update(rule["values"])
    dropped = sorted(name for name in batch if name not in env)
    env.update(program.get("env") or {})
    return env, rule, dropped


def program_reached(step, rule, env):
    """Whether srun finds the program it starts: a word without a '/' needs PATH in the tasks' environment."""
    if step["launcher"] != "srun" or rule["mode"] == "all":
        return True
    first = step["words"][step["srun_options_end"]]["value"] if step["srun_options_end"] < len(step["words"]) else ""
    return "/" in first or "PATH" in env or "PATH" in rule["names"] or "PATH" in rule["values"]


# --- one step --------------------------------------------------------------------------------------------

def srun_tasks(alloc, options, resolver):
    """(nodes, tasks, what srun ignored): srun's counts against the job's (the allocation's SLURM_NTASKS)."""
    nodes = resolver.number(options.get("nodes"), counts.NODES_MAX) if options.get("nodes") else alloc["nodes"]
    inherited = alloc["ntasks"]
    ignored = None
    if options.get("ntasks"):
        tasks = resolver.number(options["ntasks"])
    elif options.get("ntasks-per-node"):
        per_node = resolver.number(options["ntasks-per-node"], counts.PER_NODE_MAX)
        if per_node and nodes and inherited and per_node * nodes != inherited:
            # 22.05.8, measured: "srun: Warning: can't honor --ntasks-per-node set to 1 which doesn't match
            # the requested tasks 4 with the number of requested nodes 2. Ignoring --ntasks-per-node."
            ignored = {"ntasks_per_node": per_node, "job_tasks": inherited, "nodes": nodes}
            tasks = inherited
        else:
            tasks = per_node * nodes if per_node and nodes else None
    else:
        tasks = inherited if inherited else nodes
    return nodes, tasks, ignored


def srun_refuses(options, version):
    """{"option", "since"} when this version's srun does not have an option the line gives, else None."""
    for name, since in sorted(SRUN_OPTIONS_SINCE.items()):
        if options.get(name) and tuple(version[:2]) < since:
            return {"option": "--" + name, "since": version_label(since)}
    return None


def srun_cpus(alloc, options, env, tasks_per_node, version, resolver):
    """(CPUs each task is bound to, where that comes from, the step fails) under one SLURM version."""
    explicit = resolver.number(options.get("cpus-per-task"), counts.CPUS_PER_TASK_MAX) \
        if options.get("cpus-per-task") else None
    source = "srun --cpus-per-task"
    if explicit is None:
        variable = srun_cpu_variable(version)
        value = resolver.resolve(env[variable]) if variable in env else None
        if value is None and variable == "SLURM_CPUS_PER_TASK" and alloc["cpus_per_task_set"]:
            value = str(alloc["cpus_per_task"])
        explicit, source = whole(value, counts.CPUS_PER_TASK_MAX), "%s read by srun %s" % (
            variable, version_label(version[:2]))
    on_node = alloc["cpus_on_node"]
    if explicit:  # -c implies --exact since 22.05: each task gets exactly that many
        fails = bool(on_node and tasks_per_node and explicit * tasks_per_node > on_node)
        return explicit, source, fails
    if on_node is None or not tasks_per_node:
        return None, "the whole node (--exclusive): count not known from the script", False
    return max(1, on_node // tasks_per_node), "the job's %d CPUs on the node shared by %d tasks" % (
        on_node, tasks_per_node), False


def rendezvous_of(program, env, resolver):
    options = program.get("options") or {}
    if program["kind"] == "torchrun":
        backend = options.get("rdzv-backend") or "static"
        standalone = bool(options.get("standalone"))
        if standalone:
            endpoint = "localhost:(a free port)"
        elif options.get("rdzv-endpoint"):
            endpoint = options["rdzv-endpoint"]
        elif backend == "static" or options.get("master-addr"):
            endpoint = "%s:%s" % (options.get("master-addr") or "127.0.0.1", options.get("master-port") or "29500")
        else:
            endpoint = "localhost:29400"  # torchrun's c10d default when no endpoint is given
        rdzv_id = options.get("rdzv-id") or "none"
        given = {"rdzv-endpoint": options.get("rdzv-endpoint"), "master-addr": options.get("master-addr"),
                 "standalone": standalone}
    else:
        addr, port = env.get("MASTER_ADDR"), env.get("MASTER_PORT")
        if addr is None and port is None:
            return None
        backend, endpoint, rdzv_id, given = "env://", "%s:%s" % (addr, port), None, {"MASTER_ADDR": addr}
    host_raw, _, port_raw = endpoint.rpartition(":") if ":" in endpoint else (endpoint, "", "")
    host = resolver.resolve(host_raw)
    return {"backend": backend, "endpoint": endpoint, "host": host_raw, "host_resolved": host,
            "host_written": "$" not in host_raw and FIRST_NODE not in host_raw,
            "port": resolver.number(port_raw, 65535) if port_raw else None, "id": rdzv_id,
            "id_resolved": resolver.resolve(rdzv_id) if rdzv_id else None, "given": given}


def threads_of(env, nproc, launcher, resolver):
    """The threads each rank starts with: OMP_NUM_THREADS as it reaches the ranks (resolved: $SLURM_CPUS_PER_TASK
    is known when the job gives --cpus-per-task), else the launcher's default."""
    value = env.get("OMP_NUM_THREADS")
    if value is not None:
        return {"value": resolver.number(value, counts.CPUS_PER_TASK_MAX), "source": "OMP_NUM_THREADS=%s" % value,
                "default": None}
    if launcher == "torchrun" and nproc and nproc > 1:
        return {"value": 1, "source": "torchrun's default (OMP_NUM_THREADS=1 when --nproc-per-node > 1)",
                "default": "torchrun"}
    return {"value": None, "source": "the program's own default (torch: the cores it may use)", "default": "program"}


def component_plan(step, allocs):
    """[(het group or None, srun component index, srun options, program)]: the parts of the step, each in
    the allocation component it runs in. A plain srun in a heterogeneous job runs in component 0 only
    (22.05.8, measured); --het-group=1 or 0,1 picks them; srun's own ':' components map to groups 0, 1, ..."""
    het = len(allocs) > 1
    if step["launcher"] != "srun":
        return [(0 if het else None, None, None, step["program"])]
    parts = step.get("srun_components") or [{"srun": step["srun"], "program": step["program"]}]
    plan = []
    for index, part in enumerate(parts):
        groups = het_groups(part["srun"].get("het-group"), len(allocs)) if het else None
        if groups is None:
            groups = [index if het and index < len(allocs) else 0] if het else [None]
        for group in groups:
            plan.append((group, index if len(parts) > 1 else None, part["srun"], part["program"]))
    return plan


def het_groups(text, size):
    """--het-group=0,2-3 -> [0, 2, 3] (bounded by the job's components); None when not given or unreadable."""
    if not isinstance(text, str):
        return None
    groups = []
    for item in text.split(","):
        low, dash, high = item.partition("-")
        first, last = counts.number(low, 64), counts.number(high, 64) if dash else counts.number(low, 64)
        if first is None or last is None:
            return None
        groups.extend(g for g in range(first, last + 1) if g < size)
    return sorted(set(groups)) or None


def step_shapes(job, allocs, step, version):
    """The step's shape in each allocation component it runs in, under one SLURM version (a tuple like (22, 5))."""
    plan = component_plan(step, allocs)
    shapes = []
    for group, part, options, program in plan:
        alloc = allocs[group or 0]
        env, rule, dropped = step_env(step, program)
        resolver = Resolver(allocs, step["exports"], env)
        shape = part_shape(step, alloc, options, program, env, resolver, version)
        if len(allocs) > 1 and step["launcher"] == "srun" and options.get("het-group") is None and part is None:
            shape["notes"].append("srun without --het-group in a heterogeneous job runs in component 0 only (22.05.8, "
                                  "measured); --het-group=0,1 runs it in both")
        shape.update(het_group=group, srun_component=part, export={
            "mode": rule["mode"], "given": rule["given"], "source": rule["source"], "dropped": dropped[:32],
            "program_found": program_reached(step, rule, env)})
        shapes.append(shape)
    if len(shapes) > 1:  # one step: srun starts the tasks of every part as one world
        total = sum(s["tasks"] or 0 for s in shapes) if all(s["tasks"] for s in shapes) else None
        for shape in shapes:
            shape["step_tasks"] = total
            if shape["launcher_kind"] == "srun":
                shape["world_size"] = total
    return shapes


def part_shape(step, alloc, options, program, env, resolver, version):
    fails, ignored, notes = False, None, []
    refused = srun_refuses(options, version) if step["launcher"] == "srun" else None
    if refused:  # srun exits at once: no task starts, and none of the counts below exist
        nodes = tasks = per_node = cpus = None
        cpus_source = "srun before %s refuses %s (exit 255): no step starts" % (refused["since"], refused["option"])
        notes.append(cpus_source)
    elif step["launcher"] == "srun" and options.get("external-launcher"):
        nodes = resolver.number(options["nodes"], counts.NODES_MAX) if options.get("nodes") else alloc["nodes"]
        tasks, per_node = nodes, 1
        cpus = alloc["cpus_on_node"]
        cpus_source = "srun --external-launcher: one task per node holding the job's CPUs there" if cpus else \
            "srun --external-launcher on the whole node (--exclusive): count not known from the script"
        given = [name for name in EXTERNAL_LAUNCHER_IGNORES if options.get(name)]
        if given:
            notes.append("srun --external-launcher ignores %s" % ", ".join("--" + name for name in given))
    elif step["launcher"] == "srun":
        nodes, tasks, ignored = srun_tasks(alloc, options, resolver)
        per_node = math.ceil(tasks / nodes) if tasks and nodes else None
        cpus, cpus_source, fails = srun_cpus(alloc, options, env, per_node, version, resolver)
    else:  # runs in the batch shell, on the job's first node only
        nodes, tasks, per_node = 1, 1, 1
        cpus, cpus_source = alloc["cpus_on_node"], "the batch shell: the job's CPUs on its first node"
    if ignored:
        notes.append("srun ignores --ntasks-per-node=%d: the job's SLURM_NTASKS=%d is not %d x %d nodes (srun warns "
                     "\"can't honor --ntasks-per-node\")" % (ignored["ntasks_per_node"], ignored["job_tasks"],
                                                             ignored["ntasks_per_node"], ignored["nodes"]))
    if fails:
        notes.append("srun fails: %d tasks x %d CPUs exceed the job's %s CPUs on a node (\"More processors requested "
                     "than permitted\")" % (per_node, cpus, alloc["cpus_on_node"]))
    shape = {"line": step["line"], "text": step["text"], "launcher": step["launcher"] or "(batch shell)",
             "background": step["background"], "program": program["kind"], "nodes": nodes, "tasks": tasks,
             "tasks_per_node": per_node, "cpus_per_task": cpus, "cpus_source": cpus_source,
             "step_fails": fails, "ntasks_per_node_ignored": ignored, "srun_refuses": refused,
             "nodes_over_job": bool(step["launcher"] == "srun" and alloc["nodes"] and nodes and nodes > alloc["nodes"]),
             "notes": notes}
    kind = program["kind"]
    if kind == "mpirun":
        program = dict(program["inner"], mpirun=True) if program["inner"]["kind"] == "torchrun" else program
    if program["kind"] == "torchrun":
        torchrun_shape(shape, program, alloc, env, resolver, tasks, per_node, cpus)
    elif kind == "mpirun":
        mpirun_shape(shape, step, program, alloc, env, resolver, cpus)
    else:  # srun (or the batch shell) starts the ranks itself
        shape.update(launcher_kind="srun" if step["launcher"] == "srun" else "none", world_size=tasks,
                     ranks_per_node=per_node, cpus_per_rank=cpus, threads_per_rank=threads_of(env, 1, "srun", resolver),
                     rendezvous=rendezvous_of(program, env, resolver))
    shape["world_size_exported"] = env.get("WORLD_SIZE")
    if refused:  # nothing starts: no ranks, no agent joins
        shape["ranks_per_node"] = None
        if "agents_joined" in shape:
            shape["agents_joined"] = None
    ranks = max_ranks(shape)
    shape["gpus_per_rank"] = (alloc["gpus_per_node"] // ranks) if alloc["gpus_per_node"] and ranks else None
    return shape


def torchrun_shape(shape, program, alloc, env, resolver, tasks, per_node, cpus):
    options = program["options"]
    low, _, high = str(options.get("nnodes") or "1").partition(":")
    nnodes_min, nnodes_max = resolver.number(low, counts.NODES_MAX), resolver.number(high or low, counts.NODES_MAX)
    if nnodes_min is not None and nnodes_max is not None and nnodes_min > nnodes_max:
        nnodes_min = nnodes_max = None  # an impossible range: its own finding
    nproc_raw = options.get("nproc-per-node") or "1"
    nproc = resolver.number(nproc_raw, counts.PER_NODE_MAX)
    if nproc is None and nproc_raw in ("gpu", "auto"):
        nproc = alloc["gpus_per_node"] or (1 if nproc_raw == "gpu" else None)
    agents = tasks
    joined = min(agents, nnodes_max) if agents and nnodes_max and agents >= (nnodes_min or 1) else 0
    world = joined * nproc if joined and nproc else None
    together = min(per_node or 1, joined) if joined else 1
    shape.update(
        launcher_kind="torchrun", nnodes=options.get("nnodes") or "1", nnodes_min=nnodes_min,
        nnodes_max=nnodes_max, nproc_per_node=nproc, agents=agents, agents_per_node=per_node,
        agents_joined=joined, agents_failing=(agents - joined) if agents and joined else None,
        world_size=world, ranks_per_agent=nproc,
        ranks_per_node=nproc if (per_node or 1) == 1 else [nproc, together * nproc] if nproc else None,
        cpus_per_rank=round(cpus / nproc, 3) if cpus and nproc else None,
        threads_per_rank=threads_of(env, nproc, "torchrun", resolver),
        rendezvous=rendezvous_of(program, env, resolver))
    if (per_node or 1) > 1 and joined:
        shape["notes"].append("%d agents start, %d join the rendezvous and spawn %s ranks: which nodes they sit on is a "
                              "race (ranks per node between %d and %d); the other %d agents fail when the store's host "
                              "exits" % (agents, joined, world, nproc or 0, together * (nproc or 0), agents - joined))


def mpirun_shape(shape, step, program, alloc, env, resolver, cpus):
    options = program["options"]
    np_count = resolver.number(options.get("np"))
    per = resolver.number(options.get("npernode"), counts.PER_NODE_MAX)
    map_by = re.match(r"^ppr:([0-9]{1,6}):node", options.get("map-by") or "")
    per = per or (int(map_by.group(1)) if map_by else None)
    ranks = np_count or (per * (alloc["nodes"] or 1) if per else None)
    ranks_per_node = per or (math.ceil(ranks / (alloc["nodes"] or 1)) if ranks else None)
    if step["launcher"] != "srun":  # mpirun in the batch shell places its ranks on every node of the job
        shape.update(nodes=alloc["nodes"], tasks=ranks, tasks_per_node=ranks_per_node)
    shape.update(launcher_kind="mpirun", world_size=ranks, ranks_per_node=ranks_per_node,
                 cpus_per_rank=round(cpus / ranks_per_node, 3) if cpus and ranks_per_node and step[
                     "launcher"] != "srun" else cpus,
                 threads_per_rank=threads_of(env, ranks_per_node, "mpirun", resolver), rendezvous=None)


def max_ranks(shape):
    value = shape.get("ranks_per_node")
    return max(value) if isinstance(value, list) else value


def version_label(version):
    return ".".join(["%d" % version[0]] + ["%02d" % part for part in version[1:2]] + ["%d" % p for p in version[2:]])


def versions_to_compute(version):
    if version:
        return [(version_label(version), version)]
    return list(VERSION_RANGES)


def topology(job, version):
    """-> {"allocation" (component 0), "components" (one per heterogeneous component), "steps": [a shape per
    step and component it runs in, with "by_version" where the version is unknown and it matters]}."""
    allocs = [allocation(component["options"]) for component in job["components"]]
    steps = []
    for step in job["steps"]:
        if step["kind"] != "step":
            continue
        computed = [(label, step_shapes(job, allocs, step, v)) for label, v in versions_to_compute(version)]
        for index in range(len(computed[0][1])):
            shapes = [(label, shapes_of[index]) for label, shapes_of in computed]
            # the shape shown is one a version's srun starts (a version that refuses the line starts nothing)
            shape = dict(next((s for _, s in shapes if not s["srun_refuses"]), shapes[0][1]))
            if len(shapes) > 1:
                differ = [key for key in ("cpus_per_task", "cpus_per_rank", "step_fails", "srun_refuses")
                          if len(set(repr(s.get(key)) for _, s in shapes)) > 1]
                if differ:
                    shape["by_version"] = dict((label, dict((k, s.get(k)) for k in differ + ["cpus_source"]))
                                               for label, s in shapes)
                    for key in differ:
                        shape[key] = None
            shape["version_shapes"] = shapes
            steps.append(shape)
    return {"allocation": allocs[0], "components": allocs if len(allocs) > 1 else None, "steps": steps}


def allocation_of(topo, shape):
    """The allocation component a step shape runs in."""
    if topo.get("components") and shape.get("het_group") is not None:
        return topo["components"][shape["het_group"]]
    return topo["allocation"]


def is_loopback(host):
    return host is not None and bool(LOOPBACK.match(host)) and host != FIRST_NODE
