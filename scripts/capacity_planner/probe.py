"""The measurement child: runs PyG's own operations at one size and publishes what they cost in memory, reads
a file's or a store's sizes, or (--measure) runs the job itself and samples it (meter.py).

Started by the parent (children.py, for calibrate.py, sizes.py, measure.py and processes.py) as
`plan_capacity.py --internal-child-probe OPTIONS` in the shared sandbox, one fresh interpreter per probe, so a
crash or a hang ends only this child.
Memory is read from /proc/self/status (VmRSS, VmHWM, RssAnon, RssShmem); the peak is reset between
steps through /proc/self/clear_refs ("5" resets VmHWM), so one process measures several steps.
"""

import gc
import os
import sys

from diagnostics_core import calls
from diagnostics_core.sandbox import remove_rendered_templates

STATUS_FIELDS = ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem")


def memory():
    """{field: bytes} of this process from /proc/self/status."""
    found = {}
    with open("/proc/self/status") as status:
        for line in status:
            name, _, rest = line.partition(":")
            if name in STATUS_FIELDS:
                found[name] = int(rest.split()[0]) * 1024
    return found


def reset_peak():
    with open("/proc/self/clear_refs", "w") as handle:  # procfs control file, not a file on disk
        handle.write("5")


class Step(object):
    """Memory before and after one step, and the peak inside it."""

    def __enter__(self):
        gc.collect()
        reset_peak()
        self.before = memory()
        return self

    def __exit__(self, *exc):
        self.after = memory()
        return False

    def record(self):
        return {"peak_bytes": self.after["VmHWM"] - self.before["VmRSS"],
                "steady_bytes": self.after["VmRSS"] - self.before["VmRSS"],
                "shm_bytes": self.after["RssShmem"] - self.before["RssShmem"],
                "anon_bytes": self.after["RssAnon"] - self.before["RssAnon"]}


def tensor_bytes(value):
    import torch
    total = 0
    for store in value.stores:
        for item in store.values():
            if isinstance(item, torch.Tensor):
                total += item.numel() * item.element_size()
    return total


def probe_calibrate(options, reporter):
    """Every calibration measurement in one interpreter (one torch import): the graph steps at each size,
    then the conv layers."""
    import torch
    import torch_geometric
    reporter.publish("versions", {"torch": torch.__version__, "torch_geometric": torch_geometric.__version__,
                                  "python": sys.version.split()[0]})
    reporter.publish("base", memory())
    for nodes, edges in options.sizes:
        reporter.send({"event": "progress", "step": {"kind": "graph", "nodes": nodes, "edges": edges}})
        reporter.append("graphs", graph_steps(nodes, edges, options))
    probe_conv(options, reporter)


def graph_steps(nodes, edges, options):
    """Loader construction (workers or not, sorted or not) and the one-off preprocessing steps (sort,
    ToUndirected, save) on a random graph of the given size; -> the record of each step."""
    import torch
    import torch_geometric.transforms as T
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader
    torch.manual_seed(0)
    features = options.features
    with Step() as built:
        data = Data(x=torch.randn(nodes, features), edge_index=torch.randint(0, nodes, (2, edges)),
                    y=torch.randint(0, 10, (nodes,)))
    record = {"graph": dict(built.record(), tensor_bytes=tensor_bytes(data), nodes=nodes, edges=edges,
                            features=features), "loader": []}

    def loader_steps(graph, is_sorted):
        for workers in options.workers:
            with Step() as step:
                loader = NeighborLoader(graph, num_neighbors=options.fanouts, batch_size=options.batch_size,
                                        num_workers=workers, is_sorted=is_sorted, shuffle=False)
            record["loader"].append(dict(step.record(), workers=workers, is_sorted=is_sorted))
            del loader

    loader_steps(data, False)
    with Step() as step:
        ordered = data.sort(sort_by_row=False)
    record["sort"] = step.record()
    loader_steps(ordered, True)
    del ordered
    copy = data.clone()
    with Step() as step:
        undirected = T.ToUndirected()(copy)  # in place, as a user's pipeline runs it
    record["to_undirected"] = dict(step.record(), edges_after=int(undirected.num_edges))
    del copy, undirected
    with Step() as step:
        torch.save(data.to_dict(), CountingSink())
    record["save"] = step.record()
    del data
    return record


