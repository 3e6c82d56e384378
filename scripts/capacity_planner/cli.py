"""The planner's command line, on the one runner (diagnostics_core.runner): planning from sizes imports no
torch; a data file, a store or --calibrate runs in sandboxed children, each bounded by a stage below."""

import os

from diagnostics_core import cli as shared_cli, runner
from diagnostics_core.contract import EXIT_CODES_HELP
from . import calibrate, coefficients, designs, launch, measure, rules, sizes, spec
from .findings import TOOL
from .render import render, to_markdown

USAGE = """\
%(prog)s (--nodes N --edges E [--undirected] | --node-type NAME:N:F ... --edge-type S,R,D:E ...
        | --data PATH | --store MODULE:CALLABLE [--path DIR] --edges E)
       [--features F] [--feature-dtype T] [--edge-features F] [--no-labels]
       [--conv sage|gcn|gat|gin|transformer] [--layers L] [--hidden H] [--heads N] [--classes C]
       [--num-neighbors 15,10,5] [--batch-size B] [--num-workers W] [--prefetch-factor P] [--disjoint]
       [--subgraph-type T] [--launch torchrun|spawn|srun] [--start-method fork|spawn|forkserver]
       [--graph-in-spawn-args] [--python-version X.Y]
       [--gpus-per-node G] [--gpu-memory 80GB] [--host-ram SIZE] [--cores C] [--shm SIZE] [--machines M]
       [--ranks-per-node N] [--calibrate | --coefficients FILE] [--measure [--measure-design NAME]]
       [--timeout S] [--format json|markdown] [--pretty]
       %(prog)s --list-findings | --explain ID"""

DESCRIPTION = """\
Will it fit? For each design (full batch; one process with NeighborLoader; DDP with one
memory-mapped copy per node or a private copy per rank; several nodes; a store pair; with
--gpus-per-node 0, CPU ranks over gloo) one rank's RSS, the node's memory (at the loader's
construction and at steady state), the /dev/shm it needs per rank and per node with what
lands there and when (the launch shape decides it), the GPU memory per rank, the one-off
preprocessing peaks, whether it fits, and the cheapest design that fits with its launch
line. Every figure says how it was obtained: measured coefficient (and its calibration
run), formula, or cited source. --measure runs the planned loader here and puts the real
peaks beside the model's.
"""

EPILOG = EXIT_CODES_HELP + """  Gate "planned": the sizes could be read (a store that fails or hangs fails it).
  Gate "fits": some design fits the hardware given (plan-nothing-fits otherwise).
  Gate "measured" (with --measure): the planned loader ran to its end here.

where the numbers come from:
  coefficients measured by running PyG's own operations (loader construction with
  and without workers, sorted or not, sort, ToUndirected, torch.save, forward and
  backward of each conv) at small sizes; the committed coefficients.json (with its
  torch/PyG versions and date) unless --calibrate reruns them here (about a minute,
  in child processes with deadlines). CUDA context and NCCL buffers are cited, dated.
  The anonymous memory of each kind of process (rank, launcher, torchrun agent,
  forked or spawned worker) is measured per launch shape (coefficients.processes).

the launch shape:
  --launch says how the ranks start: torchrun and srun start fresh interpreters,
  whose loader workers fork (Python <= 3.13) or use a forkserver (3.14+); ranks
  from torch.multiprocessing.spawn spawn their workers. Spawned and forkserver
  workers get the loader pickled: the graph moves into /dev/shm once per rank.
  --start-method: what the script sets for the workers (multiprocessing_context=,
  or set_start_method in each rank). --graph-in-spawn-args: the launcher passes
  the graph in mp.spawn(args=...) (once per node in /dev/shm, workers or not).
  Without --host-ram, --shm and --cores the plan uses this machine's (the
  cgroup memory limit or RAM, the free /dev/shm, the usable cores).

--measure:
  runs the planned loader for real (the private-copies design, or --measure-design),
  in its launch shape and rank count, a few batches per rank, on the --data file or a
  random graph of the sizes given, inside a private /dev/shm (a mount namespace, as
  root; otherwise the host's, as a difference), and reports the peak /dev/shm and
  node memory beside the model's with their ratio. Bounded by --timeout; it leaves no
  mount, /dev/shm file or temporary file behind.

bounds:
  every size is checked before any arithmetic: at most 10^12 nodes, 10^13 edges,
  10^6 features, 16 hops of at most 10^6 neighbours each (or -1); the sizes a
  file or store reports too (the refusal names the field). A --coefficients file
  is checked key by key (types, NaN, range). --timeout bounds the size probe and
  the calibration; a signal prints what the calibration had measured.

what it writes:
  nothing, when planning. --calibrate's and --measure's children build PyG loaders
  with workers, which create (and on exit remove) shared-memory segments, as training
  would; their temporary files go in a folder of the run's own, removed however it ends.

input files:
  --data reads sizes only: the pickle is scanned without running it (a file naming
  anything beyond PyG's data classes is refused), then memory-mapped with
  weights_only=True; no tensor is read. --store calls get_tensor_size per attribute.

examples:
  python3 scripts/plan_capacity.py --nodes 111000000 --edges 1600000000 --undirected \\
      --features 128 --conv sage --layers 3 --hidden 256 --num-neighbors 15,10,5 \\
      --batch-size 1024 --gpus-per-node 4 --gpu-memory 80GB --host-ram 512GB --cores 64
  python3 scripts/plan_capacity.py --data graph.pt --num-workers 4 --shm 64MB --format markdown
  python3 scripts/plan_capacity.py --nodes 200000 --edges 2000000 --features 64 --gpus-per-node 0 \\
      --launch spawn --ranks-per-node 2 --num-workers 4 --num-neighbors 10,5 --batch-size 512 --measure
"""

