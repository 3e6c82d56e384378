#!/usr/bin/env python3
"""Multi-process GraphSAGE training with one NeighborLoader per DDP rank: a template to copy.

Copy this one file into your project and replace the part marked YOUR GRAPH, MODEL AND STEP; the rest
starts the ranks, shards the training seeds and reports. It needs torch and torch_geometric (with pyg-lib
or torch-sparse) and nothing else: run alone, it trains and prints one JSON report on stdout, progress on
stderr. One process per GPU (nccl) or per CPU slot (gloo). Under torchrun (or srun with RANK and
WORLD_SIZE mapped) this process is one rank; otherwise it spawns --nprocs ranks itself.
Run with --help for flags, launch styles and examples.

Inside the skill (this file beside ddp_recipe/ and diagnostics_core/) the same command runs under the
skill's diagnostics (ddp_recipe/cli.py): its report document, findings with fixes, the environment named.
They wrap the functions below; a rank never imports them while it trains.

Exit codes run alone: 0 trained, 1 the job failed, 2 usage error, 128 + signal number when stopped.
"""

import argparse
import contextlib
import datetime
import json
import math
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback

VERSION = "1.2.0"

DESCRIPTION = """\
Train GraphSAGE with DistributedDataParallel and one NeighborLoader per rank, on
a synthetic community graph (default), a saved Data file, or a (FeatureStore,
GraphStore) pair. A template: copy this file alone and replace its marked part.
"""

EPILOG = """\
launch styles:
  self-spawn   python scripts/ddp_neighbor_training.py --nprocs 2
               The script starts --nprocs workers with torch.multiprocessing
               (start method 'spawn') on this machine, rendezvous at
               --master-addr:--master-port (default 127.0.0.1 and a free port).
               The graph is loaded once and handed to the workers through
               /dev/shm; --load-per-rank loads it in each worker instead.
  torchrun     torchrun --nproc_per_node 2 scripts/ddp_neighbor_training.py
               When RANK and WORLD_SIZE are set (torchrun, or srun with the
               variables mapped as below) the script is one worker: it reads
               RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
               MASTER_PORT, loads the graph itself and ignores
               --nprocs/--master-addr/--master-port. Only one of RANK and
               WORLD_SIZE set is refused (exit 2): a launcher sets both.
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
  --threads says otherwise. Every process keeps its temporary files (PyG's
  rendered templates, multiprocessing's pymp-*) in a folder of its own under
  the temp dir and removes it when it ends.

output:
  stdout carries one JSON document; progress, warnings and tracebacks go to
  stderr. The job's keys: launcher, world_size, backend, input ('data' or
  'store'), sampling_backend, graph (sizes, tensor_bytes), config, per-epoch
  {train_loss, val_acc} (train_loss is the seed-weighted mean over all
  ranks), final val_acc, and one entry per rank (seed count, batches per
  epoch, rank-local losses; with --report-details also the rank's sorted
  training seeds and the [seeds, nodes, edges] shape of each first-epoch
  batch). A failed job has "error" (the first failure) and "failed_ranks"
  (every failure, earliest first): peers of the rank that failed first
  usually follow with "Connection closed by peer". Inside the skill the
  document is its report (ok, status, exit_code, findings with fixes, gate
  "trained", then the job's keys); this file copied alone prints the job's
  keys with "ok". Under torchrun only rank 0 prints, and only while it runs:
  rely on the exit code and torchrun's failure summary.

exit codes:
  0  every rank finished training
  1  the job failed: a rank raised or died (the others are stopped, and the
     process group times out after --timeout seconds at worst), the ranks
     could not be started (such as a /dev/shm too small for the graph), or no
     neighbour-sampling backend (pyg-lib or torch-sparse) is importable
  2  usage error: bad flag value, unreadable --data file, malformed or half
     set launch variables, --backend nccl without enough GPUs, torch or PyG
     missing; one line on stderr and one JSON document that says why
  (torchrun itself exits 1 whenever any worker exits non-zero.)

examples:
  python scripts/ddp_neighbor_training.py --nprocs 2
  python scripts/ddp_neighbor_training.py --nprocs 2 --num-neighbors 10,5 --batch-size 64 --epochs 3
  python scripts/ddp_neighbor_training.py --nprocs 2 --store
  python scripts/ddp_neighbor_training.py --nprocs 2 --data graph.pt
  python scripts/ddp_neighbor_training.py --nprocs 2 --data graph.pt --load-per-rank --num-workers 0
  torchrun --nproc_per_node 2 scripts/ddp_neighbor_training.py --epochs 3
  python -m torch.distributed.run --nproc_per_node 2 scripts/ddp_neighbor_training.py --data graph.pt
  python scripts/ddp_neighbor_training.py --nprocs 2 | jq '.epochs'
"""

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class UsageError(Exception):
    """A command line, input file or launch environment the recipe refuses (exit 2)."""


