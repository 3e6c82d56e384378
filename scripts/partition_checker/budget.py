"""The partition checker's time budget: --timeout turned into every stage's bound, here and nowhere
else. The parent computes the bounds and hands them to the child with its options."""

import collections

DEFAULT_TIMEOUT = 120.0  # seconds per file load: the flag's default
IMPORT_FLOOR_S = 120.0  # importing torch and PyG on a cold, busy machine is not a stalled file

Bounds = collections.namedtuple("Bounds", [
    "load_s",    # each file's torch.load, and each part's from_partition replay (announced per call)
    "import_s",  # importing torch, torch_geometric.distributed in the child
])


def stage_bounds(timeout):
    """--timeout (seconds) -> Bounds, as a dict (it travels to the child as JSON)."""
    return Bounds(load_s=timeout, import_s=max(timeout, IMPORT_FLOOR_S))._asdict()
