"""The profiler's command line and its Spec on the one runner (diagnostics_core/runner.py). Metadata
commands (--help, --list-findings, --explain) import nothing beyond this package's plain modules and the
shared library; torch is imported only by the children."""

import os

from diagnostics_core import cli as shared_cli
from diagnostics_core import runner
from diagnostics_core.contract import EXIT_CODES_HELP
from . import render
from .findings import TOOL
from .gather import gather
from .plan import measured
from .request import DEFAULT_BATCH_SIZE, DEFAULT_BUDGET_S, DEFAULT_NUM_NEIGHBORS
from .rules import RULES, rerun

MAX_RANKS = 64

USAGE = """\
%(prog)s (--synthetic NODES,EDGES,FEATURES | --data PATH | --store MODULE:CALLABLE)
       [--num-neighbors 10,5] [--batch-size N] [--input-nodes SPEC] [--link]
       [--input-edges SRC,REL,DST] [--no-shuffle] [--ranks-per-node N]
       [--step MODULE:CALLABLE | --model MODULE:CALLABLE | --stand-in CONV,LAYERS,HIDDEN | --loader-only]
       [--current KEY=VALUE,...] [--epochs N] [--max-workers N] [--budget SECONDS]
       [--format {json,markdown}] [--no-redact] [--pretty] [--list-findings] [--explain ID]"""

EPILOG = EXIT_CODES_HELP + """  The gate "measured" fails (exit 1) when not a single configuration could be
  measured; the findings say why. Interrupted (SIGINT, SIGTERM): its children
  are ended and the JSON says so (status "interrupted", finding
  loader-profile-interrupted, what was measured so far), exit 130 or 143.

what it measures: the training loop, not the loader alone
  for each batch a training step runs: yours (--step MODULE:CALLABLE, called
  with the batch), a built-in forward/backward/optimizer step on your model
  (--model MODULE:CALLABLE returning a torch.nn.Module called as
  model(x, edge_index)), or by default a stand-in (--stand-in sage,2,64: conv
  type sage|gcn|gat|gin, layers, hidden width; size it like your model).
  The figure is steps (and seeds) per second of whole epochs: a new epoch pays
  its workers' start-up unless persistent_workers=True, and what its first
  batch waits; persistent workers start once per run, over --epochs epochs
  (default 10). --loader-only times the loader alone, as before.

what it varies (one rank process per --ranks-per-node, all measured at once):
  your settings (--current, e.g. num_workers=6,persistent_workers=False,
  threads=2), the default loader, and persistent num_workers 0, 1, 2 and the
  cores each rank gets, each with the main process's torch threads (what
  OMP_NUM_THREADS sets) at 1, at the cores left and at all the cores; the
  cores are those the affinity mask and the cgroup CPU quota allow.

how it measures on a busy machine:
  configurations run in short blocks, interleaved, in rounds (forward, then
  reversed); each block's rate is paired with the other blocks of the same
  round, and the CPU other processes used during each block is recorded. After
  each round, configurations far behind (or beaten in every round by 10%) leave
  the race, so the close ones get more rounds; a quiet run stops once settled.

what it recommends:
  a configuration only when it beats your settings (or the default) in every
  round; of those that no other left behind (by 3% at the median, losing no
  round by over 3%, one in five aside), the cheapest within 5% of the leader.
  When the rounds disagree on a busy machine (another such setting the leader
  did not leave behind, or fewer than 3 rounds), it says it could not tell
  (loader-too-busy-to-tell) and what to run when it is quiet; when fewer
  threads win only under load, it gives both settings (loader-load-decides).

what it guarantees:
  One JSON document on stdout (or markdown with --format markdown), progress on
  stderr. The whole run stays within --budget. Your data file, store, step and
  model modules and PyG's samplers run in sandboxed children; every process it
  starts is ended on exit, on a deadline, on SIGINT and on SIGTERM, and the
  temporary files they make (loader workers' pymp-*, PyG's rendered templates)
  live in a folder of the run's own under the temp dir, removed however the
  run ends. No file is written in your folders or the skill's (no
  __pycache__); a data file is loaded with weights_only=True only.

examples:
  python3 scripts/profile_loader.py --synthetic 200000,2000000,128 --pretty
  python3 scripts/profile_loader.py --data graph.pt --num-neighbors 15,10 --batch-size 512 \\
      --step train:step --current num_workers=6,threads=2 --format markdown
  python3 scripts/profile_loader.py --data graph.pt --stand-in sage,2,256 --input-nodes train_mask
  python3 scripts/profile_loader.py --store mystores:make_stores --ranks-per-node 4
"""


