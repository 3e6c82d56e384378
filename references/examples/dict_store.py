"""The smallest complete FeatureStore / GraphStore pair: the abstract methods PyG calls, in memory.

Each class implements exactly the abstract methods (PyG's public put/get/remove wrap them), and the
checks below show the lookup rules: a partly specified key is a lazy AttrView, an index returns those
rows in that order, a missing feature is None, a missing edge type raises KeyError.

    python dict_store.py      # prints one JSON line
    python ~/.claude/skills/scalable-distributed/scripts/check_store_contract.py ./dict_store.py:make_stores   # same folder; the skill where README installs it
"""
import json

import torch
from torch_geometric.data import EdgeAttr, FeatureStore, GraphStore, TensorAttr


class DictFeatureStore(FeatureStore):
    def __init__(self):
        super().__init__()
        self._tensors = {}

    def _put_tensor(self, tensor, attr):
        self._tensors[(attr.group_name, attr.attr_name)] = tensor
        return True

    def _get_tensor(self, attr):
        tensor = self._tensors.get((attr.group_name, attr.attr_name))
        if tensor is None or attr.index is None:
            return tensor
        return tensor[attr.index]

    def _remove_tensor(self, attr):
        return self._tensors.pop((attr.group_name, attr.attr_name), None) is not None

    def _get_tensor_size(self, attr):
        tensor = self._tensors.get((attr.group_name, attr.attr_name))
        return None if tensor is None else tuple(tensor.shape)

    def get_all_tensor_attrs(self):
        return [TensorAttr(group, name) for group, name in self._tensors]


class DictGraphStore(GraphStore):
    def __init__(self):
        super().__init__()
        self._edges = {}

    def _put_edge_index(self, edge_index, edge_attr):
        self._edges[(edge_attr.edge_type, edge_attr.layout)] = (edge_index, edge_attr)
        return True

    def _get_edge_index(self, edge_attr):
        entry = self._edges.get((edge_attr.edge_type, edge_attr.layout))
        return None if entry is None else entry[0]

    def _remove_edge_index(self, edge_attr):
        return self._edges.pop((edge_attr.edge_type, edge_attr.layout), None) is not None

    def get_all_edge_attrs(self):
        return [edge_attr for _, edge_attr in self._edges.values()]


def make_stores(num_nodes=10, num_edges=30):
    feature_store, graph_store = DictFeatureStore(), DictGraphStore()
    feature_store['paper', 'x', None] = torch.randn(num_nodes, 4)
    edge_index = torch.randint(0, num_nodes, (2, num_edges))
    graph_store.put_edge_index((edge_index[0], edge_index[1]), edge_type=('paper', 'cites', 'paper'),
                               layout='coo', size=(num_nodes, num_nodes))  # always give size=
    return feature_store, graph_store


if __name__ == '__main__':
    feature_store, graph_store = make_stores()
    x = feature_store.get_tensor('paper', 'x', None)
    assert type(feature_store['paper', 'x']).__name__ == 'AttrView'  # a view, not a tensor
    assert torch.equal(feature_store['paper', 'x', None], x)
    assert torch.equal(feature_store['paper', 'x'](), x)  # calling the view reads it
    assert torch.equal(feature_store.get_tensor('paper', 'x', torch.tensor([3, 1])), x[[3, 1]])
    assert feature_store.get_tensor('paper', 'missing', None) is None
    try:
        graph_store.get_edge_index(EdgeAttr(('paper', 'writes', 'paper'), 'coo'))
        missing_edges = 'returned'
    except KeyError:
        missing_edges = 'KeyError'
    print(json.dumps({'tensor_attrs': len(feature_store.get_all_tensor_attrs()),
                      'edge_attrs': len(graph_store.get_all_edge_attrs()), 'missing_edges': missing_edges}))
