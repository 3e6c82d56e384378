"""Rules about the distributed launch environment: ranks, world sizes, master address, interfaces."""

import os

from diagnostics_core.command import Raw, line
from diagnostics_core.contract import script_command
from diagnostics_core.netenv import SOCKET_IFNAME_VARIABLES, absent_interfaces
from .findings import finding
from .tables import HOSTS_FILE, LAUNCH_INT_VARIABLES, MPI_RANK_PAIRS, SLURM_RANK_PAIRS


def launch_value(launch, name):
    entry = launch.get(name)
    return entry["value"] if entry and entry["error"] is None else None


def rule_launch_values_invalid(facts, options):
    launch = facts["environment"]["launch"]
    invalid = {}
    for name, entry in launch.items():
        if entry["error"]:
            invalid[name] = entry["raw"]
        elif name in LAUNCH_INT_VARIABLES:
            value = entry["value"]
            if name == "MASTER_PORT" and not 1 <= value <= 65535:
                invalid[name] = entry["raw"]
            elif name in ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "SLURM_NTASKS", "SLURM_NNODES",
                          "SLURM_NTASKS_PER_NODE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE",
                          "OMPI_COMM_WORLD_LOCAL_SIZE") and value < 1:
                invalid[name] = entry["raw"]
            elif value < 0:
                invalid[name] = entry["raw"]
    if not invalid:
        return []
    return [finding("launch-env-invalid", {"invalid": invalid},
                    fix="unset or correct them, e.g.: %s" % line("unset", sorted(invalid)))]


def rule_torch_rank_ranges(facts, options):
    launch = facts["environment"]["launch"]
    rank, world = launch_value(launch, "RANK"), launch_value(launch, "WORLD_SIZE")
    local_rank, local_world = launch_value(launch, "LOCAL_RANK"), launch_value(launch, "LOCAL_WORLD_SIZE")
    out_of_range = {}
    if rank is not None and world is not None and world >= 1 and rank >= world:
        out_of_range["RANK"] = {"RANK": rank, "WORLD_SIZE": world}
    if local_rank is not None and local_world is not None and local_world >= 1 and local_rank >= local_world:
        out_of_range["LOCAL_RANK"] = {"LOCAL_RANK": local_rank, "LOCAL_WORLD_SIZE": local_world}
    if not out_of_range:
        return []
    return [finding("launch-rank-out-of-range", out_of_range,
                    fix="let the launcher set ranks: torchrun --nnodes N --nproc_per_node P script.py")]


def rule_local_rank_device(facts, options):
    local_rank = launch_value(facts["environment"]["launch"], "LOCAL_RANK")
    device_count = (facts.get("cuda") or {}).get("device_count") or 0
    if local_rank is None or device_count <= 0 or local_rank < device_count:
        return []
    return [finding("launch-local-rank-no-device", {
        "LOCAL_RANK": local_rank, "visible_devices": device_count,
        "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")},
        fix="start at most %d processes per node (torchrun --nproc_per_node %d) or widen "
            "CUDA_VISIBLE_DEVICES" % (device_count, device_count))]


def rule_master_incomplete(facts, options):
    launch = facts["environment"]["launch"]
    if ("MASTER_ADDR" in launch) == ("MASTER_PORT" in launch):
        return []
    missing = "MASTER_PORT" if "MASTER_ADDR" in launch else "MASTER_ADDR"
    return [finding("launch-master-incomplete", {
        "MASTER_ADDR": (launch.get("MASTER_ADDR") or {}).get("raw"),
        "MASTER_PORT": (launch.get("MASTER_PORT") or {}).get("raw"), "missing": missing},
        fix=line("export", "MASTER_PORT=29500") if missing == "MASTER_PORT" else
        "export MASTER_ADDR=HOST  # HOST: the hostname of rank 0")]


def rule_torchrun_slurm_mismatch(facts, options):
    launch = facts["environment"]["launch"]
    disagreements = {}
    for torch_name, slurm_name in (("RANK", "SLURM_PROCID"), ("WORLD_SIZE", "SLURM_NTASKS"),
                                   ("LOCAL_RANK", "SLURM_LOCALID")):
        a, b = launch_value(launch, torch_name), launch_value(launch, slurm_name)
        if a is not None and b is not None and a != b:
            disagreements[torch_name] = {torch_name: a, slurm_name: b}
    # torchrun inside an allocation legitimately re-numbers ranks; only plain
    # srun launches should agree.
    if not disagreements or facts["environment"]["launcher"] == "torchrun":
        return []
    return [finding("launch-torchrun-slurm-mismatch", disagreements,
                    fix="derive one from the other in the job script, e.g. " + line(
                        "export", Raw("RANK=$SLURM_PROCID"), Raw("WORLD_SIZE=$SLURM_NTASKS"),
                        Raw("LOCAL_RANK=$SLURM_LOCALID")))]


