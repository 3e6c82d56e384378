"""The partition checker's name, versions, finding table and the --max-parts cap."""

from diagnostics_core.contract import Tool

SCHEMA_VERSION = "1.0"
VERSION = "1.0.0"
MAX_PARTS_LIMIT = 100000

TOOL = Tool.from_registry("partition_checker", "check_partition", VERSION, SCHEMA_VERSION, meta_key="checker")
finding = TOOL.finding
