"""The loader profiler: measures PyG neighbour loaders on the user's graph, settings and cores,
and recommends the fastest measured loader settings (scripts/profile_loader.py is the entry)."""
