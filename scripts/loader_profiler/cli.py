"""The profiler's command line. Metadata commands (--help, --list-findings, --explain) import nothing
beyond this package's plain modules and the shared library; torch is imported only by the child."""

import os
import sys
import time

from diagnostics_core import cli as shared_cli
from diagnostics_core.cli import UsageError
from diagnostics_core.contract import EXIT_CODES_HELP
from .findings import TOOL

DEFAULT_BUDGET_S = 60.0
MAX_RANKS = 64

USAGE = """\
%(prog)s (--synthetic NODES,EDGES,FEATURES | --data PATH | --store MODULE:CALLABLE)
       [--num-neighbors 10,5] [--batch-size N] [--input-nodes SPEC] [--link]
       [--input-edges SRC,REL,DST] [--no-shuffle] [--ranks-per-node N]
       [--max-workers N] [--budget SECONDS] [--format {json,markdown}]
       [--no-redact] [--pretty] [--list-findings] [--explain ID]"""

EPILOG = EXIT_CODES_HELP + """  The gate "measured" fails (exit 1) when not a single configuration could be
  measured; the findings say why.

what it varies (one rank process per --ranks-per-node, all measured at once):
  num_workers 0, 1, 2, 4, ... up to the cores each rank gets; then, around the
  fastest worker count: persistent_workers off, filter_per_worker=False,
  enable_cpu_affinity with explicit loader_cores, the main process's torch
  threads (what OMP_NUM_THREADS sets), pin_memory=True where a GPU is present.

what it measures, per configuration:
  batches/s and seeds/s (median of timed windows after a warm-up, with the
  range), batches/s over whole epochs (each epoch pays its start-up), time to
  the first batch, peak RSS of the loader process and its workers; once, where
  a default batch's time goes (sampling, feature fetch, collation).

what it recommends:
  a configuration only when its median beats the default loader's
  (num_workers=0) by more than the measured spread; of those within the noise of
  the fastest, the one with the fewest workers; else the default, saying the
  difference is noise. "recommendation" holds the loader kwargs, the
  environment, the speedup (ratio of the two medians) and code to paste.

what it guarantees:
  One JSON document on stdout (or markdown with --format markdown), progress on
  stderr. The whole run stays within --budget. Your data file, store module and
  PyG's samplers run in a sandboxed child; every process it starts is ended on
  exit, on a deadline and on SIGTERM. No file is written in your folders or the
  skill's (no __pycache__); a data file is loaded with weights_only=True only.

examples:
  python3 scripts/profile_loader.py --synthetic 200000,2000000,128 --pretty
  python3 scripts/profile_loader.py --data graph.pt --num-neighbors 15,10 --input-nodes train_mask
  python3 scripts/profile_loader.py --store mystores:make_stores --ranks-per-node 4
  python3 scripts/profile_loader.py --data graph.pt --format markdown
"""


POSITIVE = shared_cli.whole_number(1)


DESCRIPTION = """\
Measure PyG's NeighborLoader / LinkNeighborLoader on your graph, fan-outs and
cores with different workers, threads, affinity and memory settings, and
recommend the fastest measured settings as code to paste, with the speedup over
num_workers=0.
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
    parser.add_argument("--num-neighbors", metavar="N,N,...", type=shared_cli.fan_outs, default=[10, 5],
                        help="fan-out per hop, as num_neighbors (default 10,5; -1 takes all neighbours)")
    parser.add_argument("--batch-size", metavar="N", type=POSITIVE, default=1024, help="seeds per batch (default 1024)")
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
    if options.data and not os.path.isfile(options.data):
        parser.error("--data %s: no such file" % options.data)
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


def stack_missing():
    """A UsageError when torch or torch_geometric cannot be imported here (found without importing)."""
    from diagnostics_core.sandbox import missing_torch_stack
    missing = missing_torch_stack()
    if not missing:
        return None
    from diagnostics_core.text import quote
    return UsageError("profile_loader.py: error: %s not importable by %s (loader-stack-missing)"
                      % (" and ".join(missing), sys.executable), "loader-stack-missing",
                      {"missing": missing, "interpreter": sys.executable, "python": sys.version.split()[0]},
                      fix="%s -m pip install torch torch_geometric psutil  # or run the profiler with the "
                          "interpreter of your training environment" % quote(sys.executable))


def main(argv=None):
    started = time.time()
    argv = list(sys.argv[1:] if argv is None else argv)
    options = None
    try:
        parser = build_parser()
        options = parser.parse_args(argv)
        answered = shared_cli.metadata_command(TOOL, options)
        if answered is not None:
            return answered
        check_combination(parser, options)
        missing = stack_missing()
        if missing is not None:
            raise missing
    except UsageError as error:
        from .render import refuse
        return refuse(error, options, argv, started)
    options.argv = argv
    from .run import run
    return run(options, started)
