"""Neighbour sampling over edges that never fit in memory: a BaseSampler read from disk.

PyG 2.8's NeighborSampler builds a CSC copy of every edge in each process. This template keeps
the graph on disk as CSC (two raw int64 files: `colptr` of num_nodes + 1 entries and `row`, the
source of every edge, grouped by destination) and reads only the rows each hop needs with
os.pread, so a process holds the sampled neighbourhoods and nothing else. NodeLoader turns the
SamplerOutput into a Data batch (seeds first, `batch.n_id`, `batch.e_id`, `batch.batch_size`).

    python out_of_core_sampler.py write DIR --nodes 600000 --degree 32   # a random graph, 146 MiB of edges
    python out_of_core_sampler.py sample DIR --num-neighbors 10,5 --batch-size 64 --max-batches 5 --cap-mb 96
    python out_of_core_sampler.py compare DIR   # small graphs: same subgraphs as NeighborLoader?

`sample` prints one JSON line; with --cap-mb it first limits this process's address space to
what it already uses plus that many MiB (RLIMIT_AS), tries to load the edge file whole (and to
memory-map it: a mapping counts against RLIMIT_AS), then samples under the cap.
"""

import argparse
import json
import os
import resource
import sys

import numpy as np
import torch

import torch_geometric.typing
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader, NodeLoader
from torch_geometric.sampler import BaseSampler, SamplerOutput

INT64 = 8


class DiskCSCSampler(BaseSampler):
    """Uniform neighbour sampling without replacement, like NeighborLoader's default."""

    def __init__(self, folder, num_neighbors, seed=0):
        self.folder, self.num_neighbors, self.seed = folder, list(num_neighbors), seed
        self._files = None  # opened lazily: each DataLoader worker opens its own

    def _open(self):
        if self._files is None or self._files[0] != os.getpid():
            self._files = (os.getpid(),
                           os.open(os.path.join(self.folder, 'colptr.bin'), os.O_RDONLY),
                           os.open(os.path.join(self.folder, 'row.bin'), os.O_RDONLY),
                           np.random.default_rng([self.seed, os.getpid()]))
        return self._files[1:]

    def _in_edges(self, colptr_fd, row_fd, node):
        """(edge ids, sources) of the edges into `node`: two small reads."""
        start, end = np.frombuffer(os.pread(colptr_fd, 2 * INT64, node * INT64), np.int64)
        sources = np.frombuffer(os.pread(row_fd, int(end - start) * INT64, int(start) * INT64),
                                np.int64)
        return np.arange(start, end), sources

    def sample_from_nodes(self, index, **kwargs):
        colptr_fd, row_fd, rng = self._open()
        seeds = index.node.tolist()
        local = {node: i for i, node in enumerate(seeds)}  # global id -> position in the batch
        nodes, rows, cols, edges = list(seeds), [], [], []
        num_sampled_nodes, num_sampled_edges = [len(seeds)], []
        frontier = seeds
        for fanout in self.num_neighbors:
            next_frontier, hop_edges = [], 0
            for dst in frontier:
                edge_ids, sources = self._in_edges(colptr_fd, row_fd, dst)
                if 0 <= fanout < len(sources):
                    pick = rng.choice(len(sources), fanout, replace=False)
                    edge_ids, sources = edge_ids[pick], sources[pick]
                for edge_id, src in zip(edge_ids.tolist(), sources.tolist()):
                    if src not in local:
                        local[src] = len(nodes)
                        nodes.append(src)
                        next_frontier.append(src)
                    rows.append(local[src])
                    cols.append(local[dst])
                    edges.append(edge_id)
                    hop_edges += 1
            num_sampled_nodes.append(len(next_frontier))
            num_sampled_edges.append(hop_edges)
            frontier = next_frontier
        long = lambda values: torch.tensor(values, dtype=torch.long)
        return SamplerOutput(node=long(nodes), row=long(rows), col=long(cols), edge=long(edges),
                             num_sampled_nodes=num_sampled_nodes,
                             num_sampled_edges=num_sampled_edges,
                             metadata=(index.input_id, index.time))  # NodeLoader reads both

    def sample_from_edges(self, index, neg_sampling=None):
        raise NotImplementedError  # abstract in BaseSampler: needed to instantiate the class


def write_random_graph(folder, num_nodes, degree, seed=0, chunk=1 << 20):
    """Every node gets `degree` random in-edges, written in chunks (never all in memory)."""
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    np.arange(0, (num_nodes + 1) * degree, degree, dtype=np.int64).tofile(
        os.path.join(folder, 'colptr.bin'))
    with open(os.path.join(folder, 'row.bin'), 'wb') as handle:
        for start in range(0, num_nodes * degree, chunk):
            count = min(chunk, num_nodes * degree - start)
            rng.integers(0, num_nodes, count, dtype=np.int64).tofile(handle)
    with open(os.path.join(folder, 'meta.json'), 'w') as handle:
        json.dump({'num_nodes': num_nodes, 'num_edges': num_nodes * degree}, handle)


def make_loader(folder, num_neighbors, batch_size, num_features=8):
    with open(os.path.join(folder, 'meta.json')) as handle:
        num_nodes = json.load(handle)['num_nodes']
    # Features stay in memory here (a FeatureStore can serve them instead). The empty
    # edge_index makes NodeLoader's filter_data build batch.edge_index from row and col.
    data = Data(x=torch.randn(num_nodes, num_features), num_nodes=num_nodes,
                edge_index=torch.empty((2, 0), dtype=torch.long))
    sampler = DiskCSCSampler(folder, num_neighbors)
    return NodeLoader(data, node_sampler=sampler, input_nodes=torch.arange(num_nodes),
                      batch_size=batch_size, shuffle=True)