def rule_socket_ifnames(facts, options):
    launch = facts["environment"]["launch"]
    interfaces = facts["environment"]["network_interfaces"]
    if interfaces is None:
        return []
    missing_ifnames = {}
    for name in SOCKET_IFNAME_VARIABLES:
        if name in launch:
            absent = absent_interfaces(name, launch[name]["raw"], interfaces)
            if absent:
                missing_ifnames[name] = {"value": launch[name]["raw"], "absent": absent}
    if not missing_ifnames:
        return []
    return [finding("launch-socket-ifname-missing", dict(missing_ifnames, interfaces=interfaces),
                    fix="set them to an interface listed in evidence.interfaces "
                        "(the one that routes to MASTER_ADDR: ip route get $MASTER_ADDR)")]


def multi_node_evidence(launch):
    """The launch variables that say this job spans several nodes ({} when none do)."""
    said = {}
    for name in ("GROUP_WORLD_SIZE", "SLURM_NNODES"):
        value = launch_value(launch, name)
        if value is not None and value > 1:
            said[name] = value
    for name in ("NODE_RANK", "GROUP_RANK", "SLURM_NODEID"):
        value = launch_value(launch, name)
        if value is not None and value > 0:
            said[name] = value
    world, local_world = launch_value(launch, "WORLD_SIZE"), launch_value(launch, "LOCAL_WORLD_SIZE")
    if world is not None and local_world is not None and world > local_world >= 1:
        said["WORLD_SIZE"], said["LOCAL_WORLD_SIZE"] = world, local_world
    return said


def node_rank(launch):
    for name in ("GROUP_RANK", "NODE_RANK", "SLURM_NODEID"):
        value = launch_value(launch, name)
        if value is not None:
            return value
    return None


def rule_multi_node_names(facts, options):
    """Names that resolve to loopback break a multi-node job; only /etc/hosts and literals are read."""
    environment = facts["environment"]
    launch = environment["launch"]
    said = multi_node_evidence(launch)
    resolution = environment.get("name_resolution") or {}
    if not said:
        return []
    found = []
    master = resolution.get("MASTER_ADDR")
    # On node 0 a loopback MASTER_ADDR still reaches the store it serves; on
    # any other node it points at the node itself.
    if master and master["loopback"] and node_rank(launch) != 0:
        found.append(finding("launch-master-addr-loopback", {
            "MASTER_ADDR": master["name"], "resolved": master, "node_rank": node_rank(launch),
            "multi_node_because": said, "hostname": environment.get("hostname"),
            "hosts_order": resolution.get("hosts_order"),
            "not_checked": "DNS (no query is sent); only literal addresses and %s are read" % HOSTS_FILE},
            fix="export MASTER_ADDR=<address of node 0 as this node reaches it, e.g. from: getent ahostsv4 "
                "<node 0 hostname>>; or drop the loopback line for that name from %s on this node" % HOSTS_FILE))
    own = resolution.get("hostname")
    if own and own["first_loopback"] and "GLOO_SOCKET_IFNAME" not in launch:
        route = environment.get("default_route_interface")
        found.append(finding("launch-hostname-loopback", {
            "hostname": own["name"], "resolved": own, "multi_node_because": said,
            "GLOO_SOCKET_IFNAME": None, "NCCL_SOCKET_IFNAME": launch_value(launch, "NCCL_SOCKET_IFNAME"),
            "interfaces": environment.get("network_interfaces"), "default_route_interface": route,
            "why": "without GLOO_SOCKET_IFNAME gloo binds to the address of this host's name and sends it "
                   "to the peers, which then connect to their own loopback: connectFullMesh fails with "
                   "remote=[127.0.1.1]",
            "not_checked": "DNS (no query is sent); only %s is read" % HOSTS_FILE},
            # NCCL_SOCKET_IFNAME set: an NCCL job names its interface; gloo's side may still fail (a warning).
            severity="warning" if "NCCL_SOCKET_IFNAME" in launch else None,
            fix="%s  # %sor map this host's name (evidence.hostname) to its network address in %s" % (
                line("export", "GLOO_SOCKET_IFNAME=" + (route or "IFACE")),
                "the interface of this node's default route (/proc/net/route); " if route else
                "IFACE: the interface that routes to MASTER_ADDR (ip route get $MASTER_ADDR); ", HOSTS_FILE)))
    return found


