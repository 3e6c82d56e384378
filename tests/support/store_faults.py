"""More store pairs for tests/test_store_faults.py, one broken part each (named in the docstring),
built on PyG's own LocalFeatureStore/LocalGraphStore and the shapes of tests/support/store_fixtures.py."""

import torch

from torch_geometric.distributed import LocalFeatureStore, LocalGraphStore

from store_fixtures import (WRITES, hetero_features, hetero_graph, homo_features, homo_graph,
                             ring_edges)


class RaisingListingFeatureStore(LocalFeatureStore):
    def get_all_tensor_attrs(self):
        raise RuntimeError("feature catalogue unavailable")


def listing_raises():
    """get_all_tensor_attrs raises."""
    return homo_features(RaisingListingFeatureStore), homo_graph()


class NamesNotAttrsFeatureStore(LocalFeatureStore):
    def get_all_tensor_attrs(self):
        return ["x", "y"]  # names, not TensorAttr objects


def tensor_attrs_as_names():
    """get_all_tensor_attrs returns attribute names instead of TensorAttr objects."""
    return homo_features(NamesNotAttrsFeatureStore), homo_graph()


class TuplesNotAttrsGraphStore(LocalGraphStore):
    def get_all_edge_attrs(self):
        return [(None, "coo")]  # a tuple, not an EdgeAttr


def edge_attrs_as_tuples():
    """get_all_edge_attrs returns plain tuples instead of EdgeAttr objects."""
    return homo_features(), homo_graph(TuplesNotAttrsGraphStore)


def no_edges():
    """The graph store holds no edge index."""
    return homo_features(), LocalGraphStore()


def no_features():
    """The feature store holds nothing."""
    return LocalFeatureStore(), homo_graph()


class MatrixEdgeIndexGraphStore(LocalGraphStore):
    def _get_edge_index(self, edge_attr):
        row, col = super()._get_edge_index(edge_attr)
        return torch.stack([row, col]), col  # a 2-D first member


def edge_index_not_1d():
    """get_edge_index returns a pair whose first member is 2-D."""
    return homo_features(), homo_graph(MatrixEdgeIndexGraphStore)


def edge_size_missing():
    """The homogeneous edge index is stored without size=(num_nodes, num_nodes)."""
    graph_store = LocalGraphStore()
    edges = ring_edges()
    graph_store.put_edge_index((edges[0], edges[1]), edge_type=None, layout="coo")
    return homo_features(), graph_store


def hetero_features_homo_graph():
    """Features keyed by node type ('paper', 'author') beside a homogeneous graph."""
    return hetero_features(), homo_graph()


def edge_features():
    """A heterogeneous pair whose feature store also holds an edge feature (group = edge type)."""
    feature_store = hetero_features()
    feature_store.put_tensor(torch.ones(hetero_graph().get_edge_index(WRITES, "coo")[0].numel(), 2),
                             group_name=WRITES, attr_name="edge_attr")
    return feature_store, hetero_graph()


def homo_pair():
    return homo_features(), homo_graph()
