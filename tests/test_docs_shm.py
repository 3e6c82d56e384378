"""What reaches /dev/shm, by launch shape (scaling-and-backends.md), shown on CPU.

Shared memory is read through `Tensor.is_shared()`: a CPU tensor handed to another process by torch's
reducers is moved into /dev/shm in place, and reads True from then on in every process that holds it.
No private mount is needed (sizes in a small /dev/shm: tests/test_docs_corrections.py and the planner's
`--measure`). The spawn claims share one run of two spawned ranks; each test asserts one claim and that
the docs still state it.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from test_docs_advice import SCALING, measure, squashed

CHILD_TIMEOUT = 240

GRAPH = """
    import torch

    def graph(nodes=400, features=4, edges=2000):
        from torch_geometric.data import Data  # imported where used: rank 1 of the spawn run needs only torch
        return Data(x=torch.randn(nodes, features), edge_index=torch.randint(0, nodes, (2, edges)),
                    y=torch.randint(0, 3, (nodes,)))

    def flags(data, loader):
        return {'x': data.x.is_shared(), 'edge_index': data.edge_index.is_shared(),
                'y': data.y.is_shared(), 'seeds': loader.input_data.node.is_shared()}
"""

# Two ranks started by torch.multiprocessing.spawn, a tensor handed to them in args. The launcher sets
# fork first, to show that its choice does not reach the ranks. Rank 1 builds no loader at all.
SPAWNED_RANKS = GRAPH + """
    import json, multiprocessing, shutil
    import torch.multiprocessing as mp

    def run(rank, handed, results):
        report = {'start_method': multiprocessing.get_start_method(), 'handed_is_shared': handed.is_shared()}
        handed[rank] = rank + 1  # one copy on the node: the launcher reads both writes
        if rank == 0:
            from torch_geometric.loader import NeighborLoader
            for context in (None, 'fork'):
                data = graph(nodes=20000, features=400, edges=40000)  # x: 32 MB, the rest 0.8 MB
                loader = NeighborLoader(data, num_neighbors=[3], batch_size=50, num_workers=2,
                                        multiprocessing_context=context)
                before, used = flags(data, loader), shutil.disk_usage('/dev/shm').used
                next(iter(loader))
                graph_bytes = sum(t.nbytes for t in (data.x, data.edge_index, data.y, loader.input_data.node))
                report[str(context)] = {'before': before, 'after': flags(data, loader),
                                        'moved': (shutil.disk_usage('/dev/shm').used - used) / graph_bytes}
        results.put((rank, report))

    if __name__ == '__main__':
        mp.set_start_method('fork', force=True)
        handed = torch.zeros(2)
        results = mp.get_context('spawn').SimpleQueue()
        mp.spawn(run, args=(handed, results), nprocs=2)
        ranks = dict(results.get() for _ in range(2))
        print(json.dumps({'ranks': ranks, 'handed': handed.tolist(), 'launcher_is_shared': handed.is_shared()}))
"""

NOT_SHARED = {"x": False, "edge_index": False, "y": False, "seeds": False}
SHARED = {"x": True, "edge_index": True, "y": True, "seeds": True}


@pytest.fixture(scope="module")
def spawned(tmp_path_factory, neighbor_backend):
    return measure(SPAWNED_RANKS, tmp_path_factory.mktemp("spawned"))


def test_a_spawned_rank_starts_its_processes_with_spawn_whatever_the_launcher_set(spawned):
    assert [spawned["ranks"][rank]["start_method"] for rank in ("0", "1")] == ["spawn", "spawn"]
    text = squashed(SCALING)
    assert "a rank started by `torch.multiprocessing.spawn` starts its workers with spawn, whatever the launcher set" \
        in text


def test_tensors_in_spawn_args_reach_the_ranks_through_shared_memory_once_per_node(spawned):
    # Rank 1 has no loader: args alone put the tensor in /dev/shm; both ranks and the launcher write and
    # read one copy.
    assert spawned["ranks"]["1"]["handed_is_shared"] is True and spawned["ranks"]["0"]["handed_is_shared"] is True
    assert spawned["launcher_is_shared"] is True
    assert spawned["handed"] == [1.0, 2.0]
    text = squashed(SCALING)
    assert "every tensor in `args`, once per node: the launcher and the ranks share it" in text
    assert "even with `num_workers=0`" in text


def test_spawned_workers_move_the_whole_graph_and_seeds_into_shared_memory_at_iter(spawned):
    default = spawned["ranks"]["0"]["None"]
    assert (default["before"], default["after"]) == (NOT_SHARED, SHARED), default
    # /dev/shm grew by the graph once, not once per worker (2 here), plus a few small batches; the
    # margins absorb other processes' use of a shared /dev/shm.
    assert 0.7 < default["moved"] < 1.5, default
    text = squashed(SCALING)
    assert "every tensor of its graph plus the seeds (`arange(N)`, `8 * N`), once per rank, not per worker" in text


def test_fork_workers_in_a_spawned_rank_leave_the_graph_private(spawned):
    forked = spawned["ranks"]["0"]["fork"]
    assert (forked["before"], forked["after"]) == (NOT_SHARED, NOT_SHARED), forked
    assert forked["moved"] < 0.3, forked  # the batches only
    assert "`NeighborLoader(..., multiprocessing_context='fork')` on Linux" in squashed(SCALING)


TORCHRUN_RANK = GRAPH + """
    import json, multiprocessing
    from torch_geometric.loader import NeighborLoader

    data = graph()
    loader = NeighborLoader(data, num_neighbors=[3], batch_size=50, num_workers=1)
    next(iter(loader))
    print(json.dumps({'start_method': multiprocessing.get_start_method(), 'flags': flags(data, loader)}))
