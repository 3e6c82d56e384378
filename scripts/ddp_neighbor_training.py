#!/usr/bin/env python3
"""Multi-process GraphSAGE training with one NeighborLoader per DDP rank.

A template to copy: swap `load_data` (or `build_stores`) for your own graph and
keep the rest. One process per GPU (nccl) or per CPU slot (gloo). Works under
torchrun / torch.distributed.run, or spawns its own workers with --nprocs.
Run with --help for flags, exit codes and examples.
"""

import os
import sys

sys.dont_write_bytecode = True  # importing the shared library must not write scripts/__pycache__
if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diagnostics_core import fast, text  # noqa: E402

if __name__ == "__main__":
    text.guard_standard_streams()  # a closed stdout exits 3 here; a closed stderr becomes /dev/null
# --help, --list-findings and --explain ID are answered before the imports below load (agents ask often).
ANSWERED = fast.answer("ddp_recipe", "ddp_neighbor_training") if __name__ == "__main__" else None
if ANSWERED is not None:
    sys.exit(ANSWERED)

import datetime  # noqa: E402
import json  # noqa: E402
import shlex  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

from diagnostics_core import cli  # noqa: E402
from diagnostics_core.contract import EXIT_GATE_FAILED as EXIT_FAILED  # noqa: E402
from diagnostics_core.contract import EXIT_OK, EXIT_USAGE, Tool  # noqa: E402
from diagnostics_core.interrupt import Interrupted, StopSignals  # noqa: E402
from diagnostics_core.text import echo, write_json  # noqa: E402

SCHEMA_VERSION = "1.0"
VERSION = "1.1.0"
TOOL = Tool.from_registry("ddp_recipe", "ddp_neighbor_training", VERSION, SCHEMA_VERSION, usage_id="ddp-usage-error",
                          internal_id="ddp-internal-error", meta_key="tool", interrupted_id="ddp-interrupted")
FINDINGS = TOOL.findings  # id -> (severity, title)

EPILOG = """\
launch styles:
  self-spawn   python scripts/ddp_neighbor_training.py --nprocs 2
               The script starts --nprocs workers with torch.multiprocessing
               (start method 'spawn') on this machine, rendezvous at
               --master-addr:--master-port (default 127.0.0.1 and a free port).
  torchrun     torchrun --nproc_per_node 2 scripts/ddp_neighbor_training.py
               When RANK and WORLD_SIZE are set (torchrun, or srun with the
               variables mapped as below) the script is one worker: it reads
               RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
               MASTER_PORT and ignores --nprocs/--master-addr/--master-port.
  SLURM        srun starts the ranks, in a job of #SBATCH --nodes,
               --ntasks-per-node and --cpus-per-task with MASTER_ADDR and
               MASTER_PORT exported:
               srun bash -c 'RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS \\
                 LOCAL_RANK=$SLURM_LOCALID LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE \\
                 python scripts/ddp_neighbor_training.py --num-neighbors 10,5 \\
                 --batch-size 64 --epochs 3'
               or one torchrun per node (#SBATCH --ntasks-per-node=1, then
               srun torchrun --nnodes=$SLURM_NNODES ...); never srun torchrun
               with several tasks per node: srun starts one agent per task.
               Measured on SLURM 22.05.8: without a -c each task gets the job's
               CPUs on its node divided among the step's tasks; a -c (given to
               srun, or read from the variable your SLURM's srun reads: see
               references/distributed-workflows.md, "Cores per task by SLURM
               version") binds each task to exactly that many. Check a job
               script before submitting it:
               python3 scripts/check_launch.py JOB_SCRIPT --format markdown
               Without LOCAL_WORLD_SIZE the script falls back to
               SLURM_NTASKS_PER_NODE, and takes WORLD_SIZE as the local count
               only when nothing says the job spans several nodes; it refuses
               (exit 2) when SLURM_JOB_NUM_NODES/SLURM_NNODES > 1 or
               GROUP_RANK > 0 leave the local count unknown.

what each rank does:
  backend 'auto' picks nccl when every local rank has a GPU (rank r uses
  cuda:LOCAL_RANK), gloo on CPU when no GPU is visible, and refuses (exit 2)
  when GPUs are visible but fewer than the local ranks: pass --backend gloo
  to train on CPU anyway, or fix the launch. Training seeds are permuted with --seed
  (same order on every rank) and cut into WORLD_SIZE contiguous shards whose
  sizes differ by at most one: disjoint, and together exactly the training set.
  Shards of unequal size can give ranks unequal step counts; the training loop
  runs inside torch.distributed.algorithms.join.Join, which lets a rank that
  runs out of batches shadow DDP's gradient all-reduce instead of hanging the
  others, so no seed is dropped or repeated. Loss is taken on seed nodes only
  (the first batch_size rows of each sampled subgraph). Validation accuracy is
  summed over all ranks' validation shards with all_reduce. CPU ranks get
  (usable cores // local ranks) torch threads unless OMP_NUM_THREADS or
  --threads says otherwise.

output:
  stdout carries one JSON document. On success (from rank 0 or the spawning
  parent): ok, launcher, world_size, backend, input ('data' or 'store'),
  sampling_backend, graph sizes, config, per-epoch {train_loss, val_acc}
  (train_loss is the seed-weighted mean over all ranks), final val_acc, and
  one entry per rank (seed count, batches per epoch, rank-local losses; with
  --report-details also the rank's sorted training seeds and the
  [seeds, nodes, edges] shape of each first-epoch batch). On failure under
  self-spawn the parent prints {"ok": false, "error": <first failure>,
  "failed_ranks": [every rank's error, earliest first]}: peers of the rank
  that failed first usually follow with "Connection closed by peer". Under
  torchrun, rank 0 prints {"ok": false, ...} only if it raised itself, and
  stdout stays empty when the launcher stopped it; rely on the exit code and
  torchrun's failure summary. A missing sampling backend gives {"ok": false,
  "findings": [neighbor-sampling-unavailable]}. Progress, warnings and
  tracebacks go to stderr.

exit codes:
  0  every rank finished training
  1  the job failed: a rank raised or died (the others are stopped, and the
     process group times out after --timeout seconds at worst), or no
     neighbour-sampling backend (pyg-lib or torch-sparse) is importable
  2  usage error: bad flag value, unreadable --data file, --backend nccl
     without enough GPUs, torch or PyG missing; one line on stderr and one
     JSON document whose finding (ddp-usage-error, ddp-stack-missing) says why
  3  internal error in the self-spawn parent
  (torchrun itself exits 1 whenever any worker exits non-zero.)

examples:
  python scripts/ddp_neighbor_training.py --nprocs 2
  python scripts/ddp_neighbor_training.py --nprocs 2 --num-neighbors 10,5 --batch-size 64 --epochs 3
  python scripts/ddp_neighbor_training.py --nprocs 2 --store
  python scripts/ddp_neighbor_training.py --nprocs 2 --data graph.pt
  torchrun --nproc_per_node 2 scripts/ddp_neighbor_training.py --epochs 3
  python -m torch.distributed.run --nproc_per_node 2 scripts/ddp_neighbor_training.py --data graph.pt
  python scripts/ddp_neighbor_training.py --nprocs 2 | jq '.epochs'
"""


