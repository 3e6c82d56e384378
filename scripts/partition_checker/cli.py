"""The partition checker's command line and its Spec on the one runner (diagnostics_core.runner); --help,
--list-findings and --explain are answered before this module loads (diagnostics_core.fast)."""

import os

from diagnostics_core import calls, cli, runner
from .findings import MAX_PARTS_LIMIT, TOOL
from .rules import RULES
from .run import DEFAULT_MAX_PARTS, DEFAULT_TIMEOUT, gather, meta, render, rerun_words

IMPORT_FLOOR_S = 120.0  # importing torch and PyG on a cold, busy machine is not a stalled file


USAGE = """\
%(prog)s ROOT [--labels PATH] [--label-node-type TYPE] [--allow-pickle]
       [--timeout SECONDS] [--max-parts N] [--pretty]
       %(prog)s --list-findings"""


EPILOG = """\
exit codes:
  0  the gate "contract" passed: every check passed and PyG's from_partition
     loads every part (warnings or info may remain)
  1  the gate "contract" failed: at least one error finding (see "parts" for
     PyG's own verdict per part)
  2  usage error: a bad flag or value, ROOT not a directory, torch/
     torch_geometric missing in this interpreter (partition-stack-missing)
     or shadowed by a stray copy on PYTHONPATH or in the working folder
     (environment-package-shadowed); one line on stderr and a JSON
     document whose finding says so
  3  internal error in the checker; the JSON says so in "findings"

what it guarantees:
  Exactly one JSON document on stdout; warnings on stderr. Read-only: the
  folder is never modified and no file, directory or socket is created.
  Files are unpickled only as PyG would with weights_only=True. A file that
  fails that is scanned with pickletools (nothing executed): one that names
  anything beyond containers and tensors is reported as code and never
  loaded; --allow-pickle loads the others with weights_only=False through an
  unpickler that refuses every other name. Type names in META.json cannot
  reach outside ROOT. Loading runs in a child process: a load that crashes
  is reported (partition-load-crashed), one that runs past --timeout is ended
  even when it blocks in C, after which no further file is opened.

labels and seeds:
  Partitioner writes no labels. PyG's distributed example saves them as
  <parent>/<dataset>-label/label.pt and seed splits as
  <parent>/<dataset>-{train,val,test}-partitions/partition<N>.pt next to ROOT;
  both are found there automatically, or pass --labels.

examples:
  python scripts/check_partition.py data/partitions/products/2-parts/products-partitions --pretty
  python scripts/check_partition.py parts/ --labels parts-label/label.pt
  python scripts/check_partition.py parts/ --labels paper_y.pt --label-node-type paper
  python scripts/check_partition.py parts/ | jq '.parts[] | {index, from_partition}'
"""


DESCRIPTION = """\
Validate a partition folder written by torch_geometric.distributed.Partitioner
before training: META.json, part_N/ folders and files, node/edge map coverage,
offsets, type lists, feature rows, labels and seed splits, and PyG's own
from_partition verdict for every part on this torch. Prints one JSON document
with findings (evidence, fix, docs anchor).
"""


def build_parser():
    parser = cli.make_parser(TOOL, usage=USAGE, description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("root", nargs="?", metavar="ROOT", help="the folder holding META.json and part_0/, ...")
    parser.add_argument("--labels", metavar="PATH",
                        help="label tensor to check (default: <parent>/*-label/label.pt, if present)")
    parser.add_argument("--label-node-type", metavar="TYPE",
                        help="node type the labels belong to (heterogeneous partitions; default: the one type "
                             "whose node count equals the label rows)")
    parser.add_argument("--allow-pickle", action="store_true",
                        help="load files PyG would load with weights_only=False that way, but only files a "
                             "pickletools scan proves hold nothing but containers and tensors, through an "
                             "unpickler that refuses any other name (a file holding code is never loaded)")
    cli.add_seconds(parser, "--timeout", DEFAULT_TIMEOUT, "bound on each file load")
    parser.add_argument("--max-parts", metavar="N", type=cli.whole_number(1, MAX_PARTS_LIMIT), default=DEFAULT_MAX_PARTS,
                        help="check parts 0..N-1 at most (default %(default)s); the rest are named in "
                             "partition-output-capped, so output and time stay bounded")
    return parser


def check(parser, options):
    if not options.root:
        parser.error("ROOT is required")
    if not os.path.isdir(options.root):
        parser.error("ROOT %r is not a directory" % options.root)
    if options.labels and not os.path.isfile(options.labels):
        parser.error("--labels %r is not a file" % options.labels)


# Every bound of a run, from --timeout; the child receives them as options.bounds.
STAGES = {
    "load_s": runner.Stage(flag="timeout"),                        # each file's load, each part's replay
    "import_s": runner.Stage(floor=IMPORT_FLOOR_S, flag="timeout"),  # importing torch and PyG in the child
}

SPEC = runner.Spec(TOOL, build_parser, gather, render, rules=RULES, gates=runner.error_gate("contract"), check=check,
                   needs=runner.STACK, stack_missing_id="partition-stack-missing", stages=STAGES, meta=meta,
                   interrupted=calls.rerun_after_signal(TOOL, rerun_words, "file load"))
