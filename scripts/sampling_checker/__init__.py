"""The environment checker behind check_sampling_backends.py, in layers: tables, static facts, interpreter
choice, child probe, assembly, install commands, rules by area, rendering, command line."""
