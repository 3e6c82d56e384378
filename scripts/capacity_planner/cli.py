"""The planner's command line, on the one runner (diagnostics_core.runner): planning from sizes imports no
torch; a data file, a store or --calibrate runs in sandboxed children, each bounded by a stage below."""

import os

from diagnostics_core import cli as shared_cli, runner
from diagnostics_core.contract import EXIT_CODES_HELP
from . import calibrate, coefficients, designs, rules, sizes, spec
from .findings import TOOL
from .render import render, to_markdown

USAGE = """\
%(prog)s (--nodes N --edges E [--undirected] | --node-type NAME:N:F ... --edge-type S,R,D:E ...
        | --data PATH | --store MODULE:CALLABLE [--path DIR] --edges E)
       [--features F] [--feature-dtype T] [--edge-features F] [--no-labels]
       [--conv sage|gcn|gat|gin|transformer] [--layers L] [--hidden H] [--heads N] [--classes C]
       [--num-neighbors 15,10,5] [--batch-size B] [--num-workers W] [--disjoint] [--subgraph-type T]
       [--gpus-per-node G] [--gpu-memory 80GB] [--host-ram 512GB] [--cores C] [--shm SIZE] [--machines M]
       [--calibrate | --coefficients FILE] [--timeout S] [--format json|markdown] [--pretty]
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

bounds:
  every size is checked before any arithmetic: at most 10^12 nodes, 10^13 edges,
  10^6 features, 16 hops of at most 10^6 neighbours each (or -1); the sizes a
  file or store reports too (the refusal names the field). A --coefficients file
  is checked key by key (types, NaN, range). --timeout bounds the size probe and
  the calibration; a signal prints what the calibration had measured.

what it writes:
  nothing, when planning. --calibrate's children build PyG loaders with workers, which
  create (and on exit remove) shared-memory segments, as training would; their
  temporary files go in a folder of the run's own, removed however it ends.

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

PROBE_START_S = 5.0  # the size probe's child starts and imports torch before its one bounded call
# Every bound of a run, from --timeout (seconds), counted from the run's start (runner.Run.by):
STAGES = {
    "calibration": runner.Stage(),                     # --calibrate's child, every measurement
    "size_call": runner.Stage(),                       # one call in the size probe's child (torch.load, a store call)
    "size_child": runner.Stage(plus=PROBE_START_S),    # that child as a whole: its start, torch's import, the call
}


def build_parser():
    parser = shared_cli.make_parser(TOOL, usage=USAGE, description=DESCRIPTION, epilog=EPILOG,
                                    markdown="the designs as a table for people")
    parser.allow_abbrev = False  # a fix rebuilds the command line from its words: every flag spelled out
    graph = parser.add_argument_group("the graph")
    graph.add_argument("--nodes", type=int, help="number of nodes")
    graph.add_argument("--edges", type=int, help="number of edges as stored (before --undirected)")
    graph.add_argument("--undirected", action="store_true", help="T.ToUndirected() will be applied: edges double")
    graph.add_argument("--features", type=int, default=0, help="node feature width (default 0)")
    graph.add_argument("--feature-dtype", choices=sorted(spec.DTYPE_BYTES), default="float32")
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
    model.add_argument("--conv", choices=coefficients.CONVS, default="sage")
    model.add_argument("--layers", type=int, default=2)
    model.add_argument("--hidden", type=int, default=256)
    model.add_argument("--heads", type=int, default=1, help="attention heads (gat, transformer)")
    model.add_argument("--classes", type=int, default=172)
    sampling = parser.add_argument_group("the sampling")
    sampling.add_argument("--num-neighbors", default="15,10", metavar="K1,K2,...",
                          help="fan-out per hop, each positive or -1 (every neighbour), at most 16 hops; a list "
                               "that starts with -1 takes '=': --num-neighbors=-1,10 (default 15,10)")
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
    """Refusals of the command line itself; the request (every size from flags, checked) goes on options."""
    sources = [bool(options.nodes is not None or options.node_type), bool(options.data), bool(options.store)]
    if sum(sources) > 1 and not (options.store and options.nodes is not None):
        parser.error("give one graph: sizes (--nodes/--edges or --node-type/--edge-type), --data or --store")
    if options.calibrate and options.coefficients:
        parser.error("--calibrate measures coefficients; --coefficients reads them: give one")
    if options.store and ":" not in options.store:
        parser.error("--store expects MODULE:CALLABLE, got %r" % options.store)
    if options.store and options.edges is None:
        where = ["--path", os.path.abspath(options.path)] if options.path else []
        raise shared_cli.UsageError(
            "plan_capacity.py: error: --store needs --edges (a GraphStore does not say its edge count without "
            "loading the edges)", TOOL.usage_id, {"message": "--store without --edges"},
            TOOL.command(*["--store", options.store] + where + ["--edges", "E"]))
    options.request = spec.make_spec(options)


def runs_children(options):
    return bool(options.data or options.store or options.calibrate)


def children_need(options):
    """The children of --data, --store and --calibrate import torch and PyG (this process never does): the
    runner refuses a run whose stack is missing or shadowed before one starts."""
    return runner.STACK if runs_children(options) else None


PATH_FLAGS = ("--data", "--path")  # values that name a file or folder: absolute in a fix, pasted from anywhere


def command_words(argv):
    """This command line as words for a fix (Tool.command quotes each), with --data and --path absolute so
    that it runs from any folder (the parser takes no abbreviations: each flag is spelled out)."""
    words, absolute_next = [], False
    for word in argv:
        flag, equals, value = word.partition("=")
        if absolute_next:
            word = os.path.abspath(word)
        elif equals and flag in PATH_FLAGS:
            word = "%s=%s" % (flag, os.path.abspath(value))
        absolute_next = word in PATH_FLAGS
        words.append(word)
    return words


def rerun_words(argv):
    """This command line with --calibrate in place of --coefficients FILE: the words of a fix that measures
    the coefficients here."""
    words, skip = [], False
    for word in command_words(argv):
        if skip:
            skip = False
        elif word == "--coefficients":
            skip = True
        elif word != "--calibrate" and not word.startswith("--coefficients="):
            words.append(word)
    return words + ["--calibrate"]


def gather(run):
    """Sizes (flags, or a child reading the file or store), coefficients (committed, a file, or measured by
    a child), then every design. What a child measured is in run.facts as it arrives."""
    options, facts = run.options, run.facts
    facts["request"] = options.request
    facts["rerun"] = rerun_words(run.argv)
    if runs_children(options):
        run.scratch()  # loader workers (pymp-*), PyG's templates: gone with the run, however it ends
    given = coefficients.read_file(options.coefficients, facts["rerun"]) if options.coefficients else None
    if options.data or options.store:
        found = sizes.read(run)
        if found is None:
            return  # the store gave no sizes: facts["store_problem"] says why
        facts["read_sizes"] = found
        facts["request"]["graph"] = spec.from_probed(found, options)
    chosen, used = coefficients.given(options.coefficients, given or coefficients.load_committed())
    if options.calibrate:
        facts["calibration"] = calibrate.new_record()
        measured, problems = calibrate.calibrate(run.by("calibration"), facts["calibration"], run.say)
        if measured is not None:
            chosen, used = coefficients.calibrated(measured)
        else:
            used["calibration_problems"] = problems
    facts["coefficients"] = used
    facts.update(designs.verdicts(facts["request"], chosen))


def gates(facts, findings, options):
    if "designs" not in facts:
        return {"planned": {"passed": False}}
    return {"planned": {"passed": True}, "fits": {"passed": facts["cheapest_fit"] is not None}}


def interrupted(run, evidence):
    """Run the same command again; when the calibration was cut, say where and what else works."""
    again = TOOL.command(*command_words(run.argv))
    calibration = run.facts.get("calibration") or {}
    if calibration.get("state") == "interrupted":
        cut = calibration.get("cut")
        return ("%s  # and let the calibration finish (about a minute on two cores; it was cut at %s); or plan "
                "with the committed coefficients: the same line without --calibrate"
                % (again, calibrate.step_text(cut) if cut else "its start"))
    return "%s  # and let it finish; the sections below hold what was read before the signal" % again


def meta(facts, options):
    return {"children": runs_children(options)}


SPEC = runner.Spec(TOOL, build_parser, gather, render, rules=rules.RULES, gates=gates, check=check,
                   needs=children_need, stack_missing_id="plan-stack-missing",
                   budget="timeout", stages=STAGES, meta=meta, interrupted=interrupted,
                   markdown=lambda document, options: to_markdown(document))