PROBE_START_S = 5.0  # the size probe's child starts and imports torch before its one bounded call
# Every bound of a run, from --timeout (seconds), counted from the run's start (runner.Run.by):
STAGES = {
    "calibration": runner.Stage(),                     # --calibrate's child, every measurement
    "size_call": runner.Stage(),                       # one call in the size probe's child (torch.load, a store call)
    "size_child": runner.Stage(plus=PROBE_START_S),    # that child as a whole: its start, torch's import, the call
    "measure": runner.Stage(),                         # --measure's child: the job, its sampling and its cleanup
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
    sampling.add_argument("--prefetch-factor", type=int, default=2, help="batches each worker prepares (default 2)")
    sampling.add_argument("--disjoint", action="store_true")
    sampling.add_argument("--subgraph-type", choices=("directional", "bidirectional", "induced"),
                          default="directional")
    shape = parser.add_argument_group("the launch shape")
    shape.add_argument("--launch", choices=launch.LAUNCHES, default="torchrun",
                       help="how the ranks start (default torchrun)")
    shape.add_argument("--start-method", choices=launch.START_METHODS,
                       help="the loader workers' start method, when the script sets one (default: what the launch "
                            "shape and the job's Python give)")
    shape.add_argument("--graph-in-spawn-args", action="store_true",
                       help="the launcher loads the graph and passes it in mp.spawn(args=...) (--launch spawn)")
    shape.add_argument("--python-version", metavar="X.Y", help="the job's Python (default: this interpreter's); "
                       "3.14 makes forkserver the default start method")
    hardware = parser.add_argument_group("the hardware (per node)")
    hardware.add_argument("--gpus-per-node", type=int, default=1, help="GPUs per node; 0 plans CPU ranks (gloo)")
    hardware.add_argument("--ranks-per-node", type=int, help="CPU ranks per node with --gpus-per-node 0 (default: "
                          "what fits the cores)")
    hardware.add_argument("--gpu-memory", default="80GB", help="memory of one GPU (default 80GB)")
    hardware.add_argument("--host-ram", help="RAM of one node (default: this machine's, or its cgroup's limit)")
    hardware.add_argument("--cores", type=int, help="cores of one node (default: this machine's usable cores)")
    hardware.add_argument("--shm", help="size of /dev/shm (default: this machine's free /dev/shm; half of "
                          "--host-ram when that is given, Linux's tmpfs default)")
    hardware.add_argument("--machines", type=int, default=1, help="nodes available (default 1)")
    parser.add_argument("--calibrate", action="store_true", help="measure the coefficients here first")
    parser.add_argument("--coefficients", metavar="FILE",
                        help="use coefficients a --calibrate run printed (its coefficients.values), e.g. measured once "
                             "on the cluster")
    parser.add_argument("--measure", action="store_true", help="run the planned loader here and report the real "
                        "peak /dev/shm and node memory beside the model's (see below)")
    parser.add_argument("--measure-design", choices=measure.DESIGNS, metavar="NAME", help="the design --measure "
                        "runs: %s (default: the private-copies design, the job as described)" % ", ".join(
                            measure.DESIGNS))
    shared_cli.add_seconds(parser, "--timeout", 120.0, "deadline for reading --data/--store, for --calibrate, and "
                           "for --measure")
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
    if options.graph_in_spawn_args and options.launch != "spawn":
        parser.error("--graph-in-spawn-args describes mp.spawn(args=...): it needs --launch spawn")
    if options.ranks_per_node is not None and options.gpus_per_node != 0:
        parser.error("--ranks-per-node plans CPU ranks (--gpus-per-node 0); with GPUs there is one rank per GPU")
    if options.measure_design and not options.measure:
        parser.error("--measure-design names the design --measure runs: give --measure too")
    options.request = spec.make_spec(options)
    if options.measure:
        measure.check(options)


def runs_children(options):
    return bool(options.data or options.store or options.calibrate or options.measure)


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
    facts["command"] = command_words(run.argv)
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
    if options.measure:
        chosen_design = designs.by_name(facts["designs"], measure.design_name(facts["request"], options))
        measure.run(run, chosen_design, facts["preprocessing"], command_words(run.argv))


def gates(facts, findings, options):
    if "designs" not in facts:
        return {"planned": {"passed": False}}
    found = {"planned": {"passed": True}, "fits": {"passed": facts["cheapest_fit"] is not None}}
    if "measure" in facts:
        found["measured"] = {"passed": facts["measure"]["state"] == "finished"}
    return found


def interrupted(run, evidence):
    """Run the same command again; when the calibration was cut, say where and what else works."""
    again = TOOL.command(*command_words(run.argv))
    if (run.facts.get("measure") or {}).get("state") == "interrupted":
        return ("%s  # and let --measure finish (bounded by --timeout); the measure section holds what it had "
                "measured; the plan alone: the same line without --measure" % again)
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
