"""The checker's name, versions and finding table: what --list-findings and --explain answer from."""

from diagnostics_core.contract import Tool, registered_findings


# Schema versions: MAJOR.MINOR. MAJOR changes when a key the default output
# had is removed or renamed, or a value changes type or meaning; MINOR when
# keys, enum values or finding ids are added. Readers check MAJOR only.
SCHEMA_VERSION = "2.1"
VERSION = "2.0.0"
MIN_PYTHON = (3, 8)


FINDINGS = registered_findings("sampling_checker")  # id -> (severity, title)

TOOL = Tool("check_sampling_backends", VERSION, SCHEMA_VERSION, FINDINGS,
            usage_id="usage-error", internal_id="checker-internal-error")
finding = TOOL.finding
list_findings = TOOL.list_findings
checker_command = TOOL.command  # `python3 /abs/path/scripts/check_sampling_backends.py FLAGS...`
