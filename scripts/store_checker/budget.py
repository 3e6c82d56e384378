"""The store checker's time budget: --timeout and --setup-timeout turned into every stage's bound, here
and nowhere else. The parent computes the bounds and hands them to the child with its options."""

import collections

DEFAULT_TIMEOUT = 10.0  # seconds per store call: the flag's default, and the bound of a record that names none
DEFAULT_SETUP_TIMEOUT = 120.0  # seconds to import the stack, build the stores, or sample one batch
WORKER_START_S = 10.0  # a worker's batch also forks and starts the worker

Bounds = collections.namedtuple("Bounds", [
    "call_s",            # each store call: listings, reads, writes
    "import_s",          # importing torch and torch_geometric in the child
    "setup_s",           # building the stores; a NeighborLoader batch, in the main process or a worker
    "worker_loader_s",   # the loader's own timeout for the worker's batch (its queue read)
])


def stage_bounds(timeout, setup_timeout):
    """--timeout and --setup-timeout (seconds) -> Bounds, as a dict (it travels to the child as JSON)."""
    return Bounds(call_s=timeout, import_s=setup_timeout, setup_s=setup_timeout,
                  worker_loader_s=timeout + WORKER_START_S)._asdict()
