"""What a job starts, computed from its words: the allocation, then per step the tasks per node,
the CPUs each task is bound to (by this SLURM version's srun), the launcher agents, ranks, threads,
GPUs and the rendezvous. Plain arithmetic over the parsed options; the SLURM behaviours it encodes
are the ones measured on a real 22.05.8 cluster (tests/test_launch_cluster.py) or cited by release
in references/distributed-workflows.md."""

import math
import re

from .parse import FIRST_NODE

# Which variable srun reads as its --cpus-per-task, by version (SLURM's RELEASE_NOTES of 22.05 and 23.11).
SRUN_CPU_VARIABLES = (((0, 0), "SLURM_CPUS_PER_TASK"), ((22, 5), "SRUN_CPUS_PER_TASK"),
                      ((23, 11), "SLURM_CPUS_PER_TASK"))
VERSION_RANGES = (("before 22.05", (21, 8)), ("22.05 to 23.02", (22, 5)), ("23.11 and later", (23, 11)))
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


def whole(text):
    """An int from text like "4", "4-8" (the lower bound) or "a100:4" (the count); None otherwise."""
    if isinstance(text, bool) or text is None:
        return None
    text = str(text).strip()
    match = re.match(r"^(\d+)(?:[-:]\d+)?$", text)
    if match:
        return int(match.group(1))
    match = re.match(r"^(?:[A-Za-z0-9_]+:)*(\d+)$", text)
    return int(match.group(1)) if match else None


def gpu_count(gres):
    """GPUs per node from --gres (gpu:4, gpu:a100:4, gres/gpu:2), or None."""
    for part in str(gres or "").split(","):
        fields = part.replace("gres/", "").split(":")
        if fields[0] == "gpu":
            return whole(fields[-1]) if len(fields) > 1 else 1
    return None


