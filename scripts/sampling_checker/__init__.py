"""The environment checker behind check_sampling_backends.py, in layers: tables, static facts, interpreter
choice, child probe, assembly, install commands, rules by area, rendering, command line."""

# The entry file started with this flag (not a user flag) runs the probe child (diagnostics_core.entry).
CHILD_FLAG = "--internal-child-probe"
CHILD_MODULE = "sampling_checker.probe"
