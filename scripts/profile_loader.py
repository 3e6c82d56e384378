#!/usr/bin/env python3
"""Measure PyTorch Geometric's neighbour loaders on your graph, fan-outs and cores, and recommend
the fastest measured settings (num_workers, persistent_workers, filter_per_worker, CPU affinity,
torch threads, pin_memory) as code to paste, with the speedup over the default loader.

Prints one JSON document on stdout (or a markdown report with --format markdown); progress goes to
stderr. Bounded by --budget; your data, store and PyG's samplers run in a sandboxed child whose
every process is ended on exit. Writes no file.

This file is the entry point only: the profiler lives in the loader_profiler package beside it,
the contract all tools share in diagnostics_core.
"""

import os
import sys

CHILD_FLAG = "--internal-child-profile"  # not a user flag: marks the coordinator child

# The skill's folder stays as it was: no __pycache__ written beside the scripts.
sys.dont_write_bytecode = True
_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.insert(0, _here)


def main(argv=None):
    from diagnostics_core.fast import answer
    answered = answer("loader_profiler", "profile_loader", argv)  # before argparse loads
    if answered is not None:
        return answered
    from loader_profiler.cli import main as profiler_main
    return profiler_main(argv)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == CHILD_FLAG:
        from loader_profiler.node import child_main
        child_main(sys.argv[2])
    sys.exit(main())
