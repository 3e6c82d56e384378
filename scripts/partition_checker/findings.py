"""The partition checker's name, versions, finding table and the --max-parts cap."""

from diagnostics_core.contract import Tool, registered_findings

SCHEMA_VERSION = "1.0"
VERSION = "1.0.0"
MAX_PARTS_LIMIT = 100000

FINDINGS = registered_findings("partition_checker")  # id -> (severity, title)

TOOL = Tool("check_partition", VERSION, SCHEMA_VERSION, FINDINGS,
            usage_id="partition-usage-error", internal_id="partition-checker-internal-error",
            interrupted_id="partition-interrupted")
finding = TOOL.finding
