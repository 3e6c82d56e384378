"""The planner's command line. Planning from sizes imports no torch; a data file, a store or --calibrate
runs in sandboxed children with deadlines (probe.py)."""

import os
import sys
import time

from diagnostics_core import cli as shared_cli
from diagnostics_core.cli import UsageError
from diagnostics_core.contract import EXIT_CODES_HELP
from .findings import TOOL

USAGE = """\
%(prog)s (--nodes N --edges E [--undirected] | --node-type NAME:N:F ... --edge-type S,R,D:E ...
        | --data PATH | --store MODULE:CALLABLE [--path DIR] --edges E)
       [--features F] [--feature-dtype T] [--edge-features F] [--no-labels]
       [--conv sage|gcn|gat|gin|transformer] [--layers L] [--hidden H] [--heads N] [--classes C]
       [--num-neighbors 15,10,5] [--batch-size B] [--num-workers W] [--disjoint] [--subgraph-type T]
       [--gpus-per-node G] [--gpu-memory 80GB] [--host-ram 512GB] [--cores C] [--shm SIZE] [--machines M]
       [--calibrate] [--timeout S] [--format json|markdown] [--pretty]
       %(prog)s --list-findings | --explain ID"""

DESCRIPTION = """\
Will it fit? For each design (full batch; one process with NeighborLoader; DDP with one
memory-mapped copy per node or a private copy per rank; several nodes; a store pair) the
host RAM per process and per node (steady and at the peak of loading), the /dev/shm it
needs, the GPU memory per rank (worst case and expected batch), the one-off preprocessing
peaks, whether it fits, and the cheapest design that fits with its launch line. Every
figure says how it was obtained: measured coefficient (and its calibration run), formula,
or cited source.
"""

EPILOG = EXIT_CODES_HELP + """  Gate "planned": the sizes could be read (a store that fails or hangs fails it).
  Gate "fits": some design fits the hardware given (plan-nothing-fits otherwise).

where the numbers come from:
  coefficients measured by running PyG's own operations (loader construction with
  and without workers, sorted or not, sort, ToUndirected, torch.save, forward and
  backward of each conv) at small sizes; the committed coefficients.json (with its
  torch/PyG versions and date) unless --calibrate reruns them here (about a minute,
  in child processes with deadlines). CUDA context and NCCL buffers are cited, dated.

what it writes:
  nothing, when planning. --calibrate's children build PyG loaders with workers, which
  create (and on exit remove) shared-memory segments, as training would.

input files:
  --data reads sizes only: the pickle is scanned without running it (a file naming
  anything beyond PyG's data classes is refused), then memory-mapped with
  weights_only=True; no tensor is read. --store calls get_tensor_size per attribute.

examples:
  python3 scripts/plan_capacity.py --nodes 111000000 --edges 1600000000 --undirected \\
      --features 128 --conv sage --layers 3 --hidden 256 --num-neighbors 15,10,5 \\
      --batch-size 1024 --gpus-per-node 4 --gpu-memory 80GB --host-ram 512GB --cores 64
  python3 scripts/plan_capacity.py --data graph.pt --num-workers 4 --shm 64MB --format markdown
"""

CONVS = ("sage", "gcn", "gat", "gin", "transformer")