class UsageError(Exception):
    """A problem with the command line or the input files (exit code 2)."""


def envelope(fields, findings=(), failed=False):
    """The shared report contract around the recipe's own keys; gate "trained" fails when the job did."""
    meta = {"name": TOOL.name, "version": TOOL.version, "argv": sys.argv[1:]}
    document, _ = TOOL.document(list(findings), {"trained": {"passed": not failed}}, meta)
    for key, value in fields.items():
        if key not in ("ok", "exit_code"):
            document[key] = value
    return document


def refuse(error):
    """Exit 2: one stderr line and a usage-error document (the gate is not applied)."""
    meta = {"name": TOOL.name, "version": TOOL.version, "argv": sys.argv[1:]}
    document, exit_code = TOOL.document([error.finding(TOOL)], {}, meta, usage_error=True)
    return cli.refuse(TOOL, error, document)


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------

POSITIVE = cli.whole_number(1)


DESCRIPTION = """\
Train GraphSAGE with DistributedDataParallel and one NeighborLoader per rank, on
a synthetic community graph (default), a saved Data file, or a (FeatureStore,
GraphStore) pair. A template: copy it and swap the data loading.
"""


def parse_args(argv=None):
    return build_parser().parse_args(argv)


def build_parser():
    parser = cli.make_parser(TOOL, description=DESCRIPTION, epilog=EPILOG)
    launch = parser.add_argument_group("launch")
    launch.add_argument("--nprocs", type=POSITIVE, default=None,
                        help="self-spawn this many workers (default: one per visible GPU, or 2 "
                             "without GPUs); ignored under torchrun")
    launch.add_argument("--backend", choices=["auto", "gloo", "nccl"], default="auto",
                        help="process-group backend (default auto: nccl if every local rank has a GPU, else gloo)")
    launch.add_argument("--master-addr", default="127.0.0.1",
                        help="self-spawn rendezvous address (default 127.0.0.1)")
    launch.add_argument("--master-port", type=int, default=0,
                        help="self-spawn rendezvous port (default 0: pick a free one)")
    launch.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                        help="process-group timeout: the longest a rank waits in a rendezvous or "
                             "collective for a peer that stopped (default 600)")
    launch.add_argument("--threads", type=int, default=0,
                        help="torch threads per CPU rank (default 0: OMP_NUM_THREADS if set, else "
                             "usable cores // local ranks)")
    data = parser.add_argument_group("data")
    data.add_argument("--data", metavar="PATH",
                      help="torch.save'd torch_geometric.data.Data (or its to_dict()) with x, y (class ids), edge_index "
                           "and optional boolean train_mask/val_mask (default split: 80/20 by --seed); "
                           "default: a synthetic graph made in memory")
    data.add_argument("--store", action="store_true",
                      help="feed the loaders from a (LocalFeatureStore, LocalGraphStore) pair built from "
                           "the data: the place to plug in a remote feature/graph backend")
    data.add_argument("--num-nodes", type=POSITIVE, default=1000,
                      help="synthetic graph size (default 1000)")
    data.add_argument("--num-classes", type=POSITIVE, default=4,
                      help="synthetic communities = classes (default 4)")
    train = parser.add_argument_group("training")
    train.add_argument("--num-neighbors", type=cli.fan_outs, default=[10, 5], metavar="K1,K2,...",
                       help="fan-out per hop, -1 for all neighbours; also the number of GraphSAGE "
                            "layers (default 10,5)")
    train.add_argument("--batch-size", type=POSITIVE, default=64, help="seed nodes per batch (default 64)")
    train.add_argument("--epochs", type=POSITIVE, default=3, help="default 3")
    train.add_argument("--hidden-channels", type=POSITIVE, default=64, help="default 64")
    train.add_argument("--lr", type=float, default=0.01, help="Adam learning rate (default 0.01)")
    train.add_argument("--num-workers", type=int, default=0,
                       help="NeighborLoader worker processes per rank (default 0: sample in the rank)")
    train.add_argument("--seed", type=int, default=0,
                       help="seeds the synthetic graph, the split, the shard permutation, the initial "
                            "weights (same on every rank) and sampling (seed + rank) (default 0)")
    hooks = parser.add_argument_group("testing hooks")
    hooks.add_argument("--fail-rank", type=int, default=None, metavar="R",
                       help="rank R raises RuntimeError after its first training batch (to test teardown)")
    hooks.add_argument("--report-details", action="store_true",
                       help="add each rank's sorted training seeds and first-epoch batch shapes to the JSON")
    return parser


