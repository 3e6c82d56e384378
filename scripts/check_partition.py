#!/usr/bin/env python3
"""Check a PyG partition folder before every rank starts loading it.

Validates a folder written by torch_geometric.distributed.Partitioner against
what the installed PyG writes and reads: META.json, one part_N/ per partition
with the files each part needs, node and edge maps that cover every node and
edge exactly once, offsets and type lists that agree between META.json and the
files, feature rows that match the maps, and the labels and seed splits that
PyG's distributed training recipe keeps next to the folder.

Files are loaded the way PyG loads them on this torch (torch.load with
weights_only=True and PyG's own fallback rule). Each part is then replayed
through PyG's real LocalGraphStore.from_partition and
LocalFeatureStore.from_partition, fed from what was already loaded, so the
verdict for every part is PyG's own.

Read-only: nothing in the folder is written, renamed or deleted. Loading and
PyG's from_partition run in a child process (the shared sandbox,
diagnostics_core), so a file that crashes or hangs the unpickler or PyG yields a
finding, not a dead or stuck checker.

This file is the entry point only: the checker lives in the partition_checker package beside it,
the contract all tools share in diagnostics_core.
"""

import os
import sys

CHILD_FLAG = "--internal-child-run"  # not a user flag: marks the child process

# The skill's folder stays as it was: no __pycache__ written beside the scripts.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main(argv=None):
    from diagnostics_core.fast import answer
    answered = answer("partition_checker", "check_partition", argv)  # before argparse loads
    if answered is not None:
        return answered
    from partition_checker.cli import main as checker_main
    return checker_main(argv)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == CHILD_FLAG:
        from partition_checker.gather import child_main
        child_main(sys.argv[2])
    sys.exit(main())