POSITIVE = shared_cli.whole_number(1)


DESCRIPTION = """\
Measure your training loop (PyG's NeighborLoader / LinkNeighborLoader and a
training step per batch) on your graph, fan-outs and cores with different
workers and threads, against the settings you run today, and recommend the
fastest measured settings as code to paste, with the speedup over yours and
over the default.
"""


def build_parser():
    parser = shared_cli.make_parser(TOOL, usage=USAGE, description=DESCRIPTION, epilog=EPILOG,
                                    markdown="a report to paste", redacted="user, home and host names")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--synthetic", metavar="NODES,EDGES,FEATURES", type=synthetic_size,
                        help="a random graph of this size (float32 features, 10 classes)")
    source.add_argument("--data", metavar="PATH", help="a file written by torch.save(data) of a Data or HeteroData")
    source.add_argument("--store", metavar="MODULE:CALLABLE",
                        help="a callable returning (FeatureStore, GraphStore); MODULE is imported from the current "
                             "directory, or give path/to/file.py:CALLABLE")
    parser.add_argument("--num-neighbors", metavar="N,N,...", type=fan_outs, default=list(DEFAULT_NUM_NEIGHBORS),
                        help="fan-out per hop, as num_neighbors (default 10,5; -1 takes all neighbours)")
    parser.add_argument("--batch-size", metavar="N", type=POSITIVE, default=DEFAULT_BATCH_SIZE, help="seeds per batch (default 1024)")
    parser.add_argument("--input-nodes", metavar="SPEC",
                        help="seed nodes: ATTR of a Data (a mask or index tensor, e.g. train_mask), TYPE or "
                             "TYPE:ATTR of a HeteroData or heterogeneous store (default: every node)")
    parser.add_argument("--link", action="store_true", help="profile LinkNeighborLoader (seeds are edges)")
    parser.add_argument("--input-edges", metavar="SRC,REL,DST", type=edge_type,
                        help="with --link: the edge type whose edges are the seeds (heterogeneous graphs)")
    parser.add_argument("--no-shuffle", action="store_true", help="shuffle=False (default: shuffle=True, as in training)")
    parser.add_argument("--ranks-per-node", metavar="N", type=POSITIVE, default=1,
                        help="run N loaders at once in separate processes, as N DDP ranks on one node do, and "
                             "measure their aggregate; each gets 1/N of the cores (default 1)")
    step = parser.add_mutually_exclusive_group()
    step.add_argument("--step", metavar="MODULE:CALLABLE",
                      help="your training step, called with each batch (forward, backward, optimizer step); "
                           "MODULE is imported from the current directory, or give path/to/file.py:CALLABLE")
    step.add_argument("--model", metavar="MODULE:CALLABLE",
                      help="a callable returning your torch.nn.Module, called as model(x, edge_index); the "
                           "profiler runs cross-entropy on the seeds, backward and an Adam step")
    step.add_argument("--stand-in", metavar="CONV,LAYERS,HIDDEN", type=stand_in,
                      help="the built-in model, sized like yours: sage|gcn|gat|gin, layers, hidden width "
                           "(default sage, one layer per hop, 64)")
    step.add_argument("--loader-only", action="store_true", help="time the loader alone, with no training step")
    parser.add_argument("--current", metavar="KEY=VALUE,...", type=current_settings,
                        help="the loader settings you run today, the baseline of every speedup: num_workers, "
                             "persistent_workers, filter_per_worker, pin_memory, threads (the main process's "
                             "torch threads), worker_threads (default: PyG's defaults, torch's threads)")
    parser.add_argument("--epochs", metavar="N", type=POSITIVE,
                        help="epochs your training runs with one loader: persistent workers start once over "
                             "them (default 10)")
    parser.add_argument("--max-workers", metavar="N", type=POSITIVE,
                        help="largest num_workers to try (default: the cores each rank gets)")
    parser.add_argument("--budget", metavar="SECONDS", type=shared_cli.seconds, default=DEFAULT_BUDGET_S,
                        help="bound on the whole run's wall time (default %(default)g)")
    return parser