# The stack is imported only after the command line was accepted: --help and bad flags need no torch,
# and importing torch creates $TMPDIR/torchinductor_<user>, which a refused command must not leave.
STACK_NAMES = ("torch", "dist", "mp", "F", "Join", "get_error_handler", "record", "ProcessException",
               "DistributedDataParallel", "torch_geometric", "Data", "DataEdgeAttr", "DataTensorAttr",
               "GlobalStorage", "NeighborLoader", "GraphSAGE", "remove_self_loops", "to_undirected")
torch = dist = mp = F = Join = get_error_handler = record = ProcessException = DistributedDataParallel = None
torch_geometric = Data = DataEdgeAttr = DataTensorAttr = GlobalStorage = NeighborLoader = GraphSAGE = None
remove_self_loops = to_undirected = None


def import_stack():
    """Import torch and PyG into this module's globals; -> the ImportError, or None."""
    try:
        import torch
        import torch.distributed as dist
        import torch.multiprocessing as mp
        import torch.nn.functional as F
        from torch.distributed.algorithms.join import Join
        from torch.distributed.elastic.multiprocessing.errors import get_error_handler, record
        from torch.multiprocessing.spawn import ProcessException
        from torch.nn.parallel import DistributedDataParallel

        import torch_geometric.typing
        from torch_geometric.data import Data
        from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
        from torch_geometric.data.storage import GlobalStorage
        from torch_geometric.loader import NeighborLoader
        from torch_geometric.nn import GraphSAGE
        from torch_geometric.utils import remove_self_loops, to_undirected
    except ImportError as error:
        return error
    names = locals()  # the imported names, published as this module's globals
    globals().update((name, names[name]) for name in STACK_NAMES)
    return None


class InductorCacheGuard(object):
    """Importing PyG imports torch._dynamo, which creates <temp dir>/torchinductor_<user>. A run that
    ends before training (refused input, missing backend) removes that folder again if this run
    created it and it is still empty; a run that trained leaves torch's cache as torch made it."""

    def __init__(self):
        self.preset = "TORCHINDUCTOR_CACHE_DIR" in os.environ
        self.before = None
        if not self.preset:
            temp = tempfile.gettempdir()  # torch's own import asks the same; the answer is cached
            try:
                self.before = (temp, set(n for n in os.listdir(temp) if n.startswith("torchinductor_")))
            except OSError:
                self.before = None
        self.launched = False

    def remove_if_unused(self):
        created = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
        if self.launched or self.preset or self.before is None or not created:
            return
        temp, existing = self.before
        if os.path.dirname(created) == temp and os.path.basename(created) not in existing:
            try:
                os.rmdir(created)  # only if empty: never removes anything torch put there
            except OSError:
                pass


INDUCTOR_GUARD = None


