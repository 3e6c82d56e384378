"""The command line every tool shares: the parser whose errors are usage errors, one --timeout range,
--list-findings and --explain (the runner, diagnostics_core/runner.py, calls them)."""

import sys

from .contract import EXIT_OK
from .fast import doc_section, docs_path, docs_text  # noqa: F401  (docs_path: the tools' reports name it)
from .text import bounded, echo, write_json, write_text

TIMEOUT_RANGE = (1.0, 3600.0)  # seconds, for every tool's --timeout-like flag


class UsageError(Exception):
    """A refused command line: one line on stderr, a JSON document with the finding on stdout, exit 2."""

    def __init__(self, line, finding_id, evidence, fix):
        Exception.__init__(self, line)
        self.line, self.finding_id, self.evidence, self.fix = line, finding_id, evidence, fix

    def finding(self, tool):
        return tool.finding(self.finding_id, self.evidence, fix=self.fix)


def make_parser(tool, usage=None, description=None, epilog=None, markdown=None, redacted=None):
    """An argparse parser whose errors raise UsageError, with the flags every tool has; with `markdown`
    (what the markdown output is) --format too, and with `redacted` (the names markdown hides) --no-redact."""
    import argparse

    class OneLineErrorParser(argparse.ArgumentParser):
        def error(self, message):
            raise UsageError("%s: error: %s (see --help)" % (self.prog, message), tool.usage_id,
                             {"message": message, "argv": sys.argv[1:]}, fix=tool.command("--help"))

    from .contract import EXIT_OUTPUT_HELP
    epilog = (epilog.rstrip("\n") + "\n\n" if epilog else "") + EXIT_OUTPUT_HELP
    parser = OneLineErrorParser(usage=usage, description=description, epilog=epilog,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pretty", action="store_true", help="indent the JSON")
    parser.add_argument("--list-findings", action="store_true",
                        help="print every finding id this tool can emit, as JSON, and exit 0")
    parser.add_argument("--explain", metavar="ID",
                        help="print the documentation of one finding id (symptom, cause, fix) and exit 0")
    if markdown:
        parser.add_argument("--format", choices=("json", "markdown"), default="json",
                            help="json (default): the document agents read; markdown: " + markdown)
    if redacted:
        parser.add_argument("--no-redact", action="store_true",
                            help="markdown: keep %s (redacted by default)" % redacted)
    return parser


def seconds(text):
    """argparse type of every --timeout-like flag: a number of seconds in TIMEOUT_RANGE."""
    import argparse
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a number of seconds, got %r" % text)
    if not (TIMEOUT_RANGE[0] <= value <= TIMEOUT_RANGE[1]) or value != value:
        raise argparse.ArgumentTypeError("must be between %g and %g seconds, got %s" % (TIMEOUT_RANGE + (text,)))
    return value


def add_seconds(parser, flag, default, bounds):
    """Declare a --timeout-like flag the one way every tool does: SECONDS within TIMEOUT_RANGE, its
    default said in its help; `bounds` says what it bounds (argparse's %-escaping applies)."""
    parser.add_argument(flag, metavar="SECONDS", type=seconds, default=default,
                        help="%s (default %%(default)g)" % bounds)


def add_switches(parser, switches):
    """Declare on/off flags from (flag, help) rows."""
    for flag, text in switches:
        parser.add_argument(flag, action="store_true", help=text)


def whole_number(low=1, high=None):
    """argparse type factory: an integer in [low, high] (no upper bound when high is None)."""
    import argparse

    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError("expected a whole number %s, got %r" % (
                ">= %d" % low if high is None else "between %d and %d" % (low, high), text))
        return value
    return parse


def fan_outs(text):
    """argparse type of --num-neighbors: per-hop counts, each positive or -1 (all neighbours)."""
    import argparse
    try:
        hops = [int(part) for part in text.split(",")]
    except ValueError:
        hops = []
    if not hops or any(hop == 0 or hop < -1 for hop in hops):
        raise argparse.ArgumentTypeError("expected comma-separated fan-outs, each positive or -1 (all "
                                         "neighbours), such as 10,5; got %r" % text)
    return hops


def explain(tool, finding_id):
    """--explain ID: that finding's section on stdout, exit 0; an unknown id is a usage error."""
    if finding_id not in tool.findings:
        raise UsageError("%s.py: error: --explain: %s is not a finding id of this tool (see --list-findings)"
                         % (tool.name, echo(finding_id)), tool.usage_id,
                         {"message": "unknown finding id", "explain": bounded(finding_id)},
                         fix=tool.command("--list-findings"))
    text = docs_text()
    section = doc_section(text, finding_id) if text else None
    if section is None:
        section = "### %s\n\n%s: %s (no documentation found beside this copy of the tool)\n" % (
            finding_id, tool.findings[finding_id][0], tool.findings[finding_id][1])
    write_text(section)
    return EXIT_OK


def metadata_command(tool, options):
    """--list-findings and --explain, answered before anything heavy is imported; -> exit code or None."""
    if getattr(options, "list_findings", False):
        write_json(tool.list_findings(), options.pretty)
        return EXIT_OK
    if getattr(options, "explain", None):
        return explain(tool, options.explain)
    return None


def internal_error(error, describe):
    """The evidence of an internal-error finding: what broke, described by `describe`, and where."""
    import traceback
    return {"error": describe(error), "traceback": traceback.format_exc()[-3000:]}
