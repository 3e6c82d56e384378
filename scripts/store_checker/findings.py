"""The store checker's name, versions, finding table and the limits its calls run under."""

from diagnostics_core.contract import Tool, registered_findings


SCHEMA_VERSION = "1.0"


VERSION = "1.0.0"




DEFAULT_TIMEOUT = 10.0


DEFAULT_SETUP_TIMEOUT = 120.0


FULL_READ_LIMIT = 10_000_000  # elements; bigger tensors are checked row by row


MAX_ATTRS = 200  # attributes checked one by one; the rest are only listed


SCRATCH_NAME = "__pyg_contract_scratch__"


MISSING_NAME = "__pyg_contract_missing__"


SCRATCH_EDGE_TYPE = (SCRATCH_NAME, "to", SCRATCH_NAME)


MISSING_EDGE_TYPE = (MISSING_NAME, "to", MISSING_NAME)


FINDINGS = registered_findings("store_checker")  # id -> (severity, title)


TOOL = Tool("check_store_contract", VERSION, SCHEMA_VERSION, FINDINGS,
            usage_id="store-usage-error", internal_id="store-checker-internal-error",
            interrupted_id="store-interrupted")


finding = TOOL.finding