def rule_world_size_layout(facts, options):
    """WORLD_SIZE must equal nodes x processes per node, or the rendezvous waits for ranks that never come."""
    launch = facts["environment"]["launch"]
    # torchrun computes WORLD_SIZE itself from the nodes that joined.
    if facts["environment"]["launcher"] == "torchrun":
        return []
    world, nodes = launch_value(launch, "WORLD_SIZE"), launch_value(launch, "SLURM_NNODES")
    per_node_name = next((n for n in ("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE")
                          if launch_value(launch, n) is not None), None)
    if world is None or nodes is None or per_node_name is None:
        return []
    per_node = launch_value(launch, per_node_name)
    if world == nodes * per_node:
        return []
    return [finding("launch-world-size-mismatch", {
        "WORLD_SIZE": world, "SLURM_NNODES": nodes, per_node_name: per_node, "expected": nodes * per_node,
        "consequence": "the rendezvous waits for %d processes; %d will start" % (world, nodes * per_node)},
        fix="%s  # or let torchrun count: torchrun --nnodes $SLURM_NNODES --nproc-per-node %d ..." % (
            line("export", Raw("WORLD_SIZE=$((SLURM_NNODES * %s))" % per_node_name)), per_node))]


def ranks_out_of_range(launch, pairs):
    """{rank variable: {rank: value, size: value}} for each pair whose rank is not below its size."""
    out_of_range = {}
    for rank_name, size_name in pairs:
        rank, size = launch_value(launch, rank_name), launch_value(launch, size_name)
        if rank is not None and size is not None and size >= 1 and rank >= size:
            out_of_range[rank_name] = {rank_name: rank, size_name: size}
            if launch[size_name]["raw"].strip() != str(size):
                out_of_range[rank_name][size_name + "_raw"] = launch[size_name]["raw"]
    return out_of_range


def rule_launcher_rank_ranges(facts, options):
    """SLURM and MPI ranks against their own counts (torchrun's RANK/LOCAL_RANK are checked above)."""
    launch = facts["environment"]["launch"]
    found = []
    slurm = ranks_out_of_range(launch, SLURM_RANK_PAIRS)
    if slurm:
        found.append(finding("launch-slurm-rank-out-of-range", slurm, fix=(
            "do not export SLURM_* by hand or carry them into another job (env | grep ^SLURM_ shows them); "
            "start the tasks with srun inside the allocation, e.g. srun --ntasks=$SLURM_NTASKS python train.py")))
    mpi = ranks_out_of_range(launch, MPI_RANK_PAIRS)
    if mpi:
        found.append(finding("launch-mpi-rank-out-of-range", mpi, fix=(
            "do not export PMI_*/OMPI_COMM_WORLD_* by hand or carry them over from another job; "
            "let the MPI launcher set them: mpirun -np N python train.py")))
    return found


def rule_backend_requested(facts, options):
    backend = options.require_distributed
    if not backend or backend == "any":
        return []
    distributed = facts.get("distributed") or {}
    if distributed.get("status") not in (None, "ok") and "backends" not in distributed:
        return []
    if not distributed.get("backends", {}).get(backend, False):
        available = sorted(b for b, ok in distributed.get("backends", {}).items() if ok)
        return [finding("launch-backend-unavailable", {
            "requested": backend, "available": available, "torch_cuda": facts["torch"].get("cuda")},
            fix="use init_process_group(backend='%s') here, or install a torch build with %s"
            % (available[0] if available else "gloo", backend))]
    return []


def environment_count(name):
    value = os.environ.get(name, "")
    return int(value) if value.isdigit() else None


def rule_several_agents_per_node(facts, options):
    """Inside a torchrun worker that srun started: more srun tasks than nodes in the step means one
    torchrun agent per task, several per node, racing for a rendezvous sized for one per node."""
    if facts["environment"]["launcher"] != "torchrun" or not any(k.startswith("TORCHELASTIC_") for k in os.environ):
        return []
    tasks, nodes = environment_count("SLURM_STEP_NUM_TASKS"), environment_count("SLURM_STEP_NUM_NODES")
    names = ("SLURM_STEP_NUM_TASKS", "SLURM_STEP_NUM_NODES")
    if tasks is None or nodes is None:
        tasks, nodes = environment_count("SLURM_NTASKS"), environment_count("SLURM_NNODES")
        names = ("SLURM_NTASKS", "SLURM_NNODES")
    if tasks is None or nodes is None or tasks <= nodes:
        return []
    return [finding("launch-several-agents-per-node", {
        names[0]: tasks, names[1]: nodes, "agents_per_node": -(-tasks // nodes),
        "TORCHELASTIC_RUN_ID": os.environ.get("TORCHELASTIC_RUN_ID"),
        "GROUP_WORLD_SIZE": launch_value(facts["environment"]["launch"], "GROUP_WORLD_SIZE"),
        "why": "srun started %d torchrun agents on %d nodes; a rendezvous of --nnodes agents takes the first "
               "ones, the others fail with RendezvousConnectionError when the store's host exits" % (tasks, nodes)},
        fix="one torchrun per node: #SBATCH --ntasks-per-node=1 with --cpus-per-task set to the cores of all of "
            "a node's ranks (or srun --ntasks=$SLURM_NNODES --ntasks-per-node=1 --cpus-per-task=N torchrun ...); "
            "check the job script: %s JOB_SCRIPT" % script_command("check_launch.py"))]