def synthetic_size(text):
    import argparse
    try:
        nodes, edges, features = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError("expected NODES,EDGES,FEATURES as three integers, got %r" % text)
    if nodes < 2 or edges < 1 or features < 1:
        raise argparse.ArgumentTypeError("needs NODES >= 2, EDGES >= 1, FEATURES >= 1, got %r" % text)
    return [nodes, edges, features]


INT64_MAX = 2 ** 63 - 1


def fan_outs(text):
    """--num-neighbors: the shared parser, and each count within int64 (what the samplers take)."""
    import argparse
    hops = shared_cli.fan_outs(text)
    if any(hop > INT64_MAX for hop in hops):
        raise argparse.ArgumentTypeError("a fan-out above %d does not fit the sampler's int64, got %r"
                                         % (INT64_MAX, text))
    return hops


STAND_IN_CONVS = ("sage", "gcn", "gat", "gin")


def stand_in(text):
    import argparse
    parts = text.split(",")
    try:
        conv, layers, hidden = parts[0].lower(), int(parts[1]), int(parts[2])
    except (IndexError, ValueError):
        raise argparse.ArgumentTypeError("expected CONV,LAYERS,HIDDEN such as sage,2,64, got %r" % text)
    if len(parts) != 3 or conv not in STAND_IN_CONVS or not 1 <= layers <= 16 or not 1 <= hidden <= 65536:
        raise argparse.ArgumentTypeError("expected CONV (one of %s), LAYERS 1-16, HIDDEN 1-65536, got %r"
                                         % ("|".join(STAND_IN_CONVS), text))
    return {"conv": conv, "layers": layers, "hidden": hidden}


CURRENT_KEYS = {"num_workers": "count", "threads": "positive", "worker_threads": "positive",
                "persistent_workers": "bool", "filter_per_worker": "bool", "pin_memory": "bool"}


def current_settings(text):
    """--current num_workers=6,persistent_workers=False,threads=2 -> {key: value}."""
    import argparse
    settings = {}
    for item in text.split(","):
        key, equals, value = item.strip().partition("=")
        key = {"omp_num_threads": "threads", "torch_threads": "threads"}.get(key.lower(), key)
        kind = CURRENT_KEYS.get(key)
        if not equals or kind is None:
            raise argparse.ArgumentTypeError("expected KEY=VALUE pairs with KEY one of %s, got %r"
                                             % (", ".join(sorted(CURRENT_KEYS)), item))
        if kind == "bool":
            if value.lower() not in ("true", "false", "1", "0"):
                raise argparse.ArgumentTypeError("%s takes True or False, got %r" % (key, value))
            settings[key] = value.lower() in ("true", "1")
            continue
        try:
            number = int(value)
        except ValueError:
            number = -1
        if number < (0 if kind == "count" else 1) or number > 4096:
            raise argparse.ArgumentTypeError("%s takes a whole number %s, got %r"
                                             % (key, ">= 0" if kind == "count" else ">= 1", value))
        settings[key] = number
    return settings


def edge_type(text):
    import argparse
    parts = text.split(",")
    if len(parts) != 3 or not all(parts):
        raise argparse.ArgumentTypeError("expected SRC,REL,DST, got %r" % text)
    return parts


