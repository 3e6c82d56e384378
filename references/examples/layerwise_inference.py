"""Exact full-graph inference, layer by layer: in one process, then sharded over DDP ranks.

`model.inference(loader)` (PyG's BasicGNN models) needs a one-hop, all-neighbours NeighborLoader over
all nodes with shuffle=False: with shuffle=True it runs, but row i is no longer node i. It runs every
node on every rank; to split the work, each rank runs the layer loop over its own share of the nodes
and all_gathers each layer's rows before the next layer, since every rank needs all of them.
all_gather wants equal sizes, so the shares are padded (the last node repeated) and the padding
dropped. Both equal the full-batch forward pass. Without pyg-lib or torch-sparse the loader fails at
its first batch; the script reports it.

    python layerwise_inference.py      # one process, then 2 gloo ranks on CPU; prints one JSON line
"""
import json
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader
from torch_geometric.nn import GraphSAGE


def one_process(model, data):
    full_batch = model(data.x, data.edge_index)
    layerwise = model.inference(NeighborLoader(data, num_neighbors=[-1], batch_size=128, shuffle=False))
    assert torch.allclose(layerwise, full_batch, atol=1e-5)  # exact, not sampled
    shuffled = model.inference(NeighborLoader(data, num_neighbors=[-1], batch_size=128, shuffle=True))
    assert not torch.allclose(shuffled, full_batch, atol=1e-5)  # rows come back in batch order
    return {'equals_full_batch': True, 'shuffled_rows_misplaced': True}


@torch.no_grad()
def sharded_inference(model, data, rank, world_size, batch_size=128):
    share = -(-data.num_nodes // world_size)  # ceil: equal shares, the last one padded
    nodes = torch.arange(rank * share, (rank + 1) * share).clamp(max=data.num_nodes - 1)
    loader = NeighborLoader(data, num_neighbors=[-1], batch_size=batch_size, input_nodes=nodes,
                            shuffle=False)
    x_all = data.x
    for layer in range(model.num_layers):
        mine = torch.cat([model.inference_per_layer(layer, x_all[batch.n_id], batch.edge_index,
                                                    batch.batch_size) for batch in loader])
        parts = [torch.empty_like(mine) for _ in range(world_size)]
        dist.all_gather(parts, mine)
        x_all = torch.cat(parts)[:data.num_nodes]  # drop the padding
    return x_all


def run(rank, world_size, port, data, model, results):
    dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{port}', rank=rank,
                            world_size=world_size)
    try:
        out = sharded_inference(model, data, rank, world_size)
        with torch.no_grad():
            assert torch.allclose(out, model(data.x, data.edge_index), atol=1e-5)
        results.put({'rank': rank, 'equals_full_batch': True})
    except ImportError as error:  # no sampling backend
        results.put({'rank': rank, 'sampling': 'ImportError: %s' % error})
    dist.destroy_process_group()


if __name__ == '__main__':
    torch.manual_seed(0)
    data = Data(x=torch.randn(301, 16), edge_index=torch.randint(0, 301, (2, 2000)))
    model = GraphSAGE(in_channels=16, hidden_channels=32, num_layers=2, out_channels=4).eval()
    try:
        with torch.no_grad():
            report = {'one_process': one_process(model, data)}
    except ImportError as error:
        report = {'one_process': {'sampling': 'ImportError: %s' % error}}
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    results = mp.get_context('spawn').SimpleQueue()
    mp.spawn(run, args=(2, port, data, model, results), nprocs=2)
    report['ranks'] = sorted((results.get() for _ in range(2)), key=lambda r: r['rank'])
    print(json.dumps(report))
