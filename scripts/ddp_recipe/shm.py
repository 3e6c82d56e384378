"""/dev/shm as the recipe's job meets it. torch moves a tensor into shared memory (a file under /dev/shm) when
it is pickled to another process: self-spawn hands the graph loaded in the parent to every rank that way (once),
and a rank's loader workers, started by spawn inside a spawned rank, receive the rank's graph, the sampler's copy
and send back the batches in flight the same way. A /dev/shm smaller than that (Docker's default is 64 MB) ends
the job: torch reports "unable to allocate shared memory ... No space left on device", or a process that touches
a page the mount cannot back dies of SIGBUS. Facts here are plain data; the rule reads them."""

import os

PATH = "/dev/shm"
MIB = 1 << 20


def state(free_key="free_bytes", path=PATH):
    """{"path", "size_bytes", free_key} of the shared-memory mount now (free_key names the moment); sizes None
    where there is no such mount."""
    try:
        info = os.statvfs(path)
    except OSError:
        return {"path": path, "size_bytes": None, free_key: None}
    return {"path": path, "size_bytes": info.f_blocks * info.f_frsize, free_key: info.f_bavail * info.f_frsize}


def cause(failure):
    """How a failure record (rank, pid, message, signal) shows that shared memory ran out: {"kind", "line"} or
    None. Read from torch's and the kernel's words, never from the recipe's own: a process killed by SIGBUS,
    "Bus error" (a DataLoader worker), or a message about shared memory or one of torch's /dev/shm files
    (</torch_...>); "No space left on device" counts only beside those (a full disk says it too)."""
    if failure.get("signal") == "SIGBUS":
        return {"kind": "bus-error", "line": failure.get("message") or "terminated with signal SIGBUS"}
    message = failure.get("message") or ""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    shm_lines = [line for line in lines if "shared memory" in line or "</torch_" in line or "Bus error" in line]
    if not shm_lines:
        return None
    line = next((line for line in shm_lines if "No space left on device" in line or "Bus error" in line),
                shm_lines[0])
    kind = "no-space" if "No space left on device" in line else "bus-error" if "Bus error" in line else "shm-error"
    return {"kind": kind, "line": line[:500]}


def graph_copies(launcher, load_per_rank, num_workers, ranks):
    """How many times the graph's tensors go through /dev/shm at least: once when self-spawn hands the parent's
    graph to the ranks, and once per rank when each rank holds its own graph (torchrun, --load-per-rank) and
    pickles it to loader workers. Workers also send the sampler's copy and batches; those come on top."""
    from_parent = 1 if launcher == "spawn" and not load_per_rank else 0
    per_rank = ranks if num_workers > 0 and not from_parent else 0
    return from_parent + per_rank


def suggested_size(needed_bytes):
    """A --shm-size with room for the graph's copies and what loader workers add: twice the copies, rounded up
    to a power of two MiB, at least 128m (Docker's syntax: 128m, 1g)."""
    size = 128 * MIB
    while size < 2 * needed_bytes:
        size *= 2
    return "%dg" % (size >> 30) if size >= 1 << 30 else "%dm" % (size >> 20)
