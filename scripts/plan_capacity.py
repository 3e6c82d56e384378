"""Will it fit? Size a PyG job's host RAM, /dev/shm and GPU memory for each design (full batch,
NeighborLoader, DDP with private or shared copies, several nodes, a store pair) from a memory model
measured on the installed torch and PyG, and name the cheapest design that fits.

  python3 scripts/plan_capacity.py --nodes 111000000 --edges 1600000000 --undirected --features 128 \
      --conv sage --layers 3 --hidden 256 --num-neighbors 15,10,5 --batch-size 1024 \
      --gpus-per-node 4 --gpu-memory 80GB --host-ram 512GB --cores 64
"""

import os
import sys

sys.dont_write_bytecode = True  # set before the first import from this folder: no __pycache__ beside the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diagnostics_core import entry  # noqa: E402
import capacity_planner  # noqa: E402  the tool's package: its cli loads after the metadata answers

main = entry.tool_main(capacity_planner, "plan_capacity")

if __name__ == "__main__":
    entry.run_script(main)
