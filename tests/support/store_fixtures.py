"""Feature/graph store pairs for tests/test_store_contract.py.

Each public function returns a (FeatureStore, GraphStore) pair and is passed
to the checker as `tests/support/store_fixtures.py:<name>`. The reference pairs are
PyG's own LocalFeatureStore/LocalGraphStore; every other pair breaks exactly
one part of the contract on purpose (named in its docstring).
"""

import os
import time

import torch

from torch_geometric.distributed import LocalFeatureStore, LocalGraphStore

NUM_NODES = 12
PAPERS, AUTHORS = 10, 6
WRITES = ("author", "writes", "paper")
REV_WRITES = ("paper", "rev_writes", "author")
CITES = ("paper", "cites", "paper")
PUBLISHED_IN = ("paper", "published_in", "venue")


def ring_edges(num_nodes=NUM_NODES):
    """An undirected ring: every node has two neighbours."""
    nodes = torch.arange(num_nodes)
    forward = torch.stack([nodes, (nodes + 1) % num_nodes])
    return torch.cat([forward, forward.flip(0)], dim=1)


def homo_features(store_cls=LocalFeatureStore, num_labels=NUM_NODES):
    generator = torch.Generator().manual_seed(0)
    return store_cls.from_data(torch.arange(NUM_NODES), x=torch.randn(NUM_NODES, 4, generator=generator),
                               y=torch.arange(num_labels) % 3)


def homo_graph(store_cls=LocalGraphStore):
    edges = ring_edges()
    return store_cls.from_data(torch.arange(edges.size(1)), edges, NUM_NODES)


def hetero_edges():
    papers = torch.arange(PAPERS)
    return {WRITES: torch.stack([papers % AUTHORS, papers]), REV_WRITES: torch.stack([papers, papers % AUTHORS])}


def hetero_features(store_cls=LocalFeatureStore, node_types=("paper", "author")):
    generator = torch.Generator().manual_seed(0)
    counts = {"paper": PAPERS, "author": AUTHORS}
    widths = {"paper": 4, "author": 3}
    return store_cls.from_hetero_data(
        {t: torch.arange(counts[t]) for t in node_types},
        x_dict={t: torch.randn(counts[t], widths[t], generator=generator) for t in node_types},
        y_dict={"paper": torch.arange(PAPERS) % 3} if "paper" in node_types else None)


def hetero_graph(store_cls=LocalGraphStore):
    edges = hetero_edges()
    return store_cls.from_hetero_data({t: torch.arange(e.size(1)) for t, e in edges.items()}, edges,
                                      {"paper": PAPERS, "author": AUTHORS})


# Reference implementations ---------------------------------------------------

def reference_homo():
    """PyG's LocalFeatureStore/LocalGraphStore built with from_data."""
    return homo_features(), homo_graph()


def reference_hetero():
    """PyG's LocalFeatureStore/LocalGraphStore built with from_hetero_data."""
    return hetero_features(), hetero_graph()


def reference_feature_store():
    return homo_features()


def reference_graph_store():
    return homo_graph()


# Write recorder: proves writes happen only with --write-check ---------------

def _record_write(store, what):
    marker = os.environ.get("STORE_WRITE_MARKER")
    if marker and store.__dict__.get("recording"):
        with open(marker, "a") as handle:
            handle.write(what + "\n")


def recording_writes(base, *methods):
    """A subclass of `base` whose `methods` (its writes) each note their call, then do what `base` does."""
    def recorded(name):
        original = getattr(base, name)

        def method(self, *args):
            _record_write(self, name.lstrip("_"))
            return original(self, *args)
        return method
    return type("Guarded" + base.__name__, (base,), {name: recorded(name) for name in methods})


GuardedFeatureStore = recording_writes(LocalFeatureStore, "_put_tensor", "_remove_tensor")
GuardedGraphStore = recording_writes(LocalGraphStore, "_put_edge_index", "_remove_edge_index")


def guarded_feature_store():
    """The homogeneous reference feature store; writes after construction are recorded."""
    store = homo_features(GuardedFeatureStore)
    store.__dict__["recording"] = True
    return store


def guarded_graph_store():
    """The homogeneous reference graph store; writes after construction are recorded."""
    store = homo_graph(GuardedGraphStore)
    store.__dict__["recording"] = True
    return store


def guarded_hetero():
    """The heterogeneous reference pair; writes after construction are recorded."""
    feature_store, graph_store = hetero_features(GuardedFeatureStore), hetero_graph(GuardedGraphStore)
    feature_store.__dict__["recording"] = graph_store.__dict__["recording"] = True
    return feature_store, graph_store


# Broken on purpose ------------------------------------------------------------

