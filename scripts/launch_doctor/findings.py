"""The launch doctor's name, versions and finding table."""

from diagnostics_core.contract import Tool, registered_findings


SCHEMA_VERSION = "1.0"


TOOL_VERSION = "1.0.0"


GATE = "launch-sound"


FINDINGS = registered_findings("launch_doctor")  # id -> (severity, title)


TOOL = Tool("check_launch", TOOL_VERSION, SCHEMA_VERSION, FINDINGS,
            usage_id="doctor-usage-error", internal_id="doctor-internal-error", meta_key="tool")


def finding(finding_id, evidence, fix, severity=None):
    return TOOL.finding(finding_id, evidence, fix, severity=severity)
