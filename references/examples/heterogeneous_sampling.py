"""Neighbour sampling on HeteroData: reverse edges and fan-outs per edge type.

NeighborLoader samples along edges into the frontier, so a seed type that no edge type points to gets
no neighbours, silently; T.ToUndirected() adds the reverse edge types. Fan-outs: a list applies to
every edge type, a plain dict must name every edge type (else ValueError at the first batch), and
NumNeighbors(values, default=[...]) fills the ones it does not name. Needs pyg-lib or torch-sparse.

    python heterogeneous_sampling.py      # prints one JSON line
"""
import json

import torch
import torch_geometric.transforms as T
from torch_geometric.data import HeteroData
from torch_geometric.loader import NeighborLoader
from torch_geometric.sampler import NumNeighbors

torch.manual_seed(0)
data = HeteroData()
data['author'].x = torch.randn(100, 8)
data['paper'].x = torch.randn(200, 16)
data['author', 'writes', 'paper'].edge_index = torch.stack(
    [torch.randint(0, 100, (800,)), torch.randint(0, 200, (800,))])

# Authors receive no edges: their batches contain the seeds and nothing else.
batch = next(iter(NeighborLoader(data, num_neighbors=[5, 5], batch_size=16, input_nodes='author')))
assert batch['paper'].num_nodes == 0 and batch['author'].num_nodes == 16

data = T.ToUndirected()(data)  # adds ('paper', 'rev_writes', 'author')
fan_outs = {('author', 'writes', 'paper'): [5, 3], ('paper', 'rev_writes', 'author'): [10, 5]}
batch = next(iter(NeighborLoader(data, num_neighbors=fan_outs, batch_size=16, input_nodes='author')))
assert batch['paper'].num_nodes > 0
try:
    next(iter(NeighborLoader(data, num_neighbors={('paper', 'rev_writes', 'author'): [10, 5]},
                             batch_size=16, input_nodes='author')))
    raise AssertionError('a fan-out dict without every edge type was accepted')
except ValueError as error:
    assert 'Missing number of neighbors' in str(error)
partial = NumNeighbors({('paper', 'rev_writes', 'author'): [10, 5]}, default=[2, 2])
assert partial.get_values(data.edge_types)[('author', 'writes', 'paper')] == [2, 2]
batch = next(iter(NeighborLoader(data, num_neighbors=partial, batch_size=16, input_nodes='author')))
# Train on out['author'][:batch['author'].batch_size].
print(json.dumps({'seed_authors': batch['author'].batch_size, 'papers_sampled': batch['paper'].num_nodes}))