def address_space_cap(extra_mb):
    """Limit this process to its current virtual size plus extra_mb; return the cap in bytes."""
    torch.set_num_threads(1)  # new threads reserve stacks and arenas: start none later
    with open('/proc/self/status') as handle:
        size_kb = int(next(l for l in handle if l.startswith('VmSize:')).split()[1])
    cap = size_kb * 1024 + extra_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    return cap


def try_whole_file(path):
    attempts = {}
    for name, load in (('read', lambda: np.fromfile(path, dtype=np.int64)),
                       ('mmap', lambda: np.memmap(path, dtype=np.int64, mode='r'))):
        try:
            load()
            attempts[name] = 'loaded'
        except (MemoryError, OSError, ValueError) as error:
            attempts[name] = type(error).__name__
    return attempts


def sample(args):
    row_bytes = os.path.getsize(os.path.join(args.folder, 'row.bin'))
    loader = make_loader(args.folder, args.num_neighbors, args.batch_size)
    report = {'edge_file_mb': round(row_bytes / 2**20, 1), 'cap_mb': None}
    if args.cap_mb is not None:
        report['cap_mb'] = args.cap_mb
        address_space_cap(args.cap_mb)
        report['whole_file_under_cap'] = try_whole_file(os.path.join(args.folder, 'row.bin'))
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    batches = nodes = edges = 0
    for batch in loader:
        assert batch.n_id[:batch.batch_size].equal(batch.input_id)  # seeds come first
        batches, nodes, edges = batches + 1, nodes + batch.num_nodes, edges + batch.num_edges
        if batches == args.max_batches:
            break
    peak_growth_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    report.update(batches=batches, sampled_nodes=nodes, sampled_edges=edges,
                  peak_rss_growth_mb=round(peak_growth_kb / 1024, 1))
    print(json.dumps(report))


def compare(args):
    """Full fan-out (-1) over len(--num-neighbors) hops is deterministic: every batch must
    equal NeighborLoader's on the same graph loaded whole (so: small graphs only)."""
    colptr = np.fromfile(os.path.join(args.folder, 'colptr.bin'), dtype=np.int64)
    row = torch.from_numpy(np.fromfile(os.path.join(args.folder, 'row.bin'), dtype=np.int64))
    col = torch.repeat_interleave(torch.from_numpy(np.diff(colptr)))
    num_nodes, fanout = len(colptr) - 1, [-1] * len(args.num_neighbors)
    ours = make_loader(args.folder, fanout, args.batch_size)
    data = Data(edge_index=torch.stack([row, col]), num_nodes=num_nodes)
    report = {'batches': 0, 'edges_are_real': True, 'full_neighbourhoods': True}
    in_degree = torch.from_numpy(np.diff(colptr))
    theirs = None
    if torch_geometric.typing.WITH_PYG_LIB or torch_geometric.typing.WITH_TORCH_SPARSE:
        theirs = iter(NeighborLoader(data, num_neighbors=fanout, batch_size=args.batch_size,
                                     is_sorted=True))  # the files are sorted by destination
    else:  # NeighborLoader needs pyg-lib or torch-sparse: check the edges only
        report['neighbor_loader'] = 'unavailable: no pyg-lib or torch-sparse'
    same = True
    # The same sampler, unshuffled, to compare batch by batch in seed order:
    for batch in NodeLoader(ours.data, ours.node_sampler, input_nodes=torch.arange(num_nodes),
                            batch_size=args.batch_size):
        pairs = batch.n_id[batch.edge_index]
        report['edges_are_real'] &= bool(pairs.equal(data.edge_index[:, batch.e_id]))
        # Full fan-out: every node found before the last hop brings all of its in-edges.
        expanded = batch.n_id[:sum(batch.num_sampled_nodes[:-1])]
        report['full_neighbourhoods'] &= batch.num_edges == int(in_degree[expanded].sum())
        if theirs is not None:
            other = next(theirs)
            same &= (set(batch.n_id.tolist()) == set(other.n_id.tolist())
                     and batch.n_id[:batch.batch_size].equal(other.n_id[:other.batch_size])
                     and sorted(batch.e_id.tolist()) == sorted(other.e_id.tolist()))
        report['batches'] += 1
    if theirs is not None:
        report['neighbor_loader'] = 'same subgraphs' if same else 'different subgraphs'
    print(json.dumps(report))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('mode', choices=('write', 'sample', 'compare'))
    parser.add_argument('folder')
    parser.add_argument('--nodes', type=int, default=100_000)
    parser.add_argument('--degree', type=int, default=20)
    parser.add_argument('--num-neighbors', type=lambda s: [int(k) for k in s.split(',')],
                        default=[10, 5])
    parser.add_argument('--batch-size', type=int, default=64)
    parser.add_argument('--max-batches', type=int, default=5)
    parser.add_argument('--cap-mb', type=int, help='RLIMIT_AS headroom in MiB (Linux)')
    args = parser.parse_args(argv)
    if args.mode == 'write':
        write_random_graph(args.folder, args.nodes, args.degree)
        print(json.dumps({'written': args.folder, 'num_edges': args.nodes * args.degree}))
    else:
        (sample if args.mode == 'sample' else compare)(args)


if __name__ == '__main__':
    sys.exit(main())
