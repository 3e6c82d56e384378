"""The core of DDP with PyG: one NeighborLoader per rank, the same number of steps on every rank.

The graph is sorted by destination once, before spawning, so every rank's loader (built once, with
is_sorted=True) keeps a view of edge_index instead of sorting a private copy; mp.spawn's args hand it
over through /dev/shm, one copy per node (scaling-and-backends.md, "What reaches /dev/shm").
DistributedSampler as the loader's sampler= pads every rank to the same seed count; set_epoch(epoch)
reshuffles, the same on every rank. Every rank seeds torch identically before building the model,
and frees the DDP model before its process group. Without pyg-lib or torch-sparse the first batch
fails; the ranks report it.
scripts/ddp_neighbor_training.py is the full recipe (torchrun, SLURM, nccl, stores).

    python ddp_neighbor_loader.py      # 2 gloo ranks on CPU; prints one JSON line
"""
import json
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DistributedSampler
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader
from torch_geometric.nn import GraphSAGE


def run(rank, world_size, port, data, results):
    dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{port}', rank=rank,
                            world_size=world_size)
    torch.manual_seed(0)  # identical initial weights on every rank
    model = DistributedDataParallel(GraphSAGE(
        in_channels=data.num_features, hidden_channels=16, num_layers=2, out_channels=3))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    seeds = torch.arange(data.num_nodes)
    sampler = DistributedSampler(range(seeds.numel()), num_replicas=world_size, rank=rank,
                                 shuffle=True, seed=0)
    loader = NeighborLoader(data, num_neighbors=[5, 3], batch_size=16, input_nodes=seeds,
                            sampler=sampler, is_sorted=True)
    report = {'rank': rank, 'steps': [], 'shares_edge_index':
              loader.node_sampler.row.data_ptr() == data.edge_index.data_ptr()}
    try:
        for epoch in range(2):
            sampler.set_epoch(epoch)
            steps = 0
            for batch in loader:
                optimizer.zero_grad()
                out = model(batch.x, batch.edge_index)[:batch.batch_size]
                F.cross_entropy(out, batch.y[:batch.batch_size]).backward()
                optimizer.step()
                steps += 1
            report['steps'].append(steps)
    except ImportError as error:  # no sampling backend: fails at the first batch, on every rank
        report['sampling'] = 'ImportError: %s' % error
    results.put(report)
    del model, optimizer  # free DDP before its process group: avoids a teardown deadlock
    dist.destroy_process_group()


if __name__ == '__main__':
    num_nodes = 200
    data = Data(x=torch.randn(num_nodes, 8), edge_index=torch.randint(0, num_nodes, (2, 1000)),
                y=torch.randint(0, 3, (num_nodes,)))
    data = data.sort(sort_by_row=False)  # once, for every rank's loader
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    results = mp.get_context('spawn').SimpleQueue()
    mp.spawn(run, args=(2, port, data, results), nprocs=2)
    ranks = sorted((results.get() for _ in range(2)), key=lambda r: r['rank'])
    print(json.dumps({'ranks': ranks}))
