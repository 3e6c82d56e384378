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
"""

import os
import sys

sys.dont_write_bytecode = True  # set before the first import from this folder: no __pycache__ beside the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diagnostics_core import entry  # noqa: E402
import partition_checker  # noqa: E402  the tool's package: its cli loads after the metadata answers

main = entry.tool_main(partition_checker, "check_partition")

if __name__ == "__main__":
    entry.run_script(main)
