"""The planner's name, versions and finding table: what --list-findings and --explain answer from."""

from diagnostics_core.contract import Tool

# MAJOR changes when a key is removed or renamed or changes meaning; MINOR when keys or ids are added.
SCHEMA_VERSION = "1.2"
VERSION = "1.2.0"

TOOL = Tool.from_registry("capacity_planner", "plan_capacity", VERSION, SCHEMA_VERSION)
finding = TOOL.finding
