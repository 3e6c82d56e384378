"""The DDP recipe's Tool (its registry, findings.json) and the command lines its fixes print."""

import ddp_neighbor_training as recipe
from diagnostics_core import command
from diagnostics_core.contract import Tool, script_command

SCHEMA_VERSION = "1.1"
TOOL = Tool.from_registry("ddp_recipe", "ddp_neighbor_training", recipe.VERSION, SCHEMA_VERSION)
GATE = "trained"


def recipe_command(*words):
    """The recipe run from any folder with `words` (each one shell word: a path from the input runs nothing)."""
    return " ".join([TOOL.command()] + ([command.line(*words)] if words else []))


def backend_check_command():
    """The checker's line that says which sampling backend to install and tests it."""
    return script_command("check_sampling_backends.py", "--require-neighbor-backend")
