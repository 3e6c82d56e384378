"""Temporal neighbour sampling: the edge order it needs, PyG's loaders, and a pyg-lib-free sampler.

With `time_attr`, PyG's NeighborSampler hands pyg-lib a CSC graph in which each destination's
neighbours are sorted by time (node time of the source, or edge time): pyg-lib binary-searches
that list for the seed time. `data.sort(sort_by_row=False)` sorts by destination only, so a
graph passed with `is_sorted=True` must be sorted by (destination, time) instead; this script
does that sort and measures how often the destination-only sort leaves a list out of order.

It then tries PyG's temporal NeighborLoader (edge-level time, `input_time`) and
LinkNeighborLoader (`edge_label_time`), and checks that no sampled edge is later than its
seed's time. Temporal sampling needs pyg-lib; without it the script records the error PyG
raises and runs TemporalSampler below, a plain-torch BaseSampler with the same rule (keep
neighbours with time <= seed time, disjoint subgraph per seed), through NodeLoader.

    python temporal_sampling.py          # prints one JSON line
"""

import json

import torch

import torch_geometric.typing
from torch_geometric.data import Data
from torch_geometric.loader import LinkNeighborLoader, NeighborLoader, NodeLoader
from torch_geometric.sampler import BaseSampler, SamplerOutput


def sort_by_destination_then_time(data, time_attr='time'):
    """Edge order for is_sorted=True with edge-level time: by destination, then by time."""
    time, col = data[time_attr], data.edge_index[1]
    perm = time.argsort(stable=True)
    perm = perm[col[perm].argsort(stable=True)]  # stable: ties keep the time order
    data.edge_index, data[time_attr] = data.edge_index[:, perm], time[perm]
    return data


def unsorted_neighbourhoods(data, time_attr='time'):
    """How many destinations have neighbours out of time order (edges sorted by destination)."""
    col, time = data.edge_index[1], data[time_attr]
    same_dst = col[1:] == col[:-1]
    return int(col[1:][same_dst & (time[1:] < time[:-1])].unique().numel())


class TemporalSampler(BaseSampler):
    """Uniform temporal sampling in plain torch, for graphs sorted by (destination, time)."""

    def __init__(self, data, num_neighbors, time_attr='time', seed=0):
        col = data.edge_index[1]
        self.row, self.time, self.num_neighbors = data.edge_index[0], data[time_attr], num_neighbors
        self.colptr = torch.zeros(data.num_nodes + 1, dtype=torch.long)
        self.colptr[1:] = torch.bincount(col, minlength=data.num_nodes).cumsum(0)
        self.generator = torch.Generator().manual_seed(seed)

    def sample_from_nodes(self, index, **kwargs):
        nodes, batch, rows, cols, edges = [], [], [], [], []
        for example, (seed, seed_time) in enumerate(zip(index.node.tolist(), index.time.tolist())):
            local = {seed: len(nodes)}  # disjoint: one subgraph (and node numbering) per seed
            nodes.append(seed)
            batch.append(example)
            frontier = [seed]
            for fanout in self.num_neighbors:
                next_frontier = []
                for dst in frontier:
                    start, end = self.colptr[dst].item(), self.colptr[dst + 1].item()
                    # The list is sorted by time: every neighbour up to the seed time is a prefix.
                    end = start + int(torch.searchsorted(self.time[start:end],
                                                         torch.tensor(seed_time), right=True))
                    edge_ids = torch.arange(start, end)
                    if 0 <= fanout < edge_ids.numel():
                        edge_ids = edge_ids[torch.randperm(edge_ids.numel(),
                                                           generator=self.generator)[:fanout]]
                    for edge_id in edge_ids.tolist():
                        src = self.row[edge_id].item()
                        if src not in local:
                            local[src] = len(nodes)
                            nodes.append(src)
                            batch.append(example)
                            next_frontier.append(src)
                        rows.append(local[src])
                        cols.append(local[dst])
                        edges.append(edge_id)
                frontier = next_frontier
        long = lambda values: torch.tensor(values, dtype=torch.long)
        return SamplerOutput(node=long(nodes), row=long(rows), col=long(cols), edge=long(edges),
                             batch=long(batch), metadata=(index.input_id, index.time))

    def sample_from_edges(self, index, neg_sampling=None):
        raise NotImplementedError  # abstract in BaseSampler


def latest_edge_after_seed(batch):
    """Number of sampled edges later than the seed time of the subgraph they belong to."""
    seed_of_edge = batch.batch[batch.edge_index[1]]
    return int((batch.time > batch.seed_time[seed_of_edge]).sum())


def make_graph(num_nodes=200, num_edges=2000, seed=0):
    generator = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=generator)
    time = torch.randint(0, 100, (num_edges,), generator=generator)
    return Data(edge_index=edge_index, time=time, num_nodes=num_nodes)


def run_pyg_loaders(data, seeds, seed_time, report):
    """PyG's own temporal loaders; they need pyg-lib."""
    try:
        loader = NeighborLoader(data, num_neighbors=[5, 5], input_nodes=seeds,
                                input_time=seed_time, time_attr='time', batch_size=16,
                                is_sorted=True)  # sorted by (destination, time) above
        report['neighbor_loader_future_edges'] = sum(map(latest_edge_after_seed, loader))
        links = LinkNeighborLoader(data, num_neighbors=[5, 5],
                                   edge_label_index=data.edge_index[:, :64],
                                   edge_label_time=data.time[:64], time_attr='time',
                                   batch_size=16, is_sorted=True)
        report['link_loader_future_edges'] = sum(map(latest_edge_after_seed, links))
    except (ImportError, ValueError) as error:
        report['pyg_temporal'] = '%s: %s' % (type(error).__name__, error)
    # Node-level time (the source node's timestamp) takes the other code path.
    nodes = Data(edge_index=data.edge_index, node_time=torch.arange(data.num_nodes),
                 num_nodes=data.num_nodes)
    try:
        next(iter(NeighborLoader(nodes, num_neighbors=[5], time_attr='node_time',
                                 input_nodes=seeds, batch_size=16)))
        report['pyg_node_time'] = 'sampled'
    except (ImportError, ValueError) as error:
        report['pyg_node_time'] = '%s: %s' % (type(error).__name__, error)


def main():
    data = make_graph()
    destination_sorted = data.clone().sort(sort_by_row=False)
    data = sort_by_destination_then_time(data)
    seeds = torch.arange(64)
    seed_time = torch.randint(0, 100, (seeds.numel(),), generator=torch.Generator().manual_seed(1))
    report = {
        'with_pyg_lib': torch_geometric.typing.WITH_PYG_LIB,
        'unsorted_after_data_sort': unsorted_neighbourhoods(destination_sorted),
        'unsorted_after_time_sort': unsorted_neighbourhoods(data),
    }
    run_pyg_loaders(data, seeds, seed_time, report)

    loader = NodeLoader(data, node_sampler=TemporalSampler(data, [5, 5]), input_nodes=seeds,
                        input_time=seed_time, batch_size=16)
    batches = list(loader)
    report['plain_sampler_edges'] = sum(batch.num_edges for batch in batches)
    report['plain_sampler_future_edges'] = sum(map(latest_edge_after_seed, batches))
    # The same binary search on the destination-only order: future edges slip in, no error.
    unsorted = NodeLoader(destination_sorted, input_nodes=seeds, input_time=seed_time,
                          node_sampler=TemporalSampler(destination_sorted, [5, 5]), batch_size=16)
    report['future_edges_if_only_data_sort'] = sum(map(latest_edge_after_seed, unsorted))
    print(json.dumps(report))


if __name__ == '__main__':
    main()
