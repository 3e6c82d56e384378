"""The compare tool's command line."""

from diagnostics_core import cli, runner
from diagnostics_core.safe_json import TooLarge
from . import bounds, facts as comparison, reports
from .findings import GATE, TOOL, unreadable
from .render import MARKDOWN_COLUMNS, render, to_markdown
from .rules import RULES


USAGE = """\
%(prog)s REPORT_OR_DIR [REPORT_OR_DIR ...] [--format json|markdown] [--pretty]
       %(prog)s --list-findings | --explain ID"""


EPILOG = """\
gathering (one report per node; the checker prints, the shell writes):
  SLURM     mkdir -p reports && srun --ntasks=$SLURM_NNODES --ntasks-per-node=1 bash -c \\
              'python scripts/check_sampling_backends.py > reports/$(hostname).json'
            (the single quotes matter: $(hostname) must expand on each node; in a
            job of several tasks per node srun ignores --ntasks-per-node=1 alone)
  torchrun  on every node, the same rendezvous as the job:
            mkdir -p reports && torchrun --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d \\
              --rdzv-endpoint NODE0:29400 --rdzv-id check --no-python bash -c \\
              'python scripts/check_sampling_backends.py > reports/$(hostname)-$RANK.json'
            (reports/ on a shared file system, or copy them to one place)
  then      python scripts/compare_reports.py reports/ --format markdown

what is shown (the JSON stays under %(bound)d KiB however many reports):
  every report is compared; the JSON lists the first %(reports)d reports, %(groups)d values
  per fact (largest group first) and %(hosts)d hosts per list, each list with its
  "count"; "counts" and "groups_not_listed" give the rest. A fix names each
  distinct command once with its hosts (at most %(commands)d; the other hosts are
  counted), every word from a report quoted. Markdown: one column per host up
  to %(columns)d reports, one row per value beyond.

exit codes:
  0  the reports agree (info and warning findings allowed)
  1  gate 'consistent' failed: an error finding (drift, launch disagreement,
     duplicate or missing rank, missing interface)
  2  usage error: a bad flag, no report given, or a file is unreadable or
     not a checker report (one line on stderr; the JSON names the file)
  3  internal error (JSON still printed)
""" % {"bound": bounds.DOCUMENT_MAX_BYTES >> 10, "reports": bounds.REPORTS_LISTED, "groups": bounds.GROUPS_LISTED,
       "hosts": bounds.HOSTS_NAMED, "commands": bounds.COMMANDS_LISTED, "columns": MARKDOWN_COLUMNS}


DESCRIPTION = """\
Compare check_sampling_backends.py reports from the nodes or ranks of one job:
version and extension drift, launch variables that disagree, duplicate or
missing ranks, socket-interface variables naming missing interfaces, differing
core counts.
"""


def build_parser():
    parser = cli.make_parser(TOOL, usage=USAGE, description=DESCRIPTION, epilog=EPILOG,
                             markdown="the findings as a report to paste into an issue")
    parser.add_argument("reports", nargs="*", metavar="REPORT_OR_DIR",
                        help="checker JSON reports, or folders of *.json reports")
    return parser


def gather(run):
    """Read every report into a node (run.facts grows as it reads: an interrupted run shows what it had
    read), then group the compared facts. A report over the size bound is counted (cluster-report-too-large)
    and the others compared; when none is left it is a usage error."""
    paths = reports.report_paths(run.options.reports)
    if not paths:
        raise unreadable("no report given (pass report files or a folder of them)", {"arguments": run.options.reports})
    facts = run.facts
    facts.update(comparison.new_facts(len(paths)))
    for path in paths:
        try:
            comparison.add(facts, path, reports.load_report(path))
        except TooLarge as error:
            comparison.refuse_size(facts, path)
            if len(facts["too_large"]) == len(paths):
                raise unreadable("%s: %s" % (path, error), {"file": path, "error": str(error)})
        except reports.Malformed as error:  # a field with a type the checker never writes: name file and field
            raise error.usage_error()
    comparison.complete(facts)


SPEC = runner.Spec(TOOL, build_parser, gather, render, rules=RULES, gates=runner.error_gate(GATE),
                   meta=lambda facts, options: {"read_only": True},
                   markdown=to_markdown)
