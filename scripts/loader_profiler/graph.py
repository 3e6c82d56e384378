"""The graph a rank profiles (synthetic, a saved Data/HeteroData, or a store pair) and the loader
built on it from the user's settings. Runs in a rank process: this is where user code runs."""

import os
import sys


class InputProblem(Exception):
    """The user's input cannot be profiled; `finding_id` says which finding explains it."""

    def __init__(self, finding_id, evidence):
        Exception.__init__(self, finding_id)
        self.finding_id, self.evidence = finding_id, evidence


def load_graph(spec):
    """-> (data, facts): data is a Data, HeteroData or (FeatureStore, GraphStore)."""
    if spec.get("synthetic"):
        return synthetic_graph(*spec["synthetic"])
    if spec.get("data"):
        return saved_graph(spec["data"])
    return store_pair(spec["store"])


def synthetic_graph(num_nodes, num_edges, num_features):
    """Uniformly random edges: real graphs are skewed, so this measures the loader, not your degrees."""
    import torch
    from torch_geometric.data import Data
    generator = torch.Generator().manual_seed(0)
    data = Data(x=torch.randn(num_nodes, num_features, generator=generator),
                edge_index=torch.randint(0, num_nodes, (2, num_edges), generator=generator),
                y=torch.randint(0, 10, (num_nodes,), generator=generator))
    return data, {"kind": "synthetic", "num_nodes": num_nodes, "num_edges": num_edges,
                  "num_features": num_features, "feature_bytes": tensor_bytes(data)}


def pyg_containers():
    """PyG's own attribute and storage classes that torch.save(data) pickles but PyG does not register
    as safe globals (its torch_load falls back to weights_only=False for them instead). They only
    hold attributes, so allowing them here, for this one load, runs no code from the file."""
    from torch_geometric.data import data as data_module
    from torch_geometric.data import storage
    return [data_module.DataEdgeAttr, data_module.DataTensorAttr, storage.BaseStorage, storage.GlobalStorage,
            storage.NodeStorage, storage.EdgeStorage]


def saved_graph(path):
    """torch.load with weights_only=True only: a file that needs more would run arbitrary code."""
    import pickle
    import torch
    import torch_geometric  # noqa: F401 - registers Data, HeteroData and friends as safe globals
    from torch_geometric.data import Data, HeteroData
    try:
        with open(path, "rb") as handle, torch.serialization.safe_globals(pyg_containers()):
            data = torch.load(handle, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        raise InputProblem("loader-data-unsafe-pickle", {"path": path, "error": short_error(error)})
    except Exception as error:  # noqa: BLE001 - whatever the file makes torch raise
        raise InputProblem("loader-data-load-failed", {"path": path, "error": short_error(error)})
    if not isinstance(data, (Data, HeteroData)):
        raise InputProblem("loader-data-load-failed", {
            "path": path, "error": "the file holds a %s, not a Data or HeteroData" % type(data).__name__})
    facts = {"kind": "hetero" if isinstance(data, HeteroData) else "data", "num_nodes": data.num_nodes,
             "num_edges": data.num_edges, "feature_bytes": tensor_bytes(data)}
    if isinstance(data, HeteroData):
        facts["node_types"], facts["edge_types"] = data.metadata()
    else:
        facts["num_features"] = data.num_node_features
    return data, facts


def store_pair(reference):
    from torch_geometric.data import FeatureStore, GraphStore
    try:
        target = import_reference(reference)
        pair = target() if callable(target) else target
    except Exception as error:  # noqa: BLE001 - the user's module and factory
        raise InputProblem("loader-store-failed", {"store": reference, "error": short_error(error)})
    if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and isinstance(pair[0], FeatureStore)
            and isinstance(pair[1], GraphStore)):
        raise InputProblem("loader-store-failed", {
            "store": reference, "error": "returned %s, not a (FeatureStore, GraphStore) pair" % describe(pair)})
    edge_attrs = pair[1].get_all_edge_attrs()
    return tuple(pair), {"kind": "store", "store": reference, "edge_types": [a.edge_type for a in edge_attrs],
                         "feature_store": type(pair[0]).__name__, "graph_store": type(pair[1]).__name__}


def import_reference(reference):
    """MODULE:CALLABLE or path/file.py:CALLABLE, the module looked up from the current directory first."""
    import importlib
    import importlib.util
    module_part, _, attribute = reference.rpartition(":")
    if module_part.endswith(".py"):
        path = os.path.abspath(module_part)
        sys.path.insert(0, os.path.dirname(path))  # the user's file may import its siblings
        spec = importlib.util.spec_from_file_location("_profiled_store", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        sys.path.insert(0, os.getcwd())
        module = importlib.import_module(module_part)
    target = module
    for name in attribute.split("."):
        target = getattr(target, name)
    return target


def describe(value):
    if isinstance(value, (tuple, list)):
        return "%s of %s" % (type(value).__name__, ", ".join(type(v).__name__ for v in value))
    return "a %s" % type(value).__name__


def short_error(error):
    import re
    text = "%s: %s" % (type(error).__name__, error)
    # torch's weights_only errors open with a long preamble; the cause follows "WeightsUnpickler error:".
    cause = re.search(r"WeightsUnpickler error:\s*(.+?)(?:\n\n|$)", text, re.S)
    if cause:
        text = "%s: weights_only load failed: %s" % (type(error).__name__, cause.group(1).strip())
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) > 1:  # a worker's error quotes its traceback: the first and last lines say it
        text = "%s ... %s" % (lines[0], lines[-1].strip())
    return text[:1500]


