"""The store checker's name, versions, finding table and the scratch names its write check uses."""

from diagnostics_core.contract import Tool

SCHEMA_VERSION = "1.0"
VERSION = "1.0.0"
SCRATCH_NAME = "__pyg_contract_scratch__"
SCRATCH_EDGE_TYPE = (SCRATCH_NAME, "to", SCRATCH_NAME)

TOOL = Tool.from_registry("store_checker", "check_store_contract", VERSION, SCHEMA_VERSION, meta_key="checker")
FINDINGS = TOOL.findings  # id -> (severity, title)
finding = TOOL.finding