class CastingFeatureStore(LocalFeatureStore):
    def _get_tensor(self, attr):
        tensor = super()._get_tensor(attr)
        if tensor is not None and attr.index is not None and tensor.is_floating_point():
            return tensor.double()  # indexed reads come back as float64
        return tensor


def wrong_dtype():
    """Indexed reads of 'x' return float64 while the stored tensor is float32."""
    return homo_features(CastingFeatureStore), homo_graph()


class ListFeatureStore(LocalFeatureStore):
    def _get_tensor(self, attr):
        tensor = super()._get_tensor(attr)
        if tensor is None:
            return None
        return tensor.tolist() if attr.attr_name == "x" else tensor.numpy()


def lists_not_tensors():
    """'x' comes back as a Python list and 'y' as a numpy array."""
    return homo_features(ListFeatureStore), homo_graph()


def mismatched_rows():
    """'y' has one row fewer than 'x' and than the graph's node count."""
    return homo_features(num_labels=NUM_NODES - 1), homo_graph()


def unsorted_edges():
    """writes: claims CSC but holds unsorted COO ids; rev_writes: COO claimed sorted but
    unsorted; cites: float edge indices; published_in: names 'venue', which has no features."""
    graph_store = LocalGraphStore()
    graph_store.meta = {"is_hetero": True}
    edges = hetero_edges()
    shuffled = torch.tensor([3, 7, 1, 9, 0, 5, 2, 8, 4, 6])
    writes = edges[WRITES][:, shuffled]
    graph_store.put_edge_index((writes[0], writes[1]), edge_type=WRITES, layout="csc", size=(AUTHORS, PAPERS))
    rev_writes = edges[REV_WRITES][:, shuffled.flip(0)]
    graph_store.put_edge_index((rev_writes[0], rev_writes[1]), edge_type=REV_WRITES, layout="coo",
                               is_sorted=True, size=(PAPERS, AUTHORS))
    papers = torch.arange(PAPERS, dtype=torch.float32)
    graph_store.put_edge_index((papers, (papers + 1) % PAPERS), edge_type=CITES, layout="coo",
                               size=(PAPERS, PAPERS))
    graph_store.put_edge_index((torch.arange(PAPERS), torch.zeros(PAPERS, dtype=torch.long)),
                               edge_type=PUBLISHED_IN, layout="coo", size=(PAPERS, 1))
    return hetero_features(), graph_store


class ListingTooMuchFeatureStore(LocalFeatureStore):
    def get_all_tensor_attrs(self):
        return super().get_all_tensor_attrs() + [self._tensor_attr_cls.cast(None, "train_mask")]


def missing_attrs():
    """get_all_tensor_attrs lists 'train_mask', which the store does not hold."""
    return homo_features(ListingTooMuchFeatureStore), homo_graph()


class HangingFeatureStore(LocalFeatureStore):
    def get_all_tensor_attrs(self):
        time.sleep(3600)  # a remote service that never answers


def hanging():
    """get_all_tensor_attrs never returns."""
    return homo_features(HangingFeatureStore), homo_graph()


def not_a_store():
    """The feature 'store' is a plain dict."""
    return {"x": torch.zeros(NUM_NODES, 4)}, homo_graph()


class StickyFeatureStore(LocalFeatureStore):
    def _remove_tensor(self, attr):
        return True  # claims success, removes nothing


def sticky_writes():
    """remove_tensor reports success but keeps the tensor."""
    return homo_features(StickyFeatureStore), homo_graph()


def broken_factory():
    """Building the stores raises, as when the feature service is unreachable."""
    raise ConnectionError("cannot reach feature service at feature-db:7000")


class SubtleFeatureStore(LocalFeatureStore):
    def _get_tensor(self, attr):
        if attr.attr_name == "__pyg_contract_missing__":
            return torch.zeros(0)  # an absent attribute looks present
        if attr.attr_name == "x" and isinstance(attr.index, torch.Tensor):
            attr.index = attr.index.sort().values  # rows come back in id order, not index order
        return super()._get_tensor(attr)

    def _get_tensor_size(self, attr):
        size = super()._get_tensor_size(attr)
        return (size[0] + 1, *size[1:]) if attr.attr_name == "y" else size


def subtle():
    """Indexed reads of 'x' sorted, get_tensor_size of 'y' one row too many, a missing
    attribute returns an empty tensor, and the graph store's meta is None."""
    graph_store = LocalGraphStore()  # filled by hand: meta stays None
    edges = ring_edges()
    graph_store.put_edge_index((edges[0], edges[1]), edge_type=None, layout="coo", size=(NUM_NODES, NUM_NODES))
    return homo_features(SubtleFeatureStore), graph_store