def stack_missing(error):
    from diagnostics_core.calls import stack_fix
    from diagnostics_core.sandbox import missing_torch_stack
    fix = "%s; then: python3 %s --require-neighbor-backend" % (
        stack_fix(missing_torch_stack() or ["torch", "torch_geometric"]),
        text.quote(os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_sampling_backends.py")))
    return cli.UsageError(
        "ddp_neighbor_training.py: error: %s: %s -- this recipe needs torch and torch_geometric in %s: %s"
        % (type(error).__name__, error, sys.executable, fix), "ddp-stack-missing",
        {"error": "%s: %s" % (type(error).__name__, error), "interpreter": sys.executable}, fix=fix)


# --------------------------------------------------------------------------
# Data: swap these for your own graph
# --------------------------------------------------------------------------

def community_graph(num_nodes, num_classes, seed, degree=8, p_same=0.8, noise=1.0):
    """A stochastic-block-style graph whose labels are its communities.

    Features are a noisy one-hot of the community, so a single node is hard to
    classify but averaging over neighbours (mostly same-community) is easy:
    a GNN learns it in a few epochs, an MLP does not.
    """
    generator = torch.Generator().manual_seed(seed)
    y = (torch.arange(num_nodes) % num_classes)[torch.randperm(num_nodes, generator=generator)]

    # Each node draws `degree` partners: with probability p_same from its own community.
    src = torch.arange(num_nodes).repeat_interleave(degree)
    members = torch.argsort(y)  # node ids grouped by community
    sizes = torch.bincount(y, minlength=num_classes)
    starts = sizes.cumsum(0) - sizes
    offset = (torch.rand(src.numel(), generator=generator) * sizes[y[src]]).long()
    same_community = members[starts[y[src]] + offset]
    anywhere = torch.randint(num_nodes, (src.numel(),), generator=generator)
    dst = torch.where(torch.rand(src.numel(), generator=generator) < p_same, same_community, anywhere)
    edge_index, _ = remove_self_loops(torch.stack([src, dst]))
    edge_index = to_undirected(edge_index, num_nodes=num_nodes)

    feature_dim = max(16, num_classes)
    x = noise * torch.randn(num_nodes, feature_dim, generator=generator)
    x[:, :num_classes] += F.one_hot(y, num_classes).float()

    data = Data(x=x, y=y, edge_index=edge_index)
    add_split(data, train_fraction=0.6, seed=seed)
    return data


def add_split(data, train_fraction, seed):
    order = torch.randperm(data.num_nodes, generator=torch.Generator().manual_seed(seed))
    num_train = int(train_fraction * data.num_nodes)
    data.train_mask = torch.zeros(data.num_nodes, dtype=torch.bool)
    data.train_mask[order[:num_train]] = True
    data.val_mask = ~data.train_mask


def load_saved_data(path, seed):
    if not os.path.isfile(path):
        raise UsageError(f"--data {path}: no such file")
    # weights_only loading runs no pickled code; only PyG's Data classes are allowed in.
    try:
        with torch.serialization.safe_globals([Data, DataEdgeAttr, DataTensorAttr, GlobalStorage]):
            data = torch.load(path, weights_only=True)
    except Exception as error:
        raise UsageError(f"--data {path}: cannot load a torch_geometric Data object "
                         f"({type(error).__name__}: {str(error).splitlines()[0]})")
    if isinstance(data, dict):  # saved as data.to_dict(): the form torch.load(path, mmap=True) can map
        data = Data.from_dict(data)
    if not isinstance(data, Data):
        raise UsageError(f"--data {path}: expected torch_geometric.data.Data (or its to_dict()), got "
                         f"{type(data).__name__}")
    for key in ("x", "y", "edge_index"):
        if getattr(data, key, None) is None:
            raise UsageError(f"--data {path}: Data has no '{key}'")
    if data.y.dim() != 1 or data.y.dtype.is_floating_point:
        raise UsageError(f"--data {path}: 'y' must be a 1-D tensor of class ids, got {tuple(data.y.shape)} "
                         f"{data.y.dtype}")
    if getattr(data, "train_mask", None) is None or getattr(data, "val_mask", None) is None:
        add_split(data, train_fraction=0.8, seed=seed)
    return data


def load_data(args):
    """Return a Data with x, y, edge_index, train_mask and val_mask (your graph goes here)."""
    data = load_saved_data(args.data, args.seed) if args.data else community_graph(
        args.num_nodes, args.num_classes, args.seed)
    # Sort once into CSC order (by destination node) so that neither the loaders nor
    # the graph store re-sort per rank; both then see neighbours in the same order.
    return data.sort(sort_by_row=False)


def build_stores(data):
    """Wrap the graph in a (FeatureStore, GraphStore) pair: the remote-backend swap point.

    PyG's local stores hold everything in this process. For a remote backend,
    return your own subclasses instead (FeatureStore: _put_tensor, _get_tensor,
    _remove_tensor, _get_tensor_size, get_all_tensor_attrs; GraphStore:
    _put_edge_index, _get_edge_index, _remove_edge_index, get_all_edge_attrs),
    serving node features 'x' and labels 'y' (group None) and one COO/CSC/CSR
    edge index (edge type None). NeighborLoader then fetches only the rows of
    each sampled subgraph. Check a pair before training with
    `python scripts/check_store_contract.py MODULE:CALLABLE`.
    """
    from torch_geometric.distributed import LocalFeatureStore, LocalGraphStore

    feature_store = LocalFeatureStore.from_data(torch.arange(data.num_nodes), x=data.x, y=data.y)
    graph_store = LocalGraphStore.from_data(torch.arange(data.num_edges), data.edge_index,
                                            data.num_nodes, is_sorted=True)
    return feature_store, graph_store


# --------------------------------------------------------------------------
# Sharding and launch facts
# --------------------------------------------------------------------------

def shard(node_ids, rank, world_size, seed):
    """Rank `rank`'s contiguous slice of a permutation shared by all ranks.

    tensor_split sizes differ by at most one, so the shards are disjoint and
    cover node_ids exactly (a plain `n // world_size` split drops the remainder).
    """
    order = torch.randperm(node_ids.numel(), generator=torch.Generator().manual_seed(seed))
    return node_ids[order].tensor_split(world_size)[rank]


def neighbor_sampling_backend():
    if torch_geometric.typing.WITH_PYG_LIB:
        return "pyg-lib"
    if torch_geometric.typing.WITH_TORCH_SPARSE:
        return "torch-sparse"
    return None


def missing_backend_report():
    return envelope(
        {"error": {"message": "NeighborLoader needs pyg-lib or torch-sparse; neither is importable"}},
        [TOOL.finding("neighbor-sampling-unavailable", {
            "WITH_PYG_LIB": torch_geometric.typing.WITH_PYG_LIB,
            "WITH_TORCH_SPARSE": torch_geometric.typing.WITH_TORCH_SPARSE, "python": sys.executable},
            fix="python3 %s --require-neighbor-backend" % shlex.quote(
                os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_sampling_backends.py")))],
        failed=True)


def choose_backend(requested, local_world_size):
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if requested == "nccl" and gpus < local_world_size:
        raise UsageError(f"--backend nccl needs one GPU per local rank: {local_world_size} ranks, {gpus} GPUs")
    if requested == "auto":
        if 0 < gpus < local_world_size:
            # Silently training a GPU job on CPU (gloo) is the failure this refuses:
            # usually a wrong local count, e.g. WORLD_SIZE of a multi-node job.
            raise UsageError(f"--backend auto: {gpus} GPU(s) visible but {local_world_size} ranks on this node; "
                             f"start one rank per GPU (check LOCAL_WORLD_SIZE) or pass --backend gloo "
                             f"to train on CPU on purpose")
        return "nccl" if gpus >= local_world_size else "gloo"
    return requested


def local_world_size_from_env(environ, world_size):
    """Ranks on this node, from the launcher's variables; UsageError when it cannot be known.

    torchrun sets LOCAL_WORLD_SIZE; srun sets SLURM_NTASKS_PER_NODE only with
    --ntasks-per-node. WORLD_SIZE is the local count only on a single node.
    """
    for name in ("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE"):
        value = environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    nodes = [int(environ[name]) for name in ("SLURM_JOB_NUM_NODES", "SLURM_NNODES")
             if environ.get(name, "").isdigit()]
    group_rank = environ.get("GROUP_RANK", "0")
    if any(count > 1 for count in nodes) or (group_rank.isdigit() and int(group_rank) > 0):
        raise UsageError(f"LOCAL_WORLD_SIZE is not set and this job spans several nodes, so WORLD_SIZE="
                         f"{world_size} is not the number of ranks on this node; export "
                         f"LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE (with #SBATCH --ntasks-per-node) or launch "
                         f"with torchrun")
    return world_size


MAX_WORLD_SIZE = 1 << 20  # ranks: far above any job, far below what a process group can be asked for


def launch_variables(environ):
    """(rank, world_size, local_rank) from the launcher's variables, checked before any store or
    process group is opened: a rank outside the world, or a value that is not a number, would
    otherwise wait on the rendezvous until it times out, or end in a raw torch error."""
    def whole(name, low, high, default=None):
        text = environ.get(name)
        if text is None:
            return default
        if not (text.isascii() and text.isdigit()):
            raise UsageError(f"{name}={echo(text)} is not a whole number (set by the launcher: check the "
                             f"torchrun/srun line)")
        value = int(text) if len(text) <= 18 else high + 1  # int() refuses strings of 4,300+ digits
        if not low <= value <= high:
            raise UsageError(f"{name}={echo(text, 40)[1:-1]} is outside {low}..{high}")
        return value
    world_size = whole("WORLD_SIZE", 1, MAX_WORLD_SIZE)
    rank = whole("RANK", 0, world_size - 1)
    local_world = whole("LOCAL_WORLD_SIZE", 1, world_size)
    local_rank = whole("LOCAL_RANK", 0, (local_world or world_size) - 1, default=0)
    for name in ("MASTER_ADDR", "MASTER_PORT"):
        if not environ.get(name):
            raise UsageError(f"RANK and WORLD_SIZE are set but {name} is not: export it on every rank "
                             f"(torchrun sets it), or unset RANK and WORLD_SIZE to self-spawn")
    whole("MASTER_PORT", 1, 65535)
    return rank, world_size, local_rank


def free_port(addr):
    # Another process may take the port before rank 0 binds it; pass --master-port to be sure.
    with socket.socket() as sock:
        sock.bind((addr, 0))
        return sock.getsockname()[1]


def set_cpu_threads(requested, local_world_size):
    if requested > 0:
        torch.set_num_threads(requested)
    elif "OMP_NUM_THREADS" not in os.environ:  # torchrun sets it to 1 for several ranks
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        torch.set_num_threads(max(1, cores // local_world_size))
    return torch.get_num_threads()


def log(rank, message):
    print(f"[rank {rank}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# One rank
# --------------------------------------------------------------------------

def train_epoch(model, loader, optimizer, device, fail_after_first_batch, record_shapes):
    model.train()
    loss_sum, num_seeds, num_batches, shapes = 0.0, 0, 0, []
    # Join: a rank that runs out of batches keeps answering the others' gradient
    # all-reduces until every rank is done, so unequal step counts cannot hang.
    with Join([model]):
        for batch in loader:
            batch = batch.to(device)
            optimizer.zero_grad()
            out = model(batch.x, batch.edge_index)[:batch.batch_size]  # seed rows come first
            loss = F.cross_entropy(out, batch.y[:batch.batch_size])
            loss.backward()
            optimizer.step()
            loss_sum += loss.item() * batch.batch_size
            num_seeds += batch.batch_size
            num_batches += 1
            if record_shapes:
                shapes.append([batch.batch_size, batch.num_nodes, batch.num_edges])
            if fail_after_first_batch:
                raise RuntimeError("--fail-rank: injected failure after the first training batch")
    return loss_sum, num_seeds, num_batches, shapes


def count_correct(model, loader, device):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for batch in loader:
            batch = batch.to(device)
            pred = model(batch.x, batch.edge_index)[:batch.batch_size].argmax(dim=-1)
            correct += int((pred == batch.y[:batch.batch_size]).sum())
            total += batch.batch_size
    return correct, total


def all_reduce_sum(values, device):
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor.tolist()


def train_rank(rank, local_rank, world_size, backend, args, data, launcher, on_epoch=None):
    """Runs inside an initialised process group; returns this rank's report. Rank 0 hands each
    finished epoch's record to on_epoch (what an interrupted run still reports)."""
    device = torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")
    sampling_seed = args.seed + rank

    graph_input = build_stores(data) if args.store else data
    train_seeds = shard(data.train_mask.nonzero().view(-1), rank, world_size, args.seed)
    val_seeds = shard(data.val_mask.nonzero().view(-1), rank, world_size, args.seed)
    loader_args = dict(num_neighbors=args.num_neighbors, batch_size=args.batch_size,
                       num_workers=args.num_workers, is_sorted=True)
    train_loader = NeighborLoader(graph_input, input_nodes=train_seeds, shuffle=True, **loader_args)
    val_loader = NeighborLoader(graph_input, input_nodes=val_seeds, shuffle=False, **loader_args)

    torch.manual_seed(args.seed)  # identical initial weights on every rank
    model = GraphSAGE(data.num_features, args.hidden_channels, num_layers=len(args.num_neighbors),
                      out_channels=int(data.y.max()) + 1).to(device)
    model = DistributedDataParallel(model, device_ids=[local_rank] if device.type == "cuda" else None)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    torch.manual_seed(sampling_seed)  # shuffling and sampling differ per rank

    epochs, local_losses, batches_per_epoch, first_epoch_shapes = [], [], [], []
    for epoch in range(1, args.epochs + 1):
        fail_now = args.fail_rank == rank and epoch == 1
        loss_sum, num_seeds, num_batches, shapes = train_epoch(
            model, train_loader, optimizer, device, fail_now, args.report_details and epoch == 1)
        global_loss_sum, global_seeds = all_reduce_sum([loss_sum, num_seeds], device)
        correct, total = count_correct(model.module, val_loader, device)  # .module: no DDP collectives
        global_correct, global_total = all_reduce_sum([correct, total], device)
        epochs.append({"epoch": epoch, "train_loss": global_loss_sum / max(global_seeds, 1),
                       "val_acc": global_correct / max(global_total, 1)})
        local_losses.append(loss_sum / max(num_seeds, 1))
        batches_per_epoch.append(num_batches)
        first_epoch_shapes = first_epoch_shapes or shapes
        if rank == 0 and on_epoch is not None:
            on_epoch(epochs[-1])
        if rank == 0:
            log(rank, f"epoch {epoch}: train_loss {epochs[-1]['train_loss']:.4f} val_acc {epochs[-1]['val_acc']:.4f}")

    report = {"rank": rank, "local_rank": local_rank, "host": socket.gethostname(), "pid": os.getpid(),
              "device": str(device), "threads": torch.get_num_threads(),
              "num_train_seeds": train_seeds.numel(), "num_val_seeds": val_seeds.numel(),
              "batches_per_epoch": batches_per_epoch, "train_loss": local_losses}
    if args.report_details:
        report["train_seeds"] = sorted(train_seeds.tolist())
        report["first_epoch_batches"] = first_epoch_shapes
    rank_reports = [None] * world_size
    dist.all_gather_object(rank_reports, report)
    return job_report(args, data, launcher, backend, epochs, rank_reports)


def job_report(args, data, launcher, backend, epochs, rank_reports):
    return {
        "ok": True, "exit_code": EXIT_OK, "launcher": launcher, "world_size": len(rank_reports),
        "backend": backend, "input": "store" if args.store else "data",
        "sampling_backend": neighbor_sampling_backend(),
        "graph": {"source": args.data or "synthetic", "num_nodes": data.num_nodes,
                  "num_edges": data.num_edges, "num_features": data.num_features,
                  "num_classes": int(data.y.max()) + 1, "num_train": int(data.train_mask.sum()),
                  "num_val": int(data.val_mask.sum())},
        "config": {"num_neighbors": args.num_neighbors, "batch_size": args.batch_size,
                   "epochs": args.epochs, "lr": args.lr, "hidden_channels": args.hidden_channels,
                   "seed": args.seed},
        "epochs": epochs, "val_acc": epochs[-1]["val_acc"], "ranks": rank_reports,
    }


def run_rank(rank, local_rank, world_size, local_world_size, backend, args, data, launcher, on_epoch=None):
    """Process-group lifetime around train_rank: always destroyed, also on error."""
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
    else:
        threads = set_cpu_threads(args.threads, local_world_size)
        log(rank, f"cpu, {threads} torch threads")
    dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world_size,
                            timeout=datetime.timedelta(seconds=args.timeout))
    try:
        return train_rank(rank, local_rank, world_size, backend, args, data, launcher, on_epoch)
    finally:
        dist.destroy_process_group()


def leave_after_failure():
    """Print the traceback and end this rank now, skipping Python's teardown.

    After a peer fails mid-collective, freeing the DDP reducer at interpreter
    exit can deadlock (seen with torch 2.13 + gloo: the process-group destructor
    joins a gloo thread that waits for the GIL), leaving the rank alive until
    its launcher kills it. os._exit cannot hang.
    """
    traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_FAILED)


def spawned_worker(rank, world_size, backend, args, data, result_dir):
    """Entry point of a self-spawned worker (torch.multiprocessing passes `rank`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C reaches the whole group: the parent ends the job
    import_stack()  # a spawned interpreter re-imports this file without running main()
    os.environ["MASTER_ADDR"] = args.master_addr
    os.environ["MASTER_PORT"] = str(args.master_port)

    def on_epoch(record):  # the parent reads these when it is interrupted
        with open(os.path.join(result_dir, "epochs.jsonl"), "a") as handle:
            handle.write(json.dumps(record) + "\n")
    try:
        report = run_rank(rank, rank, world_size, world_size, backend, args, data, "spawn", on_epoch)
    except Exception as error:
        # Timestamped, so the parent can tell the first failure from the peers'
        # "Connection closed by peer" errors that follow it.
        with open(os.path.join(result_dir, f"rank{rank}.error.json"), "w") as handle:
            json.dump({"rank": rank, "pid": os.getpid(), "time": time.time(),
                       "message": f"{type(error).__name__}: {error}"}, handle)
        leave_after_failure()
    if rank == 0:  # the parent prints it once every worker has exited 0
        with open(os.path.join(result_dir, "report.json"), "w") as handle:
            json.dump(report, handle)


# --------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------

def print_json(document):
    sys.stdout.flush()
    write_json(document)


def failure_report(fields, failures):
    """A failed job: the recipe's keys and one ddp-rank-failed finding per failed rank."""
    return envelope(fields, [TOOL.finding("ddp-rank-failed", failure, fix="read the rank's traceback on stderr; "
                                          "a peer that failed first makes the others fail with 'Connection "
                                          "closed by peer'") for failure in failures], failed=True)


EPOCHS_DONE = []  # rank 0's finished epochs, what an interrupted torchrun worker still reports


def main_torchrun(args):
    """This process is one worker; torchrun (or srun) started the others."""
    rank, world_size, local_rank = launch_variables(os.environ)  # checked in main() already
    if args.nprocs is not None:
        log(rank, f"--nprocs {args.nprocs} ignored: the launcher set WORLD_SIZE={world_size}")
    try:
        local_world_size = local_world_size_from_env(os.environ, world_size)
        backend = choose_backend(args.backend, local_world_size)
        data = load_data(args)
        if neighbor_sampling_backend() is None:
            if rank == 0:
                print_json(missing_backend_report())
            return EXIT_FAILED
        if INDUCTOR_GUARD is not None:
            INDUCTOR_GUARD.launched = True
    except UsageError as error:
        if rank == 0:
            return refuse(cli.UsageError("ddp_neighbor_training.py: error: %s" % error, "ddp-usage-error",
                                         {"message": str(error)}, fix=TOOL.command("--help")))
        log(rank, f"error: {error}")
        return EXIT_USAGE
    try:
        report = run_rank(rank, local_rank, world_size, local_world_size, backend, args, data, "torchrun",
                          EPOCHS_DONE.append)
    except Exception as error:
        if rank == 0:
            failure = {"rank": rank, "message": f"{type(error).__name__}: {error}"}
            print_json(failure_report({
                "launcher": "torchrun", "world_size": world_size, "error": failure,
                "hint": "rank 0's own error, possibly caused by another rank failing first: read every "
                        "entry of torchrun's failure summary on stderr ('Root Cause' compares "
                        "whole-second timestamps)"}, [failure]))
        get_error_handler().record_exception(error)  # what @record does: feeds torchrun's "Root Cause"
        leave_after_failure()
    if rank == 0:
        print_json(envelope(report))
    return EXIT_OK


def main_spawn(args):
    """Start args.nprocs workers here and wait; stop them all if one fails."""
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    nprocs = args.nprocs or gpus or 2
    backend = choose_backend(args.backend, nprocs)
    data = load_data(args)  # loaded once; spawn hands its tensors to the workers via shared memory
    # After the input checks: a refused --data file is a usage error whatever this machine lacks.
    if neighbor_sampling_backend() is None:
        print_json(missing_backend_report())
        return EXIT_FAILED
    args.master_port = args.master_port or free_port(args.master_addr)
    INDUCTOR_GUARD.launched = True
    print(f"spawning {nprocs} workers, backend {backend}, rendezvous {args.master_addr}:{args.master_port}",
          file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="ddp_recipe_") as result_dir:
        STOPS.hold()  # a signal while the workers start is raised once they are all known (and endable)
        context = mp.start_processes(spawned_worker, args=(nprocs, backend, args, data, result_dir),
                                     nprocs=nprocs, join=False, start_method="spawn")
        try:
            STOPS.resume()
            # join() raises as soon as one worker fails, after stopping the rest.
            while not context.join(grace_period=5):
                pass
        except ProcessException as error:
            print(str(error), file=sys.stderr)
            failures = read_failures(result_dir) or [{"rank": error.error_index, "pid": error.error_pid,
                                                      "message": str(error).strip().splitlines()[-1]}]
            print_json(failure_report({"launcher": "spawn", "world_size": nprocs, "error": failures[0],
                                       "failed_ranks": failures}, failures))
            return EXIT_FAILED
        except Interrupted as stop:
            STOPS.hold()  # a second signal must not cut the cleanup short
            ended = end_workers(context)
            print_json(interrupted_report(stop, "spawn", nprocs, read_epochs(result_dir), ended))
            return stop.code
        finally:
            # Reached with live workers only on an unexpected error in the parent.
            end_workers(context)
        with open(os.path.join(result_dir, "report.json")) as handle:
            print_json(envelope(json.load(handle)))
    return EXIT_OK


def end_workers(context):
    """SIGKILL every live worker and what it started (loader workers); -> the pids ended."""
    from diagnostics_core import sandbox
    table = sandbox.process_table() or {}
    live = [process.pid for process in context.processes if process.is_alive()]
    ended = live + [pid for root in live for pid in sandbox.descendants_of(root, table)]
    for pid in ended:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for process in context.processes:
        process.join()
    return ended


def read_epochs(result_dir):
    try:
        with open(os.path.join(result_dir, "epochs.jsonl")) as handle:
            return [json.loads(line) for line in handle if line.endswith("\n")]
    except (OSError, ValueError):
        return []


def interrupted_report(stop, launcher, world_size, epochs, ended=None):
    """One document for a job a signal stopped: what rank 0 had finished, the workers ended."""
    meta = {"name": TOOL.name, "version": TOOL.version, "argv": sys.argv[1:]}
    evidence = dict(stop.evidence(), epochs_finished=len(epochs))
    document, _ = TOOL.document([], {}, meta, interrupted=evidence)
    document.update(launcher=launcher, world_size=world_size, epochs=epochs,
                    val_acc=epochs[-1]["val_acc"] if epochs else None)
    if ended is not None:
        document["workers_ended"] = ended
    return document


def read_failures(result_dir):
    """Worker error records, first failure first."""
    failures = []
    for name in os.listdir(result_dir):
        if name.endswith(".error.json"):
            with open(os.path.join(result_dir, name)) as handle:
                failures.append(json.load(handle))
    return sorted(failures, key=lambda failure: failure["time"])


def main(argv=None):
    text.guard_standard_streams()  # also when main() is called from another file (idempotent)
    try:
        args = parse_args(argv)
        answered = cli.metadata_command(TOOL, args)
        if answered is not None:
            return answered
        if args.fail_rank is not None and args.fail_rank < 0:
            raise UsageError("--fail-rank must be >= 0")
        if args.timeout <= 0:
            raise UsageError("--timeout must be > 0")
        if args.data and not os.path.isfile(args.data):  # refused before torch is imported
            raise UsageError(f"--data {args.data}: no such file")
        if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
            launch_variables(os.environ)  # before torch, a store or a process group
        absent = [name for name in ("torch", "torch_geometric") if not module_findable(name)]
        if absent:
            raise stack_missing(ImportError("No module named %s" % " and ".join(repr(n) for n in absent)))
        global INDUCTOR_GUARD, STOPS
        INDUCTOR_GUARD = InductorCacheGuard()
        STOPS = StopSignals()  # from here on SIGINT/SIGTERM end the run with one document (importing torch takes s)
        missing = import_stack()
        if missing is not None:
            raise stack_missing(missing)
    except Interrupted as stop:
        INDUCTOR_GUARD.remove_if_unused()
        return stopped(stop)
    except UsageError as error:
        return refuse_and_clean(cli.UsageError("ddp_neighbor_training.py: error: %s" % error, "ddp-usage-error",
                                               {"message": str(error)}, fix=TOOL.command("--help")))
    except cli.UsageError as error:
        return refuse_and_clean(error)
    try:
        return main_after_import(args)
    finally:
        INDUCTOR_GUARD.remove_if_unused()


def module_findable(name):
    """Whether `name` can be imported, found without importing it (importing torch has side effects)."""
    import importlib.util
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def refuse_and_clean(error):
    if INDUCTOR_GUARD is not None:
        INDUCTOR_GUARD.remove_if_unused()
    return refuse(error)


STOPS = None  # SIGINT/SIGTERM become Interrupted while the job runs


def stopped(stop):
    """A signal outside the spawning parent's wait: rank 0 (or the parent) prints what was finished."""
    STOPS.hold()
    torchrun = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    if not torchrun or os.environ["RANK"] == "0":
        print_json(interrupted_report(stop, "torchrun" if torchrun else "spawn",
                                      int(os.environ["WORLD_SIZE"]) if torchrun else None, list(EPOCHS_DONE)))
    if torchrun and dist is not None:  # as after a failure: tearing down DDP after a peer left can hang
        sys.stderr.flush()
        os._exit(stop.code)
    return stop.code


def main_after_import(args):
    try:
        if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
            # record: any other exception, and torchrun's summary shows this rank's traceback
            return record(main_torchrun)(args)
        return main_spawn(args)
    except UsageError as error:
        return refuse(cli.UsageError("ddp_neighbor_training.py: error: %s" % error, "ddp-usage-error",
                                     {"message": str(error)}, fix=TOOL.command("--help")))
    except Interrupted as stop:  # before the job started, or in torchrun mode
        return stopped(stop)
    except (SystemExit, KeyboardInterrupt):
        raise
    except Exception as error:
        if "RANK" in os.environ:
            raise  # torchrun records the traceback and stops the other workers
        traceback.print_exc()
        meta = {"name": TOOL.name, "version": TOOL.version, "argv": sys.argv[1:]}
        document, exit_code = TOOL.document([], {}, meta, internal_error={
            "error": "%s: %s" % (type(error).__name__, error)})
        document.update(launcher="spawn", error={"message": "internal error in the launcher; see stderr"})
        print_json(document)
        return exit_code


if __name__ == "__main__":
    sys.exit(main())