def tensor_bytes(data):
    import torch
    return sum(v.numel() * v.element_size() for store in data.stores for v in store.values()
               if isinstance(v, torch.Tensor))


def seed_input(data, spec):
    """The loader's input_nodes or edge_label_index from --input-nodes / --input-edges."""
    from torch_geometric.data import Data, HeteroData
    if spec.get("link"):
        edge_type = spec.get("input_edges")
        if isinstance(data, Data):
            return {"edge_label_index": None}
        if isinstance(data, HeteroData):
            if edge_type is None:
                raise InputProblem("loader-setup-failed", {"error": "a HeteroData needs --input-edges SRC,REL,DST",
                                                           "edge_types": data.edge_types})
            return {"edge_label_index": tuple(edge_type)}
        return {"edge_label_index": (tuple(edge_type) if edge_type else None,
                                     store_edges(data, edge_type))}
    nodes = spec.get("input_nodes")
    node_type, _, attribute = (nodes or "").rpartition(":")
    if isinstance(data, Data):
        if not nodes:
            return {"input_nodes": None}
        return {"input_nodes": data[nodes] if nodes in data else missing(nodes, data.keys())}
    if isinstance(data, HeteroData):
        if not nodes:
            raise InputProblem("loader-setup-failed", {"error": "a HeteroData needs --input-nodes TYPE[:ATTR]",
                                                       "node_types": data.node_types})
        if not node_type:
            return {"input_nodes": attribute}
        store = data[node_type]
        return {"input_nodes": (node_type, store[attribute] if attribute in store else missing(
            attribute, store.keys()))}
    if nodes:  # a store pair: a node type of a heterogeneous store
        return {"input_nodes": nodes}
    import torch
    num_nodes = max(int(store_edges(data, None).max()) + 1, 1)
    return {"input_nodes": torch.arange(num_nodes)}


def store_edges(pair, edge_type):
    attrs = pair[1].get_all_edge_attrs()
    chosen = [a for a in attrs if edge_type is None or tuple(a.edge_type or ()) == tuple(edge_type)]
    if not chosen:
        raise InputProblem("loader-setup-failed", {"error": "the graph store has no edges of %s" % (edge_type,),
                                                   "edge_types": [a.edge_type for a in attrs]})
    row, col = pair[1].get_edge_index(edge_type=chosen[0].edge_type, layout="coo")
    import torch
    return torch.stack([row, col])


def missing(name, keys):
    raise InputProblem("loader-setup-failed", {"error": "no attribute %r to take seeds from" % name,
                                               "attributes": sorted(str(k) for k in keys)})


def build_loader(data, spec, settings, seeds, samplers):
    """A NeighborLoader / LinkNeighborLoader as the user would write it, with `settings` applied.

    The sampler (the graph converted to CSC) is built once per share_memory value and reused,
    so that a configuration's time is the loader's and not the conversion's.
    """
    from torch_geometric.loader import LinkNeighborLoader, NeighborLoader
    from torch_geometric.sampler import NeighborSampler
    share = settings["num_workers"] > 0
    if share not in samplers:
        samplers[share] = NeighborSampler(data, num_neighbors=spec["num_neighbors"], share_memory=share)
    kwargs = dict(seeds, batch_size=spec["batch_size"], shuffle=spec["shuffle"],
                  neighbor_sampler=samplers[share], **loader_kwargs(settings))
    threads = settings.get("worker_threads") or 1
    if share and threads != 1:  # torch's DataLoader gives each worker one thread; this sets it after that
        import functools
        kwargs["worker_init_fn"] = functools.partial(set_worker_threads, threads)
    cls = LinkNeighborLoader if spec.get("link") else NeighborLoader
    return cls(data, num_neighbors=spec["num_neighbors"], **kwargs)


def set_worker_threads(threads, worker_id):
    import torch
    torch.set_num_threads(threads)


LOADER_KEYS = ("num_workers", "persistent_workers", "filter_per_worker", "pin_memory")


def loader_kwargs(settings):
    """The DataLoader/PyG keyword arguments of a configuration (threads are not kwargs)."""
    kwargs = {key: settings[key] for key in LOADER_KEYS if settings.get(key) is not None}
    if not settings["num_workers"]:
        kwargs.pop("persistent_workers", None)  # DataLoader refuses it without workers
    return kwargs


def seeds_in(batch, link):
    """How many seeds (nodes, or labelled edges for a link loader) a mini-batch holds."""
    from torch_geometric.data import HeteroData
    if isinstance(batch, HeteroData):
        stores = [s for s in batch.stores if "input_id" in s]
        return int(stores[0].input_id.numel()) if stores else 0
    return int(batch.input_id.numel())
