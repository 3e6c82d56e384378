#!/usr/bin/env python3
"""Measure PyTorch Geometric's neighbour loaders on your graph, fan-outs and cores, and recommend
the fastest measured settings (num_workers, persistent_workers, filter_per_worker, CPU affinity,
torch threads, pin_memory) as code to paste, with the speedup over the default loader.

Prints one JSON document on stdout (or a markdown report with --format markdown); progress goes to
stderr. Bounded by --budget; your data, store and PyG's samplers run in a sandboxed child whose
every process is ended on exit. Writes no file: its children's temporary files live in a folder of the
run's own under the temp dir, removed however the run ends.
"""

import os
import sys

sys.dont_write_bytecode = True  # set before the first import from this folder: no __pycache__ beside the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diagnostics_core import entry  # noqa: E402
import loader_profiler  # noqa: E402  the tool's package: its cli loads after the metadata answers

main = entry.tool_main(loader_profiler, "profile_loader")

if __name__ == "__main__":
    entry.run_script(main)
