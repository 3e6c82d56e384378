"""The capacity planner behind plan_capacity.py: sizes a PyG job's host RAM, /dev/shm and GPU memory per
design from a memory model whose coefficients are measured by running PyG's own operations."""

# The entry file started with this flag (not a user flag) runs one measurement child (diagnostics_core.entry).
CHILD_FLAG = "--internal-child-probe"
CHILD_MODULE = "capacity_planner.probe"