def build_parser():
    from .spec import DTYPE_BYTES
    parser = shared_cli.make_parser(TOOL, usage=USAGE, description=DESCRIPTION, epilog=EPILOG,
                                    markdown="the designs as a table for people")
    graph = parser.add_argument_group("the graph")
    graph.add_argument("--nodes", type=int, help="number of nodes")
    graph.add_argument("--edges", type=int, help="number of edges as stored (before --undirected)")
    graph.add_argument("--undirected", action="store_true", help="T.ToUndirected() will be applied: edges double")
    graph.add_argument("--features", type=int, default=0, help="node feature width (default 0)")
    graph.add_argument("--feature-dtype", choices=sorted(DTYPE_BYTES), default="float32")
    graph.add_argument("--edge-features", type=int, default=0, help="edge feature width (default 0)")
    graph.add_argument("--no-labels", dest="labels", action="store_false", help="no int64 label per node")
    graph.add_argument("--node-type", action="append", default=[], metavar="NAME:NODES[:FEATURES]",
                       help="heterogeneous: one per node type")
    graph.add_argument("--edge-type", action="append", default=[], metavar="SRC,REL,DST:EDGES",
                       help="heterogeneous: one per edge type")
    graph.add_argument("--data", metavar="PATH", help="a saved Data/HeteroData or dict of tensors (sizes only)")
    graph.add_argument("--store", metavar="MODULE:CALLABLE", help="a callable returning (FeatureStore, GraphStore)")
    graph.add_argument("--path", metavar="DIR", help="where --store's module lives")
    model = parser.add_argument_group("the model")
    model.add_argument("--conv", choices=CONVS, default="sage")
    model.add_argument("--layers", type=int, default=2)
    model.add_argument("--hidden", type=int, default=256)
    model.add_argument("--heads", type=int, default=1, help="attention heads (gat, transformer)")
    model.add_argument("--classes", type=int, default=172)
    sampling = parser.add_argument_group("the sampling")
    sampling.add_argument("--num-neighbors", type=shared_cli.fan_outs, default=[15, 10], metavar="K1,K2,...")
    sampling.add_argument("--batch-size", type=int, default=1024)
    sampling.add_argument("--num-workers", type=int, default=0)
    sampling.add_argument("--disjoint", action="store_true")
    sampling.add_argument("--subgraph-type", choices=("directional", "bidirectional", "induced"),
                          default="directional")
    hardware = parser.add_argument_group("the hardware (per node)")
    hardware.add_argument("--gpus-per-node", type=int, default=1)
    hardware.add_argument("--gpu-memory", default="80GB", help="memory of one GPU (default 80GB)")
    hardware.add_argument("--host-ram", default="512GB", help="RAM of one node (default 512GB)")
    hardware.add_argument("--cores", type=int, default=64)
    hardware.add_argument("--shm", help="size of /dev/shm (default: half of --host-ram, Linux's tmpfs default)")
    hardware.add_argument("--machines", type=int, default=1, help="nodes available (default 1)")
    parser.add_argument("--calibrate", action="store_true", help="measure the coefficients here first")
    parser.add_argument("--coefficients", metavar="FILE",
                        help="use coefficients a --calibrate run printed (its coefficients.values), e.g. measured once "
                             "on the cluster")
    shared_cli.add_seconds(parser, "--timeout", 120.0, "deadline for reading --data/--store, and for --calibrate")
    return parser


def check(parser, options):
    sources = [bool(options.nodes is not None or options.node_type), bool(options.data), bool(options.store)]
    if sum(sources) > 1 and not (options.store and options.nodes is not None):
        parser.error("give one graph: sizes (--nodes/--edges or --node-type/--edge-type), --data or --store")
    if options.calibrate and options.coefficients:
        parser.error("--calibrate measures coefficients; --coefficients reads them: give one")
    if options.store and ":" not in options.store:
        parser.error("--store expects MODULE:CALLABLE, got %r" % options.store)
    if options.store and options.edges is None:
        raise UsageError("plan_capacity.py: error: --store needs --edges (a GraphStore does not say its edge count "
                         "without loading the edges)", TOOL.usage_id, {"message": "--store without --edges"},
                         TOOL.command("--store", options.store, "--edges", "E"))


def main(argv=None):
    started = time.time()
    from .render import render
    parser = build_parser()
    try:
        options, answered = shared_cli.parse_command_line(TOOL, parser, argv)
        if answered is not None:
            return answered
        options.argv = sys.argv[1:] if argv is None else list(argv)
        check(parser, options)
        spec = make_spec(options)
    except UsageError as error:
        document, _ = render({}, [error.finding(TOOL)], {}, started, usage_error=True)
        return shared_cli.refuse(TOOL, error, document)
    from .run import run
    return run(options, spec, started)


def make_spec(options):
    from . import spec as specs
    hardware = specs.hardware_spec(TOOL, options)
    spec = {"model": specs.model_spec(TOOL, options), "sampling": specs.sampling_spec(TOOL, options),
            "hardware": hardware}
    if options.data or options.store:
        from diagnostics_core import calls
        calls.require_torch_stack(TOOL, "plan-stack-missing")
        spec["graph"] = None  # read by run.py in a child
    elif options.node_type:
        spec["graph"] = specs.hetero_graph(TOOL, options)
    else:
        spec["graph"] = specs.homo_graph(TOOL, options)
    if options.data and not os.path.exists(options.data):
        raise UsageError("plan_capacity.py: error: --data %s: no such file" % options.data, "plan-data-unreadable",
                         {"file": options.data, "error": "no such file"}, TOOL.command("--help"))
    options.rerun_calibrated = TOOL.command(*rerun_words(options.argv))
    return spec


def rerun_words(argv):
    from diagnostics_core.text import quote
    words = [quote(w) for w in argv if w != "--calibrate"]
    return words + ["--calibrate"]
