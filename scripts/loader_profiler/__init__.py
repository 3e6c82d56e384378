"""The loader profiler: measures PyG neighbour loaders on the user's graph, settings and cores,
and recommends the fastest measured loader settings (scripts/profile_loader.py is the entry)."""

# The entry file started with this flag (not a user flag) runs the coordinator child (diagnostics_core.entry).
CHILD_FLAG = "--internal-child-profile"
CHILD_MODULE = "loader_profiler.node"
