"""The compare tool's command line."""

from diagnostics_core import cli, runner
from .findings import GATE, TOOL, unreadable
from .render import to_markdown
from .reports import Malformed, load_report, report_paths
from .rules import compare


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

exit codes:
  0  the reports agree (info and warning findings allowed)
  1  gate 'consistent' failed: an error finding (drift, launch disagreement,
     duplicate or missing rank, missing interface)
  2  usage error: a bad flag, no report given, or a file is unreadable or
     not a checker report (one line on stderr; the JSON names the file)
  3  internal error (JSON still printed)
"""


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


def read_reports(paths):
    """-> (paths read, reports, paths refused for their size). A report over the size bound is named
    (cluster-report-too-large) and the others compared; when none is left it is a usage error."""
    from diagnostics_core.safe_json import TooLarge
    kept, reports, too_large = [], [], []
    for path in paths:
        try:
            reports.append(load_report(path))
            kept.append(path)
        except TooLarge as error:
            too_large.append(path)
            if len(too_large) == len(paths):
                raise unreadable("%s: %s" % (path, error), {"file": path, "error": str(error)})
    return kept, reports, too_large


TOO_LARGE_NAMED = 50  # files named in the finding; the count says how many more


def rule_too_large(too_large):
    from .findings import GATHER, finding
    from .reports import REPORT_MAX_BYTES
    if not too_large:
        return []
    return [finding("cluster-report-too-large", {"files": too_large[:TOO_LARGE_NAMED], "count": len(too_large),
                                                 "limit_bytes": REPORT_MAX_BYTES},
                    "gather it again on that node with the default (compact) detail, no --full: %s" % GATHER)]


def gather(run):
    paths = report_paths(run.options.reports)
    if not paths:
        raise unreadable("no report given (pass report files or a folder of them)", {"arguments": run.options.reports})
    try:
        paths, reports, too_large = read_reports(paths)
        entries, findings, summary = compare(paths, reports)
    except Malformed as error:  # a field with a type the checker never writes: name file and field
        raise error.usage_error()
    run.facts.update(entries=entries, comparison=findings, groups=summary, too_large=too_large)


def rule_comparison(facts, options):
    return list(facts["comparison"])


def rule_too_large_reports(facts, options):
    return rule_too_large(facts["too_large"])


def render(document, facts, options):
    document.update(reports=facts.get("entries") or [], groups=facts.get("groups") or {})


SPEC = runner.Spec(TOOL, build_parser, gather, render, rules=(rule_comparison, rule_too_large_reports),
                   gates=runner.error_gate(GATE), meta=lambda facts, options: {"read_only": True},
                   markdown=lambda document, options: to_markdown(document))
