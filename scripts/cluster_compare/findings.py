"""The compare tool's name, versions, finding table, and how it names the checker in its fixes."""

from diagnostics_core import cli, command
from diagnostics_core.contract import Tool, script_command

SCHEMA_VERSION = "1.0"

VERSION = "1.0.0"

GATE = "consistent"

TOOL = Tool.from_registry("cluster_compare", "compare_reports", VERSION, SCHEMA_VERSION)

CHECKER_SCRIPT = "check_sampling_backends.py"

CHECKER = script_command(CHECKER_SCRIPT)

# The gathering line, run on each node: $(hostname) is the tool's own word, expanded there.
GATHER = "%s %s" % (CHECKER, command.line(command.Raw(">"), command.Raw("reports/$(hostname).json")))


def unreadable(message, evidence):
    return cli.UsageError("compare_reports.py: error: %s" % message, "cluster-report-unreadable", evidence,
                          "gather it again on that node: %s" % GATHER)


def finding(finding_id, evidence, fix):
    return TOOL.finding(finding_id, evidence, fix)