class CountingSink(object):
    """A write-only file object that keeps nothing: torch.save's memory is measured, nothing is written."""

    def __init__(self):
        self.written = 0

    def write(self, data):
        self.written += len(data)
        return len(data)

    def flush(self):
        pass


def make_conv(kind, channels, heads):
    from torch_geometric import nn
    if kind == "sage":
        return nn.SAGEConv(channels, channels)
    if kind == "gcn":
        return nn.GCNConv(channels, channels)
    if kind == "gat":
        return nn.GATConv(channels, channels // heads, heads=heads)
    if kind == "gin":
        import torch
        return nn.GINConv(torch.nn.Sequential(torch.nn.Linear(channels, channels), torch.nn.ReLU(),
                                              torch.nn.Linear(channels, channels)))
    if kind == "transformer":
        return nn.TransformerConv(channels, channels // heads, heads=heads)
    raise ValueError("unknown conv %r" % kind)


def probe_conv(options, reporter):
    """Per conv type and size: bytes autograd keeps for backward (unique storages, inputs and parameters
    excluded) and bytes gathered per edge (aten::index_select allocations, from the profiler)."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    torch.manual_seed(0)
    for kind in options.convs:
        reporter.send({"event": "progress", "step": {"kind": "conv", "conv": kind}})
        for nodes, edges in options.conv_sizes:
            conv = make_conv(kind, options.channels, options.heads)
            remove_rendered_templates()
            x = torch.randn(nodes, options.channels, requires_grad=True)  # an inner layer: its input needs grad
            edge_index = torch.randint(0, nodes, (2, edges))
            excluded = set(t.untyped_storage().data_ptr() for t in [x, edge_index] + list(conv.parameters()))
            saved = {}

            def pack(tensor):
                storage = tensor.untyped_storage()
                if storage.data_ptr() not in excluded:
                    saved[storage.data_ptr()] = storage.nbytes()
                return tensor
            conv(x, edge_index)  # warm-up (caches, lazy init)
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
                    out = conv(x, edge_index)
            gathered = sum(e.cpu_memory_usage for e in prof.events()
                           if e.name == "aten::index_select" and e.cpu_memory_usage > 0)
            out.sum().backward()
            reporter.append("conv", {"conv": kind, "nodes": nodes, "edges": edges, "channels": options.channels,
                                     "heads": options.heads, "saved_bytes": sum(saved.values()),
                                     "gathered_bytes": int(gathered), "output_bytes": out.numel() * 4,
                                     "parameters": sum(p.numel() for p in conv.parameters())})
            del conv, x, edge_index, out, saved


def child_main(options_text):
    options, reporter = calls.start_child(options_text)
    probes = {"calibrate": probe_calibrate, "data": probe_data, "store": probe_store, "measure": probe_measure}
    try:
        probes[options.probe](options, reporter)
    except calls.CallTimeout as error:  # the alarm ended a call that did not return within its bound
        reporter.publish("timed_out", {"call": str(error), "timeout_s": options.timeout})
    except Exception as error:  # the parent turns this into a finding
        reporter.publish("error", calls.error_text(error))
    calls.finish_child(reporter)


def probe_measure(options, reporter):
    """--measure: the planned loader run for real in its launch shape, sampled from outside (meter.py)."""
    from . import meter
    meter.run(options, reporter)


# Names a saved Data or HeteroData names besides what safe_pickle admits for plain tensor files.
PYG_DATA_NAMES = frozenset([
    "torch_geometric.data.data.Data", "torch_geometric.data.data.DataEdgeAttr",
    "torch_geometric.data.data.DataTensorAttr", "torch_geometric.data.storage.GlobalStorage",
    "torch_geometric.data.storage.BaseStorage", "torch_geometric.data.storage.NodeStorage",
    "torch_geometric.data.storage.EdgeStorage", "torch_geometric.data.hetero_data.HeteroData",
    "torch_geometric.data.graph_store.EdgeAttr", "torch_geometric.data.graph_store.EdgeLayout",
    "torch_geometric.data.feature_store.TensorAttr",
])


def probe_data(options, reporter):
    """Sizes of a saved graph: the pickle is scanned without running it, then loaded memory-mapped with
    weights_only=True (PyG's data classes admitted), so no tensor is read."""
    from diagnostics_core import safe_pickle
    scanned = safe_pickle.scan(options.path)
    refused = [name for name in scanned["refused"] if name not in PYG_DATA_NAMES]
    reporter.publish("scan", {"format": scanned["format"], "refused": refused, "error": scanned["error"]})
    if scanned["error"] or refused:
        return
    import torch
    from torch_geometric.data import data, feature_store, graph_store, hetero_data, storage
    torch.serialization.add_safe_globals([
        data.Data, data.DataEdgeAttr, data.DataTensorAttr, storage.GlobalStorage, storage.BaseStorage,
        storage.NodeStorage, storage.EdgeStorage, hetero_data.HeteroData, graph_store.EdgeAttr,
        graph_store.EdgeLayout, feature_store.TensorAttr])
    caller = calls.BoundedCaller(options.timeout, reporter)
    value = caller("torch.load(mmap=True)", torch.load, options.path, mmap=True, weights_only=True,
                   map_location="cpu")
    reporter.publish("sizes", graph_sizes(value))


def tensor_entry(tensor):
    return {"shape": [int(n) for n in tensor.shape], "dtype": str(tensor.dtype).replace("torch.", ""),
            "element_size": tensor.element_size()}


def graph_sizes(value):
    """{"kind", "node_types": {type: {attr: entry}}, "edge_types": {"src,rel,dst": {attr: entry}}}."""
    import torch
    from torch_geometric.data import Data, HeteroData
    if isinstance(value, dict) and all(isinstance(v, torch.Tensor) for v in value.values()) and value:
        value = Data.from_dict(value)
    if isinstance(value, Data):
        attrs = dict((k, tensor_entry(v)) for k, v in value.to_dict().items() if isinstance(v, torch.Tensor))
        nodes = value.num_nodes
        return {"kind": "homo", "nodes": int(nodes) if nodes is not None else None, "attrs": attrs}
    if isinstance(value, HeteroData):
        node_types = dict((t, {"nodes": int(value[t].num_nodes or 0), "attrs": dict(
            (k, tensor_entry(v)) for k, v in value[t].items() if isinstance(v, torch.Tensor))})
            for t in value.node_types)
        edge_types = dict((",".join(t), {"attrs": dict(
            (k, tensor_entry(v)) for k, v in value[t].items() if isinstance(v, torch.Tensor))})
            for t in value.edge_types)
        return {"kind": "hetero", "node_types": node_types, "edge_types": edge_types}
    raise TypeError("holds a %s, not a Data, HeteroData or dict of tensors" % calls.type_name(value))


def probe_store(options, reporter):
    """Sizes from a (FeatureStore, GraphStore) pair: get_tensor_size per attribute and the edge
    attributes' sizes, each call bounded; no tensor is fetched."""
    import importlib
    if options.path:
        sys.path.insert(0, os.path.abspath(options.path))
    caller = calls.BoundedCaller(options.timeout, reporter)
    module_name, _, function_name = options.store.partition(":")
    module = caller("import %s" % module_name, importlib.import_module, module_name)
    pair = caller("%s()" % options.store, getattr(module, function_name))
    if not (isinstance(pair, tuple) and len(pair) == 2):
        raise TypeError("%s returned %s, not a (FeatureStore, GraphStore) pair" % (options.store, calls.type_name(pair)))
    feature_store, graph_store = pair
    features = []
    for attr in caller("feature_store.get_all_tensor_attrs()", feature_store.get_all_tensor_attrs):
        size = caller("feature_store.get_tensor_size(%s)" % attr.attr_name, feature_store.get_tensor_size, attr)
        features.append({"group": str(attr.group_name), "attr": str(attr.attr_name),
                         "shape": [int(n) for n in size] if size is not None else None})
    edges = []
    for attr in caller("graph_store.get_all_edge_attrs()", graph_store.get_all_edge_attrs):
        edges.append({"edge_type": ",".join(attr.edge_type) if isinstance(attr.edge_type, tuple)
                      else str(attr.edge_type), "size": [int(n) for n in attr.size] if attr.size else None,
                      "layout": str(getattr(attr.layout, "value", attr.layout))})
    reporter.publish("sizes", {"kind": "store", "features": features, "edges": edges})
