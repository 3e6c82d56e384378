#!/usr/bin/env python3
"""Compare check_sampling_backends.py reports from the nodes (or ranks) of one job.

Nodes of one job that run different torch, CUDA, NCCL, Python, PyG or
extension builds, or that were started with launch variables that disagree,
fail in ways that look like hangs. This script reads one checker report per
node or rank, groups the hosts by each fact and prints one JSON document
(or markdown) with findings naming the hosts that differ. Standard library
only; it reads the report files and nothing else.

Gather the reports first (the checker writes nothing itself), one per node:
  srun --ntasks-per-node=1 bash -c \\
    'python scripts/check_sampling_backends.py > reports/$(hostname).json'
"""

import os
import sys

sys.dont_write_bytecode = True  # set before the first import from this folder: no __pycache__ beside the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diagnostics_core import entry  # noqa: E402
import cluster_compare  # noqa: E402  the tool's package: its cli loads after the metadata answers

main = entry.tool_main(cluster_compare, "compare_reports")

if __name__ == "__main__":
    entry.run_script(main)
