"""Faster training steps: PrefetchLoader, torch.compile(dynamic=True), trim_to_layer.

PrefetchLoader(loader) copies the next batch to the GPU on a side stream (device=None: CUDA when
available, else a pass-through; an explicit device='cuda' without CUDA warns, then fails at the first
batch). torch.compile(dynamic=True) compiles shape-generic code once instead of recompiling as the
batch sizes change (on CPU it needs a C++ compiler). Batches from pyg-lib carry per-hop counts that
let BasicGNN models drop the nodes each later layer no longer needs. Needs pyg-lib or torch-sparse.

    python faster_steps.py      # prints one JSON line
"""
import json
import warnings

import torch
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader, PrefetchLoader
from torch_geometric.nn import GraphSAGE

device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
data = Data(x=torch.randn(300, 8), edge_index=torch.randint(0, 300, (2, 2000)))
loader = NeighborLoader(data, num_neighbors=[5, 5], batch_size=32, pin_memory=torch.cuda.is_available())
prefetching = PrefetchLoader(loader)  # device=None: CUDA when available, else pass-through
report = {'device': device.type}
if device.type == 'cpu':  # an explicit 'cuda' without CUDA warns, then fails at the first batch
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        broken = PrefetchLoader(loader, device='cuda')
    assert any('falling back to CPU' in str(w.message) for w in caught)
    try:
        next(iter(broken))
        raise AssertionError('PrefetchLoader fell back cleanly')
    except RuntimeError as error:
        assert 'Cannot access accelerator device' in str(error)
    report['explicit_cuda_without_cuda'] = 'RuntimeError at the first batch'

model = GraphSAGE(in_channels=8, hidden_channels=16, num_layers=2, out_channels=3).to(device)
compiled = torch.compile(model, dynamic=True)
report['trimmed'] = report['compiled'] = 0
for step, batch in enumerate(prefetching):
    batch = batch.to(device, non_blocking=True)  # already there when PrefetchLoader copied it
    if getattr(batch, 'num_sampled_nodes', None) is not None:  # pyg-lib: trim to the hops needed
        out = model(batch.x, batch.edge_index, num_sampled_nodes_per_hop=batch.num_sampled_nodes,
                    num_sampled_edges_per_hop=batch.num_sampled_edges)
        report['trimmed'] += 1
    else:
        out = compiled(batch.x, batch.edge_index)
        report['compiled'] += 1
    assert out.size(0) >= batch.batch_size  # the seeds come first, trimmed or not
    if step == 2:
        break
print(json.dumps(report))