"""


def test_torchrun_ranks_fork_their_workers_and_keep_the_graph_private(tmp_path, neighbor_backend):
    if sys.version_info >= (3, 14):
        pytest.skip("Python 3.14 defaults to forkserver: this test shows the fork default up to 3.13")
    script = tmp_path / "rank.py"
    script.write_text(textwrap.dedent(TORCHRUN_RANK))
    process = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1",
                              str(script)], capture_output=True, text=True, cwd=str(tmp_path), timeout=CHILD_TIMEOUT,
                             env=dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONWARNINGS="ignore",
                                      PYTHONDONTWRITEBYTECODE="1"))
    assert process.returncode == 0, process.stderr[-3000:]
    result = json.loads([line for line in process.stdout.splitlines() if line.startswith("{")][-1])
    assert result == {"start_method": "fork", "flags": NOT_SHARED}, result
    assert "`torchrun`, `srun` and one plain process are fresh interpreters whose workers fork up to Python 3.13" \
        in squashed(SCALING)


def test_building_a_loader_with_workers_shares_the_sampler_arrays(tmp_path):
    result = measure("""
        import json, torch
        from torch_geometric.data import Data
        from torch_geometric.loader import NeighborLoader
        data = Data(x=torch.randn(400, 4), edge_index=torch.randint(0, 400, (2, 2000)))
        report = {}
        for workers in (0, 1):
            sampler = NeighborLoader(data, num_neighbors=[3], batch_size=10, num_workers=workers).node_sampler
            report[workers] = [sampler.colptr.is_shared(), sampler.row.is_shared(), sampler.perm.is_shared(),
                               data.x.is_shared()]
        print(json.dumps(report))
    """, tmp_path)
    # Built with workers (none started yet): the sampler's arrays are shared, the graph's own tensors not.
    assert result == {"0": [False, False, False, False], "1": [True, True, True, False]}, result
    assert "| the loader is built | the sampler's arrays" in squashed(SCALING)


def test_workers_keep_workers_times_prefetch_batches_ahead_in_shared_memory(tmp_path, neighbor_backend):
    result = measure("""
        import json, torch
        from torch_geometric.data import Data
        from torch_geometric.loader import NeighborLoader
        data = Data(x=torch.randn(400, 4), edge_index=torch.randint(0, 400, (2, 2000)))
        loader = NeighborLoader(data, num_neighbors=[3], batch_size=10, num_workers=2, prefetch_factor=3)
        iterator = iter(loader)
        ahead, shared = [], []
        for _ in range(5):
            batch = next(iterator)
            shared.append(batch.x.is_shared() and batch.edge_index.is_shared())
            # Sent to the workers and not yet handed to the loop: queued, being built, or received out of
            # order and held (torch.utils.data.dataloader _try_put_index, _next_data).
            ahead.append(iterator._send_idx - iterator._rcvd_idx)
        print(json.dumps({'ahead': ahead, 'shared': shared}))
    """, tmp_path)
    assert result == {"ahead": [6] * 5, "shared": [True] * 5}, result
    assert "up to `W * P + 1` batches per rank" in squashed(SCALING)


def test_multiprocessing_context_needs_workers(tmp_path):
    result = measure("""
        import json, torch
        from torch_geometric.data import Data
        from torch_geometric.loader import NeighborLoader
        data = Data(x=torch.randn(40, 4), edge_index=torch.randint(0, 40, (2, 200)))
        try:
            NeighborLoader(data, num_neighbors=[3], batch_size=10, num_workers=0, multiprocessing_context='fork')
            error = None
        except ValueError as caught:
            error = str(caught)
        print(json.dumps({'error': error}))
    """, tmp_path)
    assert result["error"].startswith("multiprocessing_context can only be used with multi-process loading")
    assert "with `num_workers > 0` only, else `ValueError`" in squashed(SCALING)
