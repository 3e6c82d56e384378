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

This file is the entry point only: the tool lives in the cluster_compare package beside it, the
contract all tools share in diagnostics_core.
"""

import os
import sys

# The skill's folder stays as it was: no __pycache__ written beside the scripts.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main(argv=None):
    from diagnostics_core.fast import answer
    answered = answer("cluster_compare", "compare_reports", argv)  # before argparse loads
    if answered is not None:
        return answered
    from cluster_compare.cli import main as compare_main
    return compare_main(argv)


if __name__ == "__main__":
    sys.exit(main())