def allocation(options):
    nodes_raw = options.get("nodes")
    ntasks, per_node = whole(options.get("ntasks")), whole(options.get("ntasks-per-node"))
    nodes = whole(nodes_raw) if nodes_raw else (1 if ntasks is None or per_node else None)
    if nodes is None and ntasks and per_node:
        nodes = math.ceil(ntasks / per_node)
    cpus = whole(options.get("cpus-per-task"))
    tasks_on_node = per_node or (math.ceil(ntasks / nodes) if ntasks and nodes else 1)
    gpus = whole(options.get("gpus-per-node")) or gpu_count(options.get("gres"))
    if gpus is None and whole(options.get("gpus-per-task")):
        gpus = whole(options.get("gpus-per-task")) * tasks_on_node
    if gpus is None and whole(options.get("gpus")) and nodes:
        gpus = math.ceil(whole(options.get("gpus")) / nodes)
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
    the allocation sets; None when something stays unknown."""

    def __init__(self, alloc, exports, env=None):
        known = {"SLURM_JOB_ID": JOB_ID, "SLURM_JOBID": JOB_ID, "SLURM_PROCID": TASK_VALUE,
                 "SLURM_LOCALID": TASK_VALUE, "SLURM_NODEID": TASK_VALUE, "SLURMD_NODENAME": TASK_VALUE,
                 "HOSTNAME": TASK_VALUE}
        if alloc["nodes"]:
            known["SLURM_NNODES"] = known["SLURM_JOB_NUM_NODES"] = str(alloc["nodes"])
        if alloc["ntasks"]:
            known["SLURM_NTASKS"] = known["SLURM_NPROCS"] = str(alloc["ntasks"])
        if alloc["ntasks_per_node"]:
            known["SLURM_NTASKS_PER_NODE"] = str(alloc["ntasks_per_node"])
        if alloc["cpus_per_task_set"]:
            known["SLURM_CPUS_PER_TASK"] = str(alloc["cpus_per_task"])
        if alloc["gpus_per_node"]:
            known["SLURM_GPUS_ON_NODE"] = known["SLURM_GPUS_PER_NODE"] = str(alloc["gpus_per_node"])
        self.values = dict(known)
        for name, entry in exports.items():
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
        resolved = VARIABLE.sub(substitute, str(text))
        if unknown or "$" in resolved:
            return None
        return resolved

    def number(self, text):
        value = self.resolve(text)
        return whole(value) if value is not None else None


def step_env(step, program):
    """Variables the step's processes see: exported ones, then the srun prefix, then the program's own."""
    env = dict((k, v["value"]) for k, v in step["exports"].items() if v.get("exported"))
    env.update(step.get("env") or {})
    env.update(program.get("env") or {})
    return env


def srun_tasks(alloc, options, resolver, notes):
    nodes = resolver.number(options.get("nodes")) if options.get("nodes") else alloc["nodes"]
    inherited = alloc["ntasks"]
    if options.get("ntasks"):
        tasks = resolver.number(options["ntasks"])
    elif options.get("ntasks-per-node"):
        per_node = resolver.number(options["ntasks-per-node"])
        if per_node and nodes and inherited and per_node * nodes != inherited:
            # 22.05.8, measured: "srun: Warning: can't honor --ntasks-per-node set to 1 which doesn't match
            # the requested tasks 4 with the number of requested nodes 2. Ignoring --ntasks-per-node."
            notes.append("srun ignores --ntasks-per-node=%d: the job's SLURM_NTASKS=%d is not %d x %d nodes "
                         "(srun warns \"can't honor --ntasks-per-node\")" % (per_node, inherited, per_node, nodes))
            tasks = inherited
        else:
            tasks = per_node * nodes if per_node and nodes else None
    else:
        tasks = inherited if inherited else nodes
    return nodes, tasks


def srun_cpus(alloc, options, env, tasks_per_node, version, resolver):
    """(CPUs each task is bound to, where that comes from, the step fails) under one SLURM version."""
    explicit = resolver.number(options.get("cpus-per-task")) if options.get("cpus-per-task") else None
    source = "srun --cpus-per-task"
    if explicit is None:
        variable = srun_cpu_variable(version)
        value = resolver.resolve(env[variable]) if variable in env else None
        if value is None and variable == "SLURM_CPUS_PER_TASK" and alloc["cpus_per_task_set"]:
            value = str(alloc["cpus_per_task"])
        explicit, source = whole(value), "%s read by srun %s" % (variable, version_label(version[:2]))
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
            "port": resolver.number(port_raw) if port_raw else None, "id": rdzv_id,
            "id_resolved": resolver.resolve(rdzv_id) if rdzv_id else None, "given": given}


def threads_of(env, nproc, launcher):
    value = env.get("OMP_NUM_THREADS")
    if value is not None:
        return {"value": whole(value), "source": "OMP_NUM_THREADS=%s" % value}
    if launcher == "torchrun" and nproc and nproc > 1:
        return {"value": 1, "source": "torchrun's default (OMP_NUM_THREADS=1 when --nproc-per-node > 1)"}
    return {"value": None, "source": "the program's own default (torch: the cores it may use)"}


def step_topology(job, alloc, step, version):
    """One step's shape under one SLURM version (a tuple like (22, 5))."""
    program = step["program"]
    env = step_env(step, program)
    resolver = Resolver(alloc, step["exports"], env)
    notes, fails = [], False
    if step["launcher"] == "srun":
        nodes, tasks = srun_tasks(alloc, step["srun"], resolver, notes)
        per_node = math.ceil(tasks / nodes) if tasks and nodes else None
        cpus, cpus_source, fails = srun_cpus(alloc, step["srun"], env, per_node, version, resolver)
        if fails:
            notes.append("srun fails: %d tasks x %d CPUs exceed the job's %s CPUs on a node (\"More processors "
                         "requested than permitted\")" % (per_node, cpus, alloc["cpus_on_node"]))
    else:  # runs in the batch shell, on the job's first node only
        nodes, tasks, per_node = 1, 1, 1
        cpus, cpus_source = alloc["cpus_on_node"], "the batch shell: the job's CPUs on its first node"
    shape = {"line": step["line"], "text": step["text"], "launcher": step["launcher"] or "(batch shell)",
             "background": step["background"], "program": program["kind"], "nodes": nodes, "tasks": tasks,
             "tasks_per_node": per_node, "cpus_per_task": cpus, "cpus_source": cpus_source,
             "step_fails": fails, "notes": notes}
    kind = program["kind"]
    if kind == "mpirun":
        program = dict(program, kind=program["inner"]["kind"]) if program["inner"]["kind"] == "torchrun" else program
    if program["kind"] == "torchrun":
        options = program["options"]
        low, _, high = str(options.get("nnodes") or "1").partition(":")
        nnodes_min, nnodes_max = resolver.number(low), resolver.number(high or low)
        nproc_raw = options.get("nproc-per-node") or "1"
        nproc = resolver.number(nproc_raw)
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
            threads_per_rank=threads_of(env, nproc, "torchrun"),
            rendezvous=rendezvous_of(program, env, resolver))
        if (per_node or 1) > 1 and joined:
            notes.append("%d agents start, %d join the rendezvous and spawn %s ranks: which nodes they sit on is a "
                         "race (ranks per node between %d and %d); the other %d agents fail when the store's "
                         "host exits" % (agents, joined, world, nproc or 0, together * (nproc or 0), agents - joined))
    elif kind == "mpirun":
        options = program["options"]
        np_count = resolver.number(options.get("np"))
        per = resolver.number(options.get("npernode"))
        map_by = re.match(r"ppr:(\d+):node", options.get("map-by") or "")
        per = per or (int(map_by.group(1)) if map_by else None)
        ranks = np_count or (per * (alloc["nodes"] or 1) if per else None)
        ranks_per_node = per or (math.ceil(ranks / (alloc["nodes"] or 1)) if ranks else None)
        if step["launcher"] != "srun":  # mpirun in the batch shell places its ranks on every node of the job
            shape.update(nodes=alloc["nodes"], tasks=ranks, tasks_per_node=ranks_per_node)
        shape.update(launcher_kind="mpirun", world_size=ranks, ranks_per_node=ranks_per_node,
                     cpus_per_rank=round(cpus / ranks_per_node, 3) if cpus and ranks_per_node and step[
                         "launcher"] != "srun" else cpus,
                     threads_per_rank=threads_of(env, ranks_per_node, "mpirun"), rendezvous=None)
    else:  # srun (or the batch shell) starts the ranks itself
        shape.update(launcher_kind="srun" if step["launcher"] == "srun" else "none", world_size=tasks,
                     ranks_per_node=per_node, cpus_per_rank=cpus, threads_per_rank=threads_of(env, 1, "srun"),
                     rendezvous=rendezvous_of(program, env, resolver))
    shape["world_size_exported"] = env.get("WORLD_SIZE")
    shape["gpus_per_rank"] = (alloc["gpus_per_node"] // max_ranks(shape)) if alloc["gpus_per_node"] and max_ranks(
        shape) else None
    return shape


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
    """-> {"allocation", "steps": [step shape, with "by_version" when the version is unknown]}."""
    alloc = allocation(job["allocation_options"])
    steps = []
    for step in job["steps"]:
        if step["kind"] != "step":
            continue
        shapes = [(label, step_topology(job, alloc, step, v)) for label, v in versions_to_compute(version)]
        shape = dict(shapes[0][1])
        if len(shapes) > 1:
            differ = [key for key in ("cpus_per_task", "cpus_per_rank", "step_fails")
                      if len(set(repr(s.get(key)) for _, s in shapes)) > 1]
            if differ:
                shape["by_version"] = dict((label, dict((k, s.get(k)) for k in differ + ["cpus_source"]))
                                           for label, s in shapes)
                for key in differ:
                    shape[key] = None
            shape["version_shapes"] = shapes
        else:
            shape["version_shapes"] = shapes
        steps.append(shape)
    return {"allocation": alloc, "steps": steps}


def is_loopback(host):
    return host is not None and bool(LOOPBACK.match(host)) and host != FIRST_NODE
