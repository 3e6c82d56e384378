#!/usr/bin/env python3
"""Check that a custom PyG FeatureStore/GraphStore pair honours PyG's contract.

A store that returns the wrong shape, dtype or row order usually breaks only
deep inside NeighborLoader, often on another machine and hours into a job.
This checker calls the stores the way PyG's loaders do, compares what comes
back with what PyG expects, samples one real NeighborLoader batch over the
pair when a sampling backend works (in the main process, then again in a
forked loader worker, as num_workers >= 1 runs it), and prints one JSON
document with findings (each with evidence, a fix and a docs anchor).

Store calls run in the thread that built the stores, as under PyG's loader
with num_workers=0, so thread-bound clients (sqlite3, most database drivers)
work as they do in training.

Read-only by default: only get_* calls are made. Write checks (put, overwrite,
remove on a scratch attribute, restoring what was there) run only with
--write-check. The stores, and PyG's sampler on their data, run in a child
process (the shared sandbox, diagnostics_core); every call is bounded in wall
time, so a segfaulting, hanging or daemonising store yields a finding instead
of a crash, a hang or a stray process.
"""

import os
import sys

sys.dont_write_bytecode = True  # set before the first import from this folder: no __pycache__ beside the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diagnostics_core import entry  # noqa: E402
import store_checker  # noqa: E402  the tool's package: its cli loads after the metadata answers

main = entry.tool_main(store_checker, "check_store_contract")

if __name__ == "__main__":
    entry.run_script(main)