class StackMissing(UsageError):
    """torch or torch_geometric cannot be imported here."""


class Stopped(BaseException):
    """SIGINT or SIGTERM: the job stops, and what it finished is still reported."""

    def __init__(self, signum):
        BaseException.__init__(self, signum)
        self.signum = signum

    def record(self):
        return {"signal": signal.Signals(self.signum).name, "exit_code": 128 + self.signum}


# --------------------------------------------------------------------------
# Command line (no torch needed: --help and refusals stay fast)
# --------------------------------------------------------------------------

def positive(text):
    """argparse type: a whole number >= 1."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError("expected a whole number >= 1, got %r" % text)
    return int(text)


def fan_outs(text):
    """argparse type of --num-neighbors: per-hop counts, each positive or -1 (all neighbours)."""
    hops = [part.strip() for part in text.split(",")]
    if not all(hop == "-1" or (hop.isdigit() and int(hop) > 0) for hop in hops):
        raise argparse.ArgumentTypeError("expected comma-separated fan-outs, each positive or -1 (all "
                                         "neighbours), such as 10,5; got %r" % text)
    return [int(hop) for hop in hops]


def add_arguments(parser):
    """The recipe's flags (the skill's diagnostics declare the same ones)."""
    launch = parser.add_argument_group("launch")
    launch.add_argument("--nprocs", type=positive, default=None,
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
    data.add_argument("--load-per-rank", action="store_true",
                      help="self-spawn: each worker loads the graph itself instead of receiving the parent's "
                           "copy through /dev/shm (a copy per rank in RAM; with --num-workers 0 nothing "
                           "goes through /dev/shm)")
    data.add_argument("--store", action="store_true",
                      help="feed the loaders from a (LocalFeatureStore, LocalGraphStore) pair built from "
                           "the data: the place to plug in a remote feature/graph backend")
    data.add_argument("--num-nodes", type=positive, default=1000,
                      help="synthetic graph size (default 1000)")
    data.add_argument("--num-classes", type=positive, default=4,
                      help="synthetic communities = classes (default 4)")
    train = parser.add_argument_group("training")
    train.add_argument("--num-neighbors", type=fan_outs, default=[10, 5], metavar="K1,K2,...",
                       help="fan-out per hop, -1 for all neighbours; also the number of GraphSAGE "
                            "layers (default 10,5)")
    train.add_argument("--batch-size", type=positive, default=64, help="seed nodes per batch (default 64)")
    train.add_argument("--epochs", type=positive, default=3, help="default 3")
    train.add_argument("--hidden-channels", type=positive, default=64, help="default 64")
    train.add_argument("--lr", type=float, default=0.01, help="Adam learning rate (default 0.01)")
    train.add_argument("--num-workers", type=int, default=0,
                       help="NeighborLoader worker processes per rank, persistent (default 0: sample in the rank)")
    train.add_argument("--seed", type=int, default=0,
                       help="seeds the synthetic graph, the split, the shard permutation, the initial "
                            "weights (same on every rank) and sampling (seed + rank) (default 0)")
    hooks = parser.add_argument_group("testing hooks")
    hooks.add_argument("--fail-rank", type=int, default=None, metavar="R",
                       help="rank R raises RuntimeError after its first training batch (to test teardown)")
    hooks.add_argument("--report-details", action="store_true",
                       help="add each rank's sorted training seeds and first-epoch batch shapes to the JSON")


class RefusingParser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError("%s (see --help)" % message)


def build_parser():
    """The parser of this file run alone (the skill's adds --list-findings and --explain to the same flags)."""
    parser = RefusingParser(description=DESCRIPTION, epilog=EPILOG,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pretty", action="store_true", help="indent the JSON")
    add_arguments(parser)
    return parser


def check_arguments(args):
    """Refusals that need no torch, before anything is imported or started."""
    if args.fail_rank is not None and args.fail_rank < 0:
        raise UsageError("--fail-rank must be >= 0")
    for flag, value in (("--timeout", args.timeout), ("--lr", args.lr)):
        if not (math.isfinite(value) and value > 0):
            raise UsageError("%s must be a positive number, got %s" % (flag, value))
    for flag, value in (("--num-workers", args.num_workers), ("--threads", args.threads)):
        if value < 0:
            raise UsageError("%s must be >= 0, got %d" % (flag, value))
    if not 0 <= args.master_port <= 65535:
        raise UsageError("--master-port must be within 0..65535 (0: pick a free one), got %d" % args.master_port)
    if args.data and not os.path.isfile(args.data):
        raise UsageError("--data %s: no such file" % args.data)


def parse_arguments(argv=None):
    args = build_parser().parse_args(argv)
    check_arguments(args)
    return args


# --------------------------------------------------------------------------
# Launch variables, shards, threads, backend (plain arithmetic)
# --------------------------------------------------------------------------

MAX_WORLD_SIZE = 1 << 20  # ranks: far above any job, far below what a process group can be asked for


def launched(environ):
    """Whether a launcher started this process as one rank: torchrun sets RANK and WORLD_SIZE, srun when the
    job script maps them. One of them alone is refused by launch_variables, not ignored."""
    return "RANK" in environ or "WORLD_SIZE" in environ


def shown(text, limit=40):
    """A launcher's value quoted for a one-line message, cut when long."""
    if len(text) > limit:
        text = "%s...[%d characters cut]" % (text[:limit], len(text) - limit)
    return repr(text)


def launch_variables(environ):
    """(rank, world_size, local_rank) from the launcher's variables, checked before any store or process
    group is opened: a rank outside the world, or a value that is not a number, would otherwise wait on
    the rendezvous until it times out, or end in a raw torch error."""
    if ("RANK" in environ) != ("WORLD_SIZE" in environ):
        present, absent = ("RANK", "WORLD_SIZE") if "RANK" in environ else ("WORLD_SIZE", "RANK")
        raise UsageError(
            "%s=%s is set but %s is not: a launcher sets both (torchrun does; srun when the job script maps "
            "them). Refused rather than ignored: ignored, every task that has it would start --nprocs ranks "
            "of its own. Export %s too, or unset %s to self-spawn" % (
                present, shown(environ[present])[1:-1], absent, absent, present))

    def whole(name, low, high, default=None):
        text = environ.get(name)
        if text is None:
            return default
        if not (text.isascii() and text.isdigit()):
            raise UsageError("%s=%s is not a whole number (set by the launcher: check the torchrun/srun line)"
                             % (name, shown(text)))
        value = int(text) if len(text) <= 18 else high + 1  # int() refuses strings of 4,300+ digits
        if not low <= value <= high:
            raise UsageError("%s=%s is outside %d..%d" % (name, shown(text)[1:-1], low, high))
        return value
    world_size = whole("WORLD_SIZE", 1, MAX_WORLD_SIZE)
    rank = whole("RANK", 0, world_size - 1)
    local_world = whole("LOCAL_WORLD_SIZE", 1, world_size)
    local_rank = whole("LOCAL_RANK", 0, (local_world or world_size) - 1, default=0)
    for name in ("MASTER_ADDR", "MASTER_PORT"):
        if not environ.get(name):
            raise UsageError("RANK and WORLD_SIZE are set but %s is not: export it on every rank "
                             "(torchrun sets it), or unset RANK and WORLD_SIZE to self-spawn" % name)
    whole("MASTER_PORT", 1, 65535)
    return rank, world_size, local_rank


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
        raise UsageError("LOCAL_WORLD_SIZE is not set and this job spans several nodes, so WORLD_SIZE=%d is not "
                         "the number of ranks on this node; export LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE (with "
                         "#SBATCH --ntasks-per-node) or launch with torchrun" % world_size)
    return world_size


def shard_bounds(count, rank, world_size):
    """[start, stop) of rank's slice when `count` items are cut into world_size contiguous slices whose sizes
    differ by at most one (the first count % world_size slices get one more, as torch.tensor_split cuts):
    disjoint, and together exactly the items (a plain count // world_size split drops the remainder)."""
    size, extra = divmod(count, world_size)
    start = rank * size + min(rank, extra)
    return start, start + size + (1 if rank < extra else 0)


def threads_per_rank(requested, local_world_size, environ, cores):
    """Torch threads of a CPU rank: --threads, else None when OMP_NUM_THREADS is set (torch reads it; torchrun
    sets it to 1 for several ranks), else the usable cores shared out among the node's ranks."""
    if requested > 0:
        return requested
    if "OMP_NUM_THREADS" in environ:
        return None
    return max(1, cores // local_world_size)


def choose_backend(requested, local_world_size, gpus=None):
    """nccl or gloo for this node's ranks; UsageError when the GPUs cannot serve them."""
    if gpus is None:
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if requested == "nccl" and gpus < local_world_size:
        raise UsageError("--backend nccl needs one GPU per local rank: %d ranks, %d GPUs" % (local_world_size, gpus))
    if requested == "auto":
        if 0 < gpus < local_world_size:
            # Silently training a GPU job on CPU (gloo) is the failure this refuses:
            # usually a wrong local count, e.g. WORLD_SIZE of a multi-node job.
            raise UsageError("--backend auto: %d GPU(s) visible but %d ranks on this node; start one rank per GPU "
                             "(check LOCAL_WORLD_SIZE) or pass --backend gloo to train on CPU on purpose"
                             % (gpus, local_world_size))
        return "nccl" if gpus >= local_world_size else "gloo"
    return requested


# --------------------------------------------------------------------------
# The job's report: a plain dict, filled as the job goes (what a failure or a signal leaves is in it)
# --------------------------------------------------------------------------

def finished(args, backend, sampling_backend, graph, epochs, rank_reports):
    """The keys of a job every rank finished."""
    return {"ok": True, "world_size": len(rank_reports), "backend": backend,
            "input": "store" if args.store else "data", "sampling_backend": sampling_backend, "graph": graph,
            "config": {"num_neighbors": args.num_neighbors, "batch_size": args.batch_size, "epochs": args.epochs,
                       "lr": args.lr, "hidden_channels": args.hidden_channels, "seed": args.seed,
                       "num_workers": args.num_workers},
            "epochs": epochs, "val_acc": epochs[-1]["val_acc"] if epochs else None, "ranks": rank_reports}


def failed(job, failures, **more):
    """A job that stopped on failures (first first): the first is its error, every one is listed."""
    job.update(ok=False, error=failures[0], failed_ranks=failures, **more)
    return job


def stopped_at(job, stop, epochs):
    job.update(ok=False, interrupted=stop.record(), epochs=epochs, val_acc=epochs[-1]["val_acc"] if epochs else None)
    return job


def exit_code(job):
    if job.get("refused") is not None:
        return EXIT_USAGE
    if job.get("interrupted"):
        return job["interrupted"]["exit_code"]
    return EXIT_OK if job.get("ok") else EXIT_FAILED


def error_line(error):
    """'Type: message' of an exception, as a failure record holds it."""
    return "%s: %s" % (type(error).__name__, error)


def print_report(job, argv=None):
    """This file run alone: the job's keys as one JSON document on stdout (a refusal also as one stderr
    line); -> the exit code."""
    if job.get("refused") is not None:
        print("%s: error: %s" % (os.path.basename(sys.argv[0] or "ddp_neighbor_training.py"),
                                 " ".join(job["refused"].split())), file=sys.stderr, flush=True)
    pretty = "--pretty" in (sys.argv[1:] if argv is None else argv)
    sys.stdout.write(json.dumps(job, indent=2 if pretty else None) + "\n")
    sys.stdout.flush()
    return exit_code(job)


# --------------------------------------------------------------------------
# torch and PyG: imported once the command line is accepted
# --------------------------------------------------------------------------

torch = dist = mp = F = Join = ProcessException = DistributedDataParallel = None
Data = DataEdgeAttr = DataTensorAttr = GlobalStorage = NeighborLoader = GraphSAGE = None
remove_self_loops = to_undirected = None


def import_stack():
    """Import torch and PyG into this module (--help and refusals need neither, and importing torch makes
    files in the temp dir); StackMissing when they are not importable."""
    global torch, dist, mp, F, Join, ProcessException, DistributedDataParallel
    global Data, DataEdgeAttr, DataTensorAttr, GlobalStorage, NeighborLoader, GraphSAGE
    global remove_self_loops, to_undirected
    try:
        import torch
        import torch.distributed as dist
        import torch.multiprocessing as mp
        import torch.nn.functional as F
        from torch.distributed.algorithms.join import Join
        from torch.multiprocessing.spawn import ProcessException
        from torch.nn.parallel import DistributedDataParallel

        import torch_geometric.typing  # noqa: F401  (sampling_backend reads it)
        from torch_geometric.data import Data
        from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
        from torch_geometric.data.storage import GlobalStorage
        from torch_geometric.loader import NeighborLoader
        from torch_geometric.nn import GraphSAGE
        from torch_geometric.utils import remove_self_loops, to_undirected
    except ImportError as error:
        raise StackMissing("%s -- this recipe needs torch and torch_geometric in %s" % (error_line(error),
                                                                                      sys.executable))


def sampling_backend():
    """The library NeighborLoader samples with, or None: PyG constructs a loader without one and fails at its
    first batch."""
    import torch_geometric.typing as pyg
    return "pyg-lib" if pyg.WITH_PYG_LIB else "torch-sparse" if pyg.WITH_TORCH_SPARSE else None


NO_SAMPLING_BACKEND = "NeighborLoader needs pyg-lib or torch-sparse; neither is importable"


# ==========================================================================
# YOUR GRAPH, MODEL AND STEP: replace these with your own. Keep what each
# returns; everything after this part launches the ranks and reports.
# ==========================================================================

def load_data(args):
    """Return a Data with x, y (class ids), edge_index, train_mask and val_mask: your graph goes here.
    Raise UsageError for an input you refuse (exit 2)."""
    data = load_saved_data(args.data, args.seed) if args.data else community_graph(
        args.num_nodes, args.num_classes, args.seed)
    # Sort once into CSC order (by destination node) so that neither the loaders nor
    # the graph store re-sort per rank; both then see neighbours in the same order.
    return data.sort(sort_by_row=False)


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
        raise UsageError("--data %s: no such file" % path)
    # weights_only loading runs no pickled code; only PyG's Data classes are allowed in.
    try:
        with torch.serialization.safe_globals([Data, DataEdgeAttr, DataTensorAttr, GlobalStorage]):
            data = torch.load(path, weights_only=True)
    except Exception as error:
        raise UsageError("--data %s: cannot load a torch_geometric Data object (%s: %s)"
                         % (path, type(error).__name__, (str(error).splitlines() or [""])[0]))
    if isinstance(data, dict):  # saved as data.to_dict(): the form torch.load(path, mmap=True) can map
        data = Data.from_dict(data)
    if not isinstance(data, Data):
        raise UsageError("--data %s: expected torch_geometric.data.Data (or its to_dict()), got %s"
                         % (path, type(data).__name__))
    for key in ("x", "y", "edge_index"):
        if getattr(data, key, None) is None:
            raise UsageError("--data %s: Data has no '%s'" % (path, key))
    if data.y.dim() != 1 or data.y.dtype.is_floating_point:
        raise UsageError("--data %s: 'y' must be a 1-D tensor of class ids, got %s %s"
                         % (path, tuple(data.y.shape), data.y.dtype))
    if getattr(data, "train_mask", None) is None or getattr(data, "val_mask", None) is None:
        add_split(data, train_fraction=0.8, seed=seed)
    return data


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


def build_model(data, args):
    return GraphSAGE(data.num_features, args.hidden_channels, num_layers=len(args.num_neighbors),
                     out_channels=int(data.y.max()) + 1)


def train_step(model, batch, optimizer):
    """One optimisation step on a sampled batch; -> its loss. The seed nodes are the batch's first
    batch_size rows, and the loss is taken on them only."""
    optimizer.zero_grad()
    out = model(batch.x, batch.edge_index)[:batch.batch_size]
    loss = F.cross_entropy(out, batch.y[:batch.batch_size])
    loss.backward()
    optimizer.step()
    return loss


def predict(model, batch):
    """Class predictions for the batch's seed nodes."""
    return model(batch.x, batch.edge_index)[:batch.batch_size].argmax(dim=-1)


# ==========================================================================
# End of your part.
# ==========================================================================

def describe_graph(data, args):
    tensors = [value for store in data.stores for value in store.values() if isinstance(value, torch.Tensor)]
    return {"source": args.data or "synthetic", "num_nodes": data.num_nodes, "num_edges": data.num_edges,
            "num_features": data.num_features, "num_classes": int(data.y.max()) + 1,
            "num_train": int(data.train_mask.sum()), "num_val": int(data.val_mask.sum()),
            "tensor_bytes": sum(t.numel() * t.element_size() for t in tensors)}


def shard(node_ids, rank, world_size, seed):
    """Rank `rank`'s contiguous slice (shard_bounds) of a permutation shared by all ranks."""
    order = torch.randperm(node_ids.numel(), generator=torch.Generator().manual_seed(seed))
    start, stop = shard_bounds(node_ids.numel(), rank, world_size)
    return node_ids[order[start:stop]]


def visible_gpus():
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def free_port(addr):
    # Another process may take the port before rank 0 binds it; pass --master-port to be sure.
    with socket.socket() as sock:
        sock.bind((addr, 0))
        return sock.getsockname()[1]


def set_cpu_threads(requested, local_world_size):
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = threads_per_rank(requested, local_world_size, os.environ, cores)
    if threads is not None:
        torch.set_num_threads(threads)
    return torch.get_num_threads()


def log(rank, message):
    print("[rank %s] %s" % (rank, message), file=sys.stderr, flush=True)


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
            loss = train_step(model, batch, optimizer)
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
            correct += int((predict(model, batch) == batch.y[:batch.batch_size]).sum())
            total += batch.batch_size
    return correct, total


def all_reduce_sum(values, device):
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor.tolist()


def train_rank(rank, local_rank, world_size, backend, args, data, on_epoch):
    """Runs inside an initialised process group; -> (epochs, every rank's report). Rank 0 hands each
    finished epoch's record to on_epoch (what a stopped job still reports)."""
    device = torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")
    graph_input = build_stores(data) if args.store else data
    train_seeds = shard(data.train_mask.nonzero().view(-1), rank, world_size, args.seed)
    val_seeds = shard(data.val_mask.nonzero().view(-1), rank, world_size, args.seed)
    # Persistent workers start once, not every epoch (under spawn each start imports torch anew).
    loader_args = dict(num_neighbors=args.num_neighbors, batch_size=args.batch_size, num_workers=args.num_workers,
                       persistent_workers=args.num_workers > 0, is_sorted=True)
    train_loader = NeighborLoader(graph_input, input_nodes=train_seeds, shuffle=True, **loader_args)
    val_loader = NeighborLoader(graph_input, input_nodes=val_seeds, shuffle=False, **loader_args)

    torch.manual_seed(args.seed)  # identical initial weights on every rank
    model = build_model(data, args).to(device)
    model = DistributedDataParallel(model, device_ids=[local_rank] if device.type == "cuda" else None)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    torch.manual_seed(args.seed + rank)  # shuffling and sampling differ per rank

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
        if rank == 0:
            on_epoch(epochs[-1])
            log(rank, "epoch %d: train_loss %.4f val_acc %.4f" % (epoch, epochs[-1]["train_loss"],
                                                                  epochs[-1]["val_acc"]))

    report = {"rank": rank, "local_rank": local_rank, "host": socket.gethostname(), "pid": os.getpid(),
              "device": str(device), "threads": torch.get_num_threads(),
              "num_train_seeds": train_seeds.numel(), "num_val_seeds": val_seeds.numel(),
              "batches_per_epoch": batches_per_epoch, "train_loss": local_losses}
    if args.report_details:
        report["train_seeds"] = sorted(train_seeds.tolist())
        report["first_epoch_batches"] = first_epoch_shapes
    rank_reports = [None] * world_size
    dist.all_gather_object(rank_reports, report)
    return epochs, rank_reports


def run_rank(rank, local_rank, world_size, local_world_size, backend, args, data, on_epoch):
    """Process-group lifetime around train_rank: always destroyed, also on error."""
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
    else:
        log(rank, "cpu, %d torch threads" % set_cpu_threads(args.threads, local_world_size))
    dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world_size,
                            timeout=datetime.timedelta(seconds=args.timeout))
    try:
        return train_rank(rank, local_rank, world_size, backend, args, data, on_epoch)
    finally:
        dist.destroy_process_group()


# --------------------------------------------------------------------------
# Every process: its own temp folder, signals, a way out that cannot hang
# --------------------------------------------------------------------------

PRIVATE_TEMP = []  # this process's temp folder (at most one), removed however it ends
# A loader worker hands tensors over through a socket at <temp dir>/pymp-XXXXXXXX/listener-XXXXXXXX, and AF_UNIX
# takes 107 characters at most: past that the worker fails in a background thread and the loader waits forever.
SOCKET_PATH_MAX = 107
SOCKET_TAIL = len("/ddp-XXXXXXXX/pymp-XXXXXXXX/listener-XXXXXXXX")


def temp_base(base):
    """Where this process's temp folder goes: the temp dir, or /tmp when the temp dir's path is too long for the
    sockets under it (as Python 3.13's multiprocessing falls back)."""
    if len(base) + SOCKET_TAIL > SOCKET_PATH_MAX and os.path.isdir("/tmp"):
        return "/tmp"
    return base


@contextlib.contextmanager
def private_temp_dir():
    """A temp folder of this process's own, made TMPDIR of everything it starts: PyG's rendered conv templates
    (*_propagate_*.py), multiprocessing's pymp-* and torch's inductor cache go with it when it ends."""
    folder = tempfile.mkdtemp(prefix="ddp-", dir=temp_base(tempfile.gettempdir()))
    previous = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"] = tempfile.tempdir = folder
    PRIVATE_TEMP.append(folder)
    try:
        yield folder
    finally:
        PRIVATE_TEMP.remove(folder)
        if previous[0] is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = previous[0]
        tempfile.tempdir = previous[1]
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def stop_on_signals():
    """SIGINT/SIGTERM raise Stopped once, in this (main) thread; later ones are ignored, so the cleanup the
    first one starts runs to its end."""
    def stop(signum, frame):
        for number in STOP_SIGNALS:
            signal.signal(number, signal.SIG_IGN)
        raise Stopped(signum)
    previous = [(number, signal.signal(number, stop)) for number in STOP_SIGNALS]
    try:
        yield
    finally:
        for number, handler in previous:
            signal.signal(number, handler)


def leave(code):
    """End this rank now, skipping Python's teardown. After a peer failed mid-collective, freeing the DDP
    reducer can deadlock (seen with torch 2.13 + gloo: the process-group destructor joins a gloo thread
    that waits for the GIL), leaving the rank alive until its launcher kills it; os._exit cannot hang.
    Call it while the failed frames are still referenced (inside the except block)."""
    sys.stdout.flush()
    sys.stderr.flush()
    for folder in PRIVATE_TEMP:
        shutil.rmtree(folder, ignore_errors=True)
    os._exit(code)


# --------------------------------------------------------------------------
# Launched by torchrun (or srun): this process is one rank
# --------------------------------------------------------------------------

def run_as_rank(argv, report):
    """Train as one rank of a launched job; rank 0 (or, for a refusal, any rank that cannot know its rank)
    hands the job's record to `report` -> exit code; the other ranks print nothing."""
    job, rank, training = {"ok": False, "launcher": "torchrun", "world_size": None}, None, False
    with private_temp_dir(), stop_on_signals():
        try:
            args = parse_arguments(argv)
            rank, world_size, local_rank = launch_variables(os.environ)
            job["world_size"] = world_size
            if args.nprocs is not None:
                log(rank, "--nprocs %d ignored: the launcher set WORLD_SIZE=%d" % (args.nprocs, world_size))
            local_world_size = local_world_size_from_env(os.environ, world_size)
            import_stack()
            backend = choose_backend(args.backend, local_world_size)
            data = load_data(args)
            job["graph"] = describe_graph(data, args)
            job["sampling_backend"] = sampling_backend()
            if job["sampling_backend"] is None:
                job["error"] = {"message": NO_SAMPLING_BACKEND}
                return report(job, argv) if rank == 0 else EXIT_FAILED
            training = True  # from here on, leave() instead of returning: teardown can hang
            epochs, rank_reports = run_rank(rank, local_rank, world_size, local_world_size, backend, args, data,
                                            job.setdefault("epochs", []).append)
            job.update(finished(args, backend, job["sampling_backend"], job["graph"], epochs, rank_reports))
        except UsageError as error:
            job["refused"] = str(error)
            if isinstance(error, StackMissing):
                job["stack_missing"] = True
            if rank not in (None, 0):
                log(rank, "error: %s" % error)
                return EXIT_USAGE
        except Stopped as stop:  # torchrun stops its workers with SIGTERM
            stopped_at(job, stop, job.get("epochs") or [])
            leave(report(job, argv) if rank in (None, 0) else stop.record()["exit_code"])
        except Exception as error:
            traceback.print_exc()
            failed(job, [{"rank": rank, "pid": os.getpid(), "time": time.time(), "message": error_line(error)}],
                   hint="rank 0's own error, possibly caused by another rank failing first: read every entry of "
                        "torchrun's failure summary on stderr ('Root Cause' compares whole-second timestamps)")
            code = report(job, argv) if rank in (None, 0) else EXIT_FAILED
            if training:
                from torch.distributed.elastic.multiprocessing.errors import get_error_handler
                get_error_handler().record_exception(error)  # what @record does: feeds torchrun's "Root Cause"
                leave(code)
            return code
    return report(job, argv) if rank in (None, 0) else exit_code(job)


# --------------------------------------------------------------------------
# Self-spawn: this process starts the ranks and waits for them
# --------------------------------------------------------------------------

def spawned_worker(index, world_size, backend, args, data, result_dir):
    """A self-spawned rank (torch.multiprocessing passes its index)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C reaches the whole group: the parent ends the job
    import_stack()  # a spawned interpreter runs this file's top, not main()
    os.environ["MASTER_ADDR"] = args.master_addr
    os.environ["MASTER_PORT"] = str(args.master_port)

    def on_epoch(record):  # the parent reads these when it is stopped
        with open(os.path.join(result_dir, "epochs.jsonl"), "a") as handle:
            handle.write(json.dumps(record) + "\n")
    try:
        if data is None:  # --load-per-rank
            data = load_data(args)
        epochs, rank_reports = run_rank(index, index, world_size, world_size, backend, args, data, on_epoch)
    except Exception as error:
        # Timestamped, so the parent can tell the first failure from the peers'
        # "Connection closed by peer" errors that follow it.
        record = {"rank": index, "pid": os.getpid(), "time": time.time(), "message": error_line(error)}
        if isinstance(error, UsageError):
            record["refused"] = str(error)
        else:
            traceback.print_exc()
        with open(os.path.join(result_dir, "rank%d.error.json" % index), "w") as handle:
            json.dump(record, handle)
        leave(EXIT_FAILED)
    if index == 0:  # the parent reads it once every rank has exited 0
        with open(os.path.join(result_dir, "report.json"), "w") as handle:
            json.dump(finished(args, backend, sampling_backend(), describe_graph(data, args), epochs, rank_reports),
                      handle)


def end_ranks(processes):
    """SIGKILL the live ranks; -> their pids. Their loader workers notice the rank is gone and exit."""
    live = [process for process in processes if process.is_alive()]
    for process in live:
        process.kill()
    for process in processes:
        process.join()
    return [process.pid for process in live]


def read_failures(result_dir):
    """The ranks' failure records, first failure first."""
    failures = []
    for name in os.listdir(result_dir):
        if name.endswith(".error.json"):
            with open(os.path.join(result_dir, name)) as handle:
                failures.append(json.load(handle))
    return sorted(failures, key=lambda failure: failure["time"])


def read_epochs(result_dir):
    try:
        with open(os.path.join(result_dir, "epochs.jsonl")) as handle:
            return [json.loads(line) for line in handle if line.endswith("\n")]
    except (OSError, ValueError):
        return []


def self_spawn(args, job, end=end_ranks):
    """Start the ranks here and wait for them, filling `job` as it goes: a signal (any BaseException) ends
    the ranks with `end(processes) -> pids` and leaves what rank 0 finished in `job` on its way up."""
    gpus = visible_gpus()
    nprocs = args.nprocs or gpus or 2
    job.update(ok=False, launcher="spawn", world_size=nprocs)
    backend = choose_backend(args.backend, nprocs, gpus)
    data = None
    if not args.load_per_rank:
        data = load_data(args)  # once: spawn hands its tensors to the ranks through /dev/shm
        job["graph"] = describe_graph(data, args)
    job["sampling_backend"] = sampling_backend()
    if job["sampling_backend"] is None:  # after the input checks: a refused file is refused whatever is missing
        job["error"] = {"message": NO_SAMPLING_BACKEND}
        return job
    args.master_port = args.master_port or free_port(args.master_addr)
    print("spawning %d workers, backend %s, rendezvous %s:%d" % (nprocs, backend, args.master_addr, args.master_port),
          file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="ddp_recipe_") as result_dir:
        processes = []
        try:
            try:
                context = mp.start_processes(spawned_worker, args=(nprocs, backend, args, data, result_dir),
                                             nprocs=nprocs, join=False, start_method="spawn")
            except (OSError, RuntimeError) as error:  # handing the graph over failed (pickled through /dev/shm)
                return failed(job, [{"rank": None, "pid": os.getpid(), "time": time.time(),
                                     "while": "starting the ranks", "message": error_line(error)}])
            processes = context.processes
            while not context.join(grace_period=5):  # raises as soon as one rank fails, after stopping the rest
                pass
        except ProcessException as error:
            print(str(error), file=sys.stderr)
            failures = read_failures(result_dir) or [{"rank": error.error_index, "pid": error.error_pid,
                                                      "signal": getattr(error, "signal_name", None),
                                                      "message": str(error).strip().splitlines()[-1]}]
            if failures[0].get("refused"):  # --load-per-rank: the rank refused the input
                job["refused"] = failures[0]["refused"]
                return job
            return failed(job, failures)
        except BaseException:  # a signal: end the ranks, keep what rank 0 finished
            job["workers_ended"] = end(processes or multiprocessing.active_children())
            epochs = read_epochs(result_dir)
            job.update(epochs=epochs, val_acc=epochs[-1]["val_acc"] if epochs else None)
            raise
        finally:
            end(processes or multiprocessing.active_children())  # live ranks only after an unexpected error here
        with open(os.path.join(result_dir, "report.json")) as handle:
            job.update(json.load(handle))
    return job


# --------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------

def run_alone(argv=None):
    """This file without the skill beside it: self-spawn, one plain JSON report."""
    job = {"ok": False, "launcher": "spawn", "world_size": None}
    with private_temp_dir(), stop_on_signals():
        try:
            args = parse_arguments(argv)
            import_stack()
            self_spawn(args, job)
        except UsageError as error:
            job["refused"] = str(error)
        except Stopped as stop:
            stopped_at(job, stop, job.get("epochs") or [])
        except Exception as error:
            traceback.print_exc()
            job["error"] = {"message": error_line(error)}
    return print_report(job, argv)


def skill_beside():
    """Whether the skill's diagnostics for this file (ddp_recipe/, diagnostics_core/) stand beside it."""
    here = os.path.dirname(os.path.abspath(__file__))
    return all(os.path.isfile(os.path.join(here, package, "__init__.py"))
               for package in ("ddp_recipe", "diagnostics_core"))


def import_skill():
    """Make the skill's packages importable, with this very module as `ddp_neighbor_training` (run as a script
    this file is __main__, and the ranks it spawns unpickle its functions from there)."""
    sys.dont_write_bytecode = True  # importing from the skill's folder must not write __pycache__ there
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    sys.modules.setdefault("ddp_neighbor_training", sys.modules[__name__])


def report_through_skill(job, argv):
    """Rank 0 of a launched job inside the skill, after training: the job as the skill's document."""
    import_skill()
    from ddp_recipe import cli
    return cli.print_job(job, argv)


def main(argv=None):
    """`python ddp_neighbor_training.py` and the console script. A launched rank trains as this file alone does
    and hands its record on at the end; otherwise the skill's diagnostics run the job when they stand beside
    this file (ddp_recipe/cli.py on the skill's runner; --help and --list-findings answered before it loads)."""
    inside = skill_beside()
    if launched(os.environ):
        return run_as_rank(argv, report_through_skill if inside else print_report)
    if not inside:
        return run_alone(argv)
    import_skill()
    import ddp_recipe
    from diagnostics_core import entry
    return entry.tool_main(ddp_recipe, "ddp_neighbor_training")(argv)


if __name__ == "__main__":
    sys.exit(main())
