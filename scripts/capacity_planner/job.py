"""The job --measure runs: a PyG NeighborLoader job in the planned launch shape, as a user's training script
would run it, for a few batches per rank. The measuring child (meter.py) starts it as a script,
`python job.py CONFIG` (one process, or the launcher that calls torch.multiprocessing.spawn) or under
`python -m torch.distributed.run ... job.py CONFIG` (torchrun), and samples it from outside; every rank marks
the end of each stage in the marks file the meter reads. Standard library, torch and PyG only: it runs as
__main__, and spawned workers import it again as __mp_main__, as they would a user's script.
`python job.py --prepare CONFIG` writes the destination-sorted graph file a memory-mapped design maps.
"""

import json
import os
import sys
import time

import torch  # a training script imports torch and PyG at its top (a 3.14 forkserver preloads them from here)
import torch_geometric  # noqa: F401
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader

PR_SET_PDEATHSIG, SIGKILL = 1, 9


def die_with_parent():
    """The job must not outlive the meter that samples it, whatever ends the meter."""
    import ctypes
    try:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def mark(config, who, stage, **extra):
    """One line in the marks file: who (launcher, rank N), which stage ended, when, and what it saw."""
    record = dict(extra, who=who, pid=os.getpid(), stage=stage, t=time.time())
    handle = os.open(config["marks"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(handle, (json.dumps(record) + "\n").encode("utf-8"))
    finally:
        os.close(handle)


def safe_classes():
    from torch_geometric.data import data, storage
    return [data.Data, data.DataEdgeAttr, data.DataTensorAttr, storage.GlobalStorage, storage.BaseStorage,
            storage.NodeStorage, storage.EdgeStorage]


def load_graph(config):
    """The graph as a rank gets it: the user's file (tensors only: weights_only, PyG's data classes), the
    sorted file mapped (mmap=True), or a random graph of the planned sizes (the same in every rank)."""
    graph = config["graph"]
    if graph.get("path"):
        with torch.serialization.safe_globals(safe_classes()):
            value = torch.load(graph["path"], mmap=bool(graph.get("mmap")), weights_only=True, map_location="cpu")
        return Data.from_dict(value) if isinstance(value, dict) else value
    generator = torch.Generator().manual_seed(0)
    nodes, edges = graph["nodes"], graph["edges"]
    dtype = getattr(torch, graph["feature_dtype"])
    data = Data(edge_index=torch.randint(0, nodes, (2, edges), generator=generator), num_nodes=nodes)
    if graph["features"]:
        data.x = torch.randn(nodes, graph["features"], generator=generator).to(dtype)
    if graph["labels"]:
        data.y = torch.randint(0, 16, (nodes,), generator=generator)
    if graph["edge_features"]:
        data.edge_attr = torch.randn(edges, graph["edge_features"], generator=generator).to(dtype)
    return data


def batch_bytes(batch):
    seen, total = set(), 0
    for value in batch.to_dict().values():
        if isinstance(value, torch.Tensor) and value.untyped_storage().data_ptr() not in seen:
            seen.add(value.untyped_storage().data_ptr())
            total += value.untyped_storage().nbytes()
    return total


def wait_for_prefetch(config, batches, limit_s=3.0):
    """Until the workers have done every batch asked of them (the result queue holds as many as are
    outstanding), or `limit_s`: /dev/shm then holds the batches in flight. Reads the iterator's internals
    (torch's _MultiProcessingDataLoaderIter); without them it waits `limit_s`."""
    if not config["workers"]:
        return
    stop = time.time() + limit_s
    while time.time() < stop:
        try:
            if batches._data_queue.qsize() >= batches._tasks_outstanding:
                return
        except (AttributeError, NotImplementedError):
            pass
        time.sleep(0.02)


def rank_main(rank, config, data=None):
    import torch.distributed as dist
    die_with_parent()
    who = "rank%d" % rank
    torch.set_num_threads(config["threads"])
    distributed = config["launch"] != "single"
    if config["launch"] == "torchrun":
        dist.init_process_group("gloo")
    elif distributed:
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % config["port"], rank=rank,
                                world_size=config["ranks"])

    def stage(name, **extra):
        if distributed:
            dist.barrier()
        mark(config, who, name, **extra)
        time.sleep(config["settle_s"])  # the stages' windows do not overlap across ranks
        if distributed:
            dist.barrier()
    stage("init")
    if data is None:
        data = load_graph(config)
        stage("load")
    options = dict(num_neighbors=config["fanouts"], batch_size=config["batch_size"], shuffle=True,
                   num_workers=config["workers"], is_sorted=config["layout"] == "mapped")
    if config["workers"]:
        options.update(persistent_workers=True, prefetch_factor=config["prefetch_factor"])
        if config["start_method"]:
            options["multiprocessing_context"] = config["start_method"]
    torch.manual_seed(rank)
    loader = NeighborLoader(data, **options)
    import multiprocessing
    method = (config["start_method"] or multiprocessing.get_start_method()) if config["workers"] else "main"
    stage("construction", worker_start_method=method)
    sizes = []
    batches = iter(loader)
    batch = next(batches)
    sizes.append(batch_bytes(batch))
    wait_for_prefetch(config, batches)
    stage("first batch")
    for _ in range(config["batches"] - 1):
        batch = next(batches)
        sizes.append(batch_bytes(batch))
    wait_for_prefetch(config, batches)
    stage("steady", batch_bytes=sum(sizes) // len(sizes))
    del batch, batches, loader
    stage("done")
    if distributed:
        dist.destroy_process_group()


def launcher_main(config):
    """mp.spawn's launcher: the ranks, and with spawn-args the graph it loads and passes in args."""
    import torch.multiprocessing as mp
    die_with_parent()
    mark(config, "launcher", "start")
    data = None
    if config["layout"] == "spawn-args":
        data = load_graph(config)
        mark(config, "launcher", "load")
    mp.spawn(rank_main, args=(config, data), nprocs=config["ranks"], join=True)


def prepare(config):
    """Not measured: the destination-sorted dict file the mapped design's ranks map."""
    die_with_parent()
    source = dict(config, graph=dict(config["graph"], path=config["graph"].get("source"), mmap=False))
    data = load_graph(source).sort(sort_by_row=False)
    torch.save(data.to_dict(), config["graph"]["path"])


def main(argv):
    if argv[0] == "--prepare":
        with open(argv[1]) as handle:
            prepare(json.load(handle))
        return
    with open(argv[0]) as handle:
        config = json.load(handle)
    if config["launch"] == "torchrun":
        rank_main(int(os.environ["RANK"]), config)
    elif config["launch"] == "spawn":
        launcher_main(config)
    else:
        rank_main(0, config)


if __name__ == "__main__":
    main(sys.argv[1:])