def check_combination(parser, options):
    """Refusals that need more than one flag; argparse's own errors cover the rest."""
    if not (options.synthetic or options.data or options.store):
        parser.error("give the graph: --synthetic NODES,EDGES,FEATURES, --data PATH or --store MODULE:CALLABLE")
    if options.input_edges and not options.link:
        parser.error("--input-edges needs --link")
    if options.link and options.input_nodes:
        parser.error("--input-nodes is for node loaders; with --link use --input-edges")
    if options.data and os.path.isdir(options.data):
        parser.error("--data %s: is a directory; give the file torch.save(data) wrote" % options.data)
    if options.data and not os.path.isfile(options.data):
        parser.error("--data %s: no such file" % options.data)
    for flag, reference in (("--step", options.step), ("--model", options.model)):
        if reference and ":" not in reference:
            parser.error("%s expects MODULE:CALLABLE, got %r" % (flag, reference))
    if options.store and ":" not in options.store:
        parser.error("--store expects MODULE:CALLABLE, got %r" % options.store)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if options.ranks_per_node > min(cores, MAX_RANKS):
        parser.error("--ranks-per-node %d: this process may use %d cores; give each rank at least one"
                     % (options.ranks_per_node, cores))
    if options.synthetic:
        nodes, edges, features = options.synthetic
        need = options.ranks_per_node * (nodes * features * 4 + edges * 8 * 4)
        memory = physical_memory()
        if memory and need > memory // 2:
            parser.error("--synthetic %d,%d,%d needs about %.1f GB over %d rank(s); this machine has %.1f GB"
                         % (nodes, edges, features, need / 1e9, options.ranks_per_node, memory / 1e9))


def physical_memory():
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


# The run's time, from --budget, counted from its start: the one table every bound of the profiler comes from.
RENDER_RESERVE_S = 0.5  # kept after the measuring child has ended, for rules and rendering
RANKS_END_S = 0.5       # before the child's end: the coordinator stops waiting on its ranks and ends them
STOP_RESERVE_S = 1.5    # before the child's end: no block starts later (ranks and workers end, "done" is published)
RETRY_MAX_S = shared_cli.TIMEOUT_RANGE[1]  # a --budget the fixes name is one the parser takes
STAGES = {
    "child": runner.Stage(plus=-RENDER_RESERVE_S),  # the sandbox ends the coordinator and its ranks here
    "ranks": runner.Stage(plus=-RENDER_RESERVE_S - RANKS_END_S),
    "measure": runner.Stage(plus=-RENDER_RESERVE_S - STOP_RESERVE_S),
    "retry": runner.Stage(share=2.0, floor=30.0, cap=RETRY_MAX_S),  # the --budget loader-budget-short names
    "quiet_retry": runner.Stage(share=2.0, floor=60.0, cap=RETRY_MAX_S),  # ... and loader-too-busy-to-tell
}


def gates(facts, findings, options):
    """The gate "measured": at least one configuration was measured."""
    count = len(measured(facts.get("configs") or []))
    return {"measured": {"passed": count > 0, "configs_measured": count}}


def meta(facts, options):
    return {"budget_s": options.budget, "read_only": True, "docs_path": shared_cli.docs_path()}


def interrupted(run, evidence):
    """The interrupted finding's fix: the same run again. Its evidence (the runner's, passed here) gains what
    was measured before the signal; the blocks and configs sections hold it."""
    evidence.update(blocks_measured=len(run.facts.get("blocks") or []),
                    configs_measured=len(measured(run.facts.get("configs") or [])))
    if run.options is None:
        return None
    return "%s  # run it again to the end; --budget bounds its time" % rerun(run.options)


def summary(document, run):
    for line in render.summary(document):
        run.say(line)


def markdown(document, options):
    """The report to paste: user, home and host names hidden unless --no-redact."""
    from diagnostics_core.markdown import private_names, redact
    text = render.markdown(document, redacted=not options.no_redact)
    return text if options.no_redact else redact(text, private_names())


SPEC = runner.Spec(TOOL, build_parser, gather, render.render, rules=RULES, gates=gates, check=check_combination,
                   needs=("torch", "torch_geometric", "psutil"), stack_missing_id="loader-stack-missing",
                   budget="budget", stages=STAGES, meta=meta, summary=summary, interrupted=interrupted,
                   markdown=markdown)
