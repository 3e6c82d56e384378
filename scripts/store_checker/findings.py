"""The store checker's name, versions, finding table and the scratch names its write check uses."""

from diagnostics_core.contract import Tool, registered_findings

SCHEMA_VERSION = "1.0"
VERSION = "1.0.0"
SCRATCH_NAME = "__pyg_contract_scratch__"
SCRATCH_EDGE_TYPE = (SCRATCH_NAME, "to", SCRATCH_NAME)

FINDINGS = registered_findings("store_checker")  # id -> (severity, title)

TOOL = Tool("check_store_contract", VERSION, SCHEMA_VERSION, FINDINGS,
            usage_id="store-usage-error", internal_id="store-checker-internal-error",
            interrupted_id="store-interrupted")
finding = TOOL.finding
