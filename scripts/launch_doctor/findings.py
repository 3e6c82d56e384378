"""The launch doctor's name, versions and finding table."""

from diagnostics_core.contract import Tool

SCHEMA_VERSION = "1.0"

VERSION = "1.0.0"

GATE = "launch-sound"

TOOL = Tool.from_registry("launch_doctor", "check_launch", VERSION, SCHEMA_VERSION)


def finding(finding_id, evidence, fix, severity=None):
    return TOOL.finding(finding_id, evidence, fix, severity=severity)
