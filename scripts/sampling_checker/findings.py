"""The checker's name, versions and finding table: what --list-findings and --explain answer from."""

from diagnostics_core.contract import Tool

# Schema versions: MAJOR.MINOR. MAJOR changes when a key the default output
# had is removed or renamed, or a value changes type or meaning; MINOR when
# keys, enum values or finding ids are added. Readers check MAJOR only.
SCHEMA_VERSION = "2.2"
VERSION = "2.1.0"
MIN_PYTHON = (3, 8)

TOOL = Tool.from_registry("sampling_checker", "check_sampling_backends", VERSION, SCHEMA_VERSION, meta_key="checker")
FINDINGS = TOOL.findings  # id -> (severity, title)
finding = TOOL.finding
checker_command = TOOL.command  # `python3 /abs/path/scripts/check_sampling_backends.py FLAGS...`
