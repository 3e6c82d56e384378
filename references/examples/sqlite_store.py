"""A FeatureStore over SQLite and a GraphStore over CSC arrays on disk, read-only.

Node features live in a SQLite table, edges in CSC arrays memory-mapped with
torch.load(mmap=True). A real backend keeps the requested order (repeats included), raises
KeyError for ids it does not hold, opens one connection per process (a forked loader worker
reconnects on first use) and leaves the data on disk.

    python sqlite_store.py      # writes graph.sqlite and csc.pt here, checks the stores, prints one JSON line
    python ~/.claude/skills/scalable-distributed/scripts/check_store_contract.py ./sqlite_store.py:make_stores   # same folder; the skill where README installs it
"""
import json
import os
import sqlite3

import numpy as np
import torch
from torch_geometric.data import EdgeAttr, FeatureStore, GraphStore, TensorAttr

WIDTH = 4  # columns of x


class SQLiteFeatureStore(FeatureStore):
    """Rows of node(id INTEGER PRIMARY KEY, x BLOB (float32), y INTEGER)."""

    def __init__(self, path):
        super().__init__()
        self.path = os.path.abspath(path)
        self._connection, self._pid = None, None

    def connection(self):
        if self._pid != os.getpid():  # one connection per process
            self._connection = sqlite3.connect('file:%s?mode=ro' % self.path, uri=True)
            self._pid = os.getpid()
        return self._connection

    def num_nodes(self):
        return self.connection().execute('SELECT count(*) FROM node').fetchone()[0]

    def _get_tensor(self, attr):
        if attr.attr_name not in ('x', 'y'):
            return None  # an unknown attribute is None, not an error
        ids = list(range(self.num_nodes())) if attr.index is None else attr.index.tolist()
        wanted, rows = sorted(set(ids)), {}
        for start in range(0, len(wanted), 30000):  # SQLite caps parameters per statement
            chunk = wanted[start:start + 30000]
            rows.update(self.connection().execute(
                'SELECT id, %s FROM node WHERE id IN (%s)' % (attr.attr_name, ','.join('?' * len(chunk))),
                chunk))
        missing = [i for i in wanted if i not in rows]
        if missing:
            raise KeyError('node ids %s are not in %s' % (missing[:10], self.path))
        values = [rows[i] for i in ids]  # the requested order, repeats kept
        if attr.attr_name == 'x':
            return torch.from_numpy(np.stack([np.frombuffer(v, dtype=np.float32) for v in values]))
        return torch.tensor(values, dtype=torch.long)

    def _get_tensor_size(self, attr):
        if attr.attr_name not in ('x', 'y'):
            return None
        return (self.num_nodes(), WIDTH) if attr.attr_name == 'x' else (self.num_nodes(),)

    def get_all_tensor_attrs(self):
        return [TensorAttr(None, 'x'), TensorAttr(None, 'y')]

    def _put_tensor(self, tensor, attr):
        raise NotImplementedError('read-only store')

    def _remove_tensor(self, attr):
        raise NotImplementedError('read-only store')


class CSCGraphStore(GraphStore):
    """Edges as (row, colptr), sorted by destination, memory-mapped from one file."""

    def __init__(self, path):
        super().__init__()
        self.arrays = torch.load(path, mmap=True, weights_only=True)  # not self.csc: PyG calls graph_store.csc()

    def _get_edge_index(self, edge_attr):
        if edge_attr.edge_type is None and edge_attr.layout.value == 'csc':
            return self.arrays['row'], self.arrays['colptr']
        return None

    def get_all_edge_attrs(self):
        num_nodes = self.arrays['colptr'].numel() - 1
        return [EdgeAttr(None, 'csc', size=(num_nodes, num_nodes))]

    def _put_edge_index(self, edge_index, edge_attr):
        raise NotImplementedError('read-only store')

    def _remove_edge_index(self, edge_attr):
        raise NotImplementedError('read-only store')


def make_stores(folder='.'):
    return (SQLiteFeatureStore(os.path.join(folder, 'graph.sqlite')),
            CSCGraphStore(os.path.join(folder, 'csc.pt')))


def write_example(folder='.', num_nodes=100, num_edges=600):
    """A random graph in the layout above (stands in for your export)."""
    x = torch.randn(num_nodes, WIDTH)
    src, dst = torch.randint(0, num_nodes, (2, num_edges))
    with sqlite3.connect(os.path.join(folder, 'graph.sqlite')) as connection:
        connection.execute('CREATE TABLE node (id INTEGER PRIMARY KEY, x BLOB, y INTEGER)')
        connection.executemany('INSERT INTO node VALUES (?, ?, ?)',
                               [(i, x[i].numpy().tobytes(), i % 3) for i in range(num_nodes)])
    connection.close()
    order = torch.argsort(dst, stable=True)
    colptr = torch.zeros(num_nodes + 1, dtype=torch.long)
    colptr[1:] = torch.cumsum(torch.bincount(dst, minlength=num_nodes), 0)
    torch.save({'row': src[order], 'colptr': colptr}, os.path.join(folder, 'csc.pt'))


if __name__ == '__main__':
    write_example()
    feature_store, graph_store = make_stores()
    x = feature_store.get_tensor(None, 'x', None)
    index = torch.tensor([7, 0, 3, 0])
    assert torch.equal(feature_store.get_tensor(None, 'x', index), x[index])  # order and repeats kept
    try:
        feature_store.get_tensor(None, 'x', torch.tensor([10 ** 6]))
        missing = 'returned'
    except KeyError as error:
        missing = 'KeyError: %s' % error
    row, colptr = graph_store.get_edge_index(None, 'csc')
    print(json.dumps({'rows': x.size(0), 'missing_id': missing, 'edges': row.numel(), 'colptr': colptr.numel()}))
