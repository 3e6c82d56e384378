"""The child side: import the user's stores and call them the way PyG does, each call bounded; every
fact is plain data, published as it is gathered."""

import json
import os
import sys

from diagnostics_core import calls, sandbox
from diagnostics_core.calls import CallSkipped, CallTimeout, error_text, type_name
from diagnostics_core.text import safe_str, sanitise_text
from .findings import SCRATCH_EDGE_TYPE, SCRATCH_NAME

FULL_READ_LIMIT = 10_000_000  # elements; bigger tensors are checked row by row
MAX_ATTRS = 200  # attributes checked one by one; the rest are only listed
MISSING_NAME = "__pyg_contract_missing__"
MISSING_EDGE_TYPE = (MISSING_NAME, "to", MISSING_NAME)


def describe(value):
    """Plain description of what a store call returned."""
    import torch
    if isinstance(value, torch.Tensor):
        return {"type": "torch.Tensor", "dtype": str(value.dtype).replace("torch.", ""),
                "shape": list(value.shape), "device": str(value.device)}
    facts = {"type": type_name(value)}
    if hasattr(value, "dtype") and hasattr(value, "shape"):  # numpy and friends
        facts.update(dtype=str(value.dtype), shape=list(value.shape))
    elif isinstance(value, (list, tuple)):
        facts["length"] = len(value)
    return facts


def group_key(group):
    """JSON-friendly name of a feature group or edge type."""
    if group is None:
        return None
    if isinstance(group, (tuple, list)):
        return [group_key(part) for part in group]
    return str(group)


def group_kind(group):
    """'node' for None or a node type, 'edge' for an edge type tuple."""
    return "edge" if isinstance(group, (tuple, list)) else "node"


def holds_no_data(value):
    """A tensor on the meta device has a shape and a dtype but no values: nothing can be compared."""
    import torch
    return isinstance(value, torch.Tensor) and value.device.type == "meta"


def rows_of(description):
    shape = description.get("shape")
    return shape[0] if shape else None


def same_values(a, b):
    import torch
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if torch.equal(a, b):
        return True
    return a.is_floating_point() and bool(torch.isclose(a, b, rtol=0, atol=0, equal_nan=True).all())


def index_rows(num_rows):
    """Rows as loaders ask for them: not sorted (last, first, middle) and with a repeat (disjoint
    sampling asks for a node once per subgraph)."""
    rows = []
    for row in (num_rows - 1, 0, num_rows // 2):
        if 0 <= row < num_rows and row not in rows:
            rows.append(row)
    return rows + rows[1:2] if len(rows) > 1 else rows * 2


# How an indexed read that does not match went wrong, when it is a known mistake: the rows it
# returned, as a function of the requested ids.
MISREADS = (
    ("rows in id order, repeated ids collapsed (what SELECT ... WHERE id IN (...) returns)",
     lambda ids: sorted(set(ids))),
    ("rows in id order", sorted),
    ("repeated ids collapsed", lambda ids: list(dict.fromkeys(ids))),
)


def misread(got, expected, ids):
    """Name the known mistake an indexed read made, or None. `expected` holds the rows of `ids`."""
    first = {}
    for position, node in enumerate(ids):
        first.setdefault(node, position)
    for name, rows_returned in MISREADS:
        wrong = expected[[first[node] for node in rows_returned(ids)]]
        if list(got.shape) == list(wrong.shape) and same_values(got, wrong):
            return name
    return None


def with_index(attr, index):
    import copy
    attr = copy.copy(attr)
    attr.index = index
    return attr


class ReferenceNotFound(Exception):
    """The MODULE or CALLABLE of a reference does not exist (a usage error, not the store's)."""


def import_reference(reference, search_path=()):
    """Import MODULE and resolve CALLABLE of a MODULE:CALLABLE reference.

    Dotted modules are looked up in the --path directories, then the current
    directory, then the usual sys.path.
    """
    import importlib
    import importlib.util
    module_part, _, attr_path = reference.rpartition(":")
    if module_part.endswith(".py"):
        path = os.path.abspath(module_part)
        directory = os.path.dirname(path)
        if directory not in sys.path:
            sys.path.insert(0, directory)  # sibling imports of the user's file
        name = "_store_ref_" + os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    else:
        for directory in reversed([os.path.abspath(d) for d in search_path] + [os.getcwd()]):
            if directory in sys.path:
                sys.path.remove(directory)
            sys.path.insert(0, directory)
        try:
            module = importlib.import_module(module_part)
        except ModuleNotFoundError as error:
            # Only the named module (or a parent package) missing is a usage error;
            # an import the user's module itself makes is the store's failure.
            if error.name and module_part.startswith(error.name) and module_part[len(error.name):][:1] in ("", "."):
                raise ReferenceNotFound("module %r not found in %s" % (
                    module_part, ", ".join([os.path.abspath(d) for d in search_path] + [os.getcwd()]
                                           + ["sys.path"])))
            raise
    target = module
    for depth, name in enumerate(attr_path.split(".")):
        if not hasattr(target, name):
            raise ReferenceNotFound("%s has no attribute %r" % (
                module_part if depth == 0 else module_part + ":" + ".".join(attr_path.split(".")[:depth]), name))
        target = getattr(target, name)
    return target


def build_from_reference(reference, search_path=()):
    from torch_geometric.data import FeatureStore, GraphStore
    target = import_reference(reference, search_path)
    if callable(target) and not isinstance(target, (FeatureStore, GraphStore)):
        return target()
    return target


def gather_setup(options, call):
    """Import and call the references; returns (facts, feature_store, graph_store)."""
    from torch_geometric.data import FeatureStore, GraphStore
    facts = {"references": {}, "status": "ok", "error": None, "failed_reference": None}
    feature_store = graph_store = None
    try:
        if options.stores:
            facts["references"] = {"pair": options.stores}
            facts["failed_reference"] = options.stores  # cleared below once built
            pair = call("%s()" % options.stores, build_from_reference, options.stores, options.path,
                        timeout=options.bounds["setup_s"])
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                facts.update(status="error", error="expected a (FeatureStore, GraphStore) pair, got %s"
                             % json.dumps(describe(pair)))
                return facts, None, None
            feature_store, graph_store = pair
            if isinstance(feature_store, GraphStore) and isinstance(graph_store, FeatureStore):
                facts["swapped"] = True  # tolerate (GraphStore, FeatureStore) but say so
                feature_store, graph_store = graph_store, feature_store
        else:
            facts["references"] = {"feature_store": options.feature_store, "graph_store": options.graph_store}
            facts["failed_reference"] = options.feature_store
            feature_store = call("%s()" % options.feature_store, build_from_reference,
                                 options.feature_store, options.path, timeout=options.bounds["setup_s"])
            facts["failed_reference"] = options.graph_store
            graph_store = call("%s()" % options.graph_store, build_from_reference,
                               options.graph_store, options.path, timeout=options.bounds["setup_s"])
    except (CallTimeout, CallSkipped):
        facts.update(status="timeout", error="building the stores did not finish in %ss" % options.bounds["setup_s"])
        return facts, None, None
    except ReferenceNotFound as error:
        facts.update(status="not-found", error=sanitise_text(safe_str(error), 700))
        return facts, None, None
    except (Exception, SystemExit) as error:  # user code: import errors, sys.exit(), anything
        import traceback
        facts.update(status="error", error=error_text(error),
                     traceback=traceback.format_exc()[-2500:])
        return facts, None, None
    facts["failed_reference"] = None
    facts["feature_store"] = {"class": type_name(feature_store),
                              "is_feature_store": isinstance(feature_store, FeatureStore)}
    facts["graph_store"] = {"class": type_name(graph_store),
                            "is_graph_store": isinstance(graph_store, GraphStore)}
    partitions = getattr(feature_store, "num_partitions", 1)
    facts["feature_store"]["num_partitions"] = partitions if isinstance(partitions, int) else None
    return facts, feature_store, graph_store


def call_listing(call, what, function, kind):
    """(facts, the listed items) of a get_all_*_attrs() call; items None when there is nothing to read."""
    facts = {"status": "ok", "error": None, "returned": None, "items": [], "problems": []}
    try:
        listed = call(what, function)
    except (CallTimeout, CallSkipped):
        facts["status"] = "timeout"
        return facts, None
    except Exception as error:
        facts.update(status="error", error=error_text(error))
        return facts, None
    facts["returned"] = type_name(listed)
    if not isinstance(listed, (list, tuple)):
        facts["problems"].append("returned %s, not a list of %s" % (type_name(listed), kind.__name__))
        try:
            listed = list(listed)
        except TypeError:
            return facts, None
    items = []
    for item in listed:
        if isinstance(item, kind):
            items.append(item)
        else:
            facts["problems"].append("item %r is a %s, not %s %s" % (
                item, type_name(item), "an" if kind.__name__[0] in "AEIOU" else "a", kind.__name__))
    return facts, items


def gather_tensor_attrs(feature_store, call):
    """Listing facts plus the usable TensorAttr objects."""
    from torch_geometric.data import TensorAttr
    facts, listed = call_listing(call, "feature_store.get_all_tensor_attrs()", feature_store.get_all_tensor_attrs,
                                 TensorAttr)
    if listed is None:
        return facts, []
    usable, seen = [], set()
    for item in listed:
        group, name = getattr(item, "group_name", None), getattr(item, "attr_name", None)
        entry = {"group": group_key(group), "attr": name, "kind": group_kind(group)}
        facts["items"].append(entry)
        if not isinstance(name, str):
            facts["problems"].append("attr_name of %r is %s, not a string" % (item, type_name(name)))
            continue
        if group is not None and not isinstance(group, (str, tuple, list)):
            facts["problems"].append("group_name of %r is %s, not None, a node type or an edge type"
                                     % (item, type_name(group)))
            continue
        key = json.dumps([group_key(group), name])
        if key in seen:
            facts["problems"].append("%s is listed twice" % key)
            continue
        seen.add(key)
        usable.append(item)
    facts["count"] = len(usable)
    if len(usable) > MAX_ATTRS:
        facts["checked"] = MAX_ATTRS
    return facts, usable[:MAX_ATTRS]


def read_size(feature_store, attr, call):
    try:
        size = call("feature_store.get_tensor_size(%s)" % attr_label(attr), feature_store.get_tensor_size,
                    with_index(attr, None))
    except Exception as error:
        if isinstance(error, (CallTimeout, CallSkipped)):
            raise
        return {"error": error_text(error)}
    try:
        return {"value": [int(n) for n in size]} if size is not None else {"value": None}
    except TypeError:
        return {"value": None, "returned": type_name(size)}


def attr_label(attr):
    return json.dumps([group_key(attr.group_name), attr.attr_name])


def gather_tensor(feature_store, attr, call):
    """Facts about one listed attribute: size, full read, indexed and multi reads."""
    import torch
    label = attr_label(attr)
    facts = {"group": group_key(attr.group_name), "attr": attr.attr_name, "kind": group_kind(attr.group_name)}
    facts["size"] = read_size(feature_store, attr, call)
    size = facts["size"].get("value")
    elements = None
    if size:
        elements = 1
        for n in size:
            elements *= n
    full = None
    if elements is not None and elements > FULL_READ_LIMIT:
        facts["full"] = {"skipped": "more than %d elements; rows compared with single-row reads"
                                    % FULL_READ_LIMIT}
    else:
        try:
            full = call("feature_store.get_tensor(%s, index=None)" % label, feature_store.get_tensor,
                        with_index(attr, None))
            facts["full"] = describe(full)
        except (CallTimeout, CallSkipped):
            raise
        except Exception as error:
            facts["full"] = {"error": error_text(error)}
        if "error" not in facts["full"] and not isinstance(full, torch.Tensor):
            return facts  # None, a list or an array: nothing further can be compared
        if holds_no_data(full):
            return facts  # rule_meta_device names it; its rows cannot be compared
    num_rows = full.shape[0] if full is not None and full.dim() > 0 else (size[0] if size else None)
    if not num_rows:
        return facts
    rows = index_rows(num_rows)
    index = torch.tensor(rows, dtype=torch.long)
    facts["indexed"] = read_rows(feature_store, attr, index, full, call)
    return facts


def read_rows(feature_store, attr, index, full, call):
    """Indexed get_tensor and multi_get_tensor against the expected rows."""
    import torch
    label = attr_label(attr)
    facts = {"index": index.tolist(), "reference": "full read" if full is not None else "single-row reads"}
    if full is not None:
        expected = full[index]
    else:
        try:
            parts = [call("feature_store.get_tensor(%s, index=[%d])" % (label, row), feature_store.get_tensor,
                          with_index(attr, torch.tensor([row]))) for row in index.tolist()]
        except (CallTimeout, CallSkipped):
            raise
        except Exception as error:
            facts["error"] = "a single-row read raised %s" % error_text(error)
            return facts
        if not all(isinstance(part, torch.Tensor) for part in parts):
            facts["error"] = "single-row reads did not all return tensors"
            return facts
        if any(holds_no_data(part) for part in parts):
            facts["single_row"] = describe(next(part for part in parts if holds_no_data(part)))
            return facts
        expected = torch.cat(parts)
    facts["expected"] = describe(expected)
    for key, read in (("get_tensor", lambda: feature_store.get_tensor(with_index(attr, index))),
                      ("multi_get_tensor", lambda: feature_store.multi_get_tensor([with_index(attr, index)])[0])):
        try:
            got = call("feature_store.%s(%s, index=%s)" % (key, label, index.tolist()), read)
        except (CallTimeout, CallSkipped):
            raise
        except Exception as error:
            facts[key] = {"error": error_text(error)}
            continue
        entry = describe(got)
        if isinstance(got, torch.Tensor) and not holds_no_data(got):
            entry["matches"] = same_values(got, expected)
            entry["same_dtype"] = got.dtype == expected.dtype
            entry["same_shape"] = list(got.shape) == list(expected.shape)
            if not entry["matches"] and entry["same_dtype"]:
                entry["misread"] = misread(got, expected, index.tolist())
        facts[key] = entry
    return facts


def gather_edge_attrs(graph_store, call):
    from torch_geometric.data import EdgeAttr
    from torch_geometric.data.graph_store import EdgeLayout
    facts, listed = call_listing(call, "graph_store.get_all_edge_attrs()", graph_store.get_all_edge_attrs, EdgeAttr)
    if listed is None:
        return facts, []
    usable = []
    for item in listed:
        edge_type, size = item.edge_type, item.size
        entry = {"edge_type": group_key(edge_type), "layout": getattr(item.layout, "value", item.layout),
                 "is_sorted": item.is_sorted, "size": list(size) if isinstance(size, (tuple, list)) else size}
        facts["items"].append(entry)
        if edge_type is not None and not (isinstance(edge_type, (tuple, list)) and len(edge_type) == 3
                                          and all(isinstance(part, str) for part in edge_type)):
            facts["problems"].append("edge_type %r is neither None nor a (src, rel, dst) tuple of strings"
                                     % (edge_type,))
            continue
        if not isinstance(item.layout, EdgeLayout):
            facts["problems"].append("layout %r of %r is not an EdgeLayout" % (item.layout, edge_type))
            continue
        if size is not None and not (isinstance(size, (tuple, list)) and len(size) == 2
                                     and all(isinstance(n, int) and n >= 0 for n in size)):
            facts["problems"].append("size %r of %r is not a pair of node counts" % (size, edge_type))
            continue
        usable.append(item)
    types = [item.edge_type for item in usable]
    if None in types and any(t is not None for t in types):
        facts["problems"].append("mixes the homogeneous edge type None with typed edge types")
    facts["count"] = len(usable)
    return facts, usable


def gather_edge(graph_store, attr, call):
    """Facts about one listed edge attribute's index: structure, dtype, ranges, pointer."""
    import torch
    layout = attr.layout.value
    facts = {"edge_type": group_key(attr.edge_type), "layout": layout, "is_sorted": bool(attr.is_sorted),
             "size": list(attr.size) if attr.size is not None else None}
    try:
        value = call("graph_store.get_edge_index(%s, %s)" % (json.dumps(group_key(attr.edge_type)), layout),
                     graph_store.get_edge_index, attr)
    except (CallTimeout, CallSkipped):
        raise
    except KeyError as error:
        facts["read"] = {"missing": True, "error": error_text(error)}
        return facts
    except Exception as error:
        facts["read"] = {"error": error_text(error)}
        return facts
    facts["read"] = describe(value)
    if isinstance(value, torch.Tensor) and value.dim() == 2 and value.size(0) == 2:
        first, second = value[0], value[1]  # PyG unpacks a [2, E] tensor like a pair
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        first, second = value
    else:
        facts["structure"] = "not a (row, col) pair"
        return facts
    facts["parts"] = [describe(first), describe(second)]
    if not (isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor)):
        facts["structure"] = "pair members are not both torch.Tensor"
        return facts
    if holds_no_data(first) or holds_no_data(second):
        return facts  # rule_meta_device names it; its values cannot be checked
    if first.dim() != 1 or second.dim() != 1:
        facts["structure"] = "pair members are not 1-D"
        return facts
    integer = not first.is_floating_point() and not first.is_complex() and first.dtype != torch.bool
    integer = integer and not second.is_floating_point() and not second.is_complex() and second.dtype != torch.bool
    facts["integer"] = integer
    facts["same_dtype"] = first.dtype == second.dtype
    if not integer:
        return facts
    first, second = first.long(), second.long()
    num_src, num_dst = attr.size if attr.size is not None else (None, None)
    if layout == "coo":
        row, col = first, second
        facts["num_edges"] = row.numel()
        facts["lengths_match"] = row.numel() == col.numel()
        facts["row_range"] = value_range(row)
        facts["col_range"] = value_range(col)
        if row.numel() > 1 and col.numel() == row.numel():
            facts["sorted_by_destination"] = bool((col[1:] >= col[:-1]).all())
    elif layout == "csc":
        row, colptr = first, second
        facts["num_edges"] = row.numel()
        facts["row_range"] = value_range(row)
        facts["pointer"] = pointer_facts(colptr, row.numel(), num_dst)
    else:
        rowptr, col = first, second
        facts["num_edges"] = col.numel()
        facts["col_range"] = value_range(col)
        facts["pointer"] = pointer_facts(rowptr, col.numel(), num_src)
    return facts


def value_range(tensor):
    if tensor.numel() == 0:
        return None
    return [int(tensor.min()), int(tensor.max())]


def pointer_facts(pointer, num_edges, num_nodes):
    facts = {"length": pointer.numel(), "expected_length": None if num_nodes is None else num_nodes + 1,
             "num_edges": num_edges}
    if pointer.numel():
        facts["first"] = int(pointer[0])
        facts["last"] = int(pointer[-1])
        facts["monotone"] = bool((pointer[1:] >= pointer[:-1]).all()) if pointer.numel() > 1 else True
    return facts


def gather_graph_meta(graph_store):
    """PyG's layout conversion reads `graph_store.meta['is_hetero']` when the attribute exists."""
    if not hasattr(graph_store, "meta"):
        return {"has_meta": False}
    meta = graph_store.meta
    facts = {"has_meta": True, "type": type_name(meta)}
    if isinstance(meta, dict):
        facts["is_hetero"] = meta.get("is_hetero", False)
    return facts


def gather_missing_keys(feature_store, graph_store, tensor_attrs, call):
    from torch_geometric.data import EdgeAttr
    facts = {}
    if tensor_attrs:
        probe = with_index(tensor_attrs[0], None)
        probe.attr_name = MISSING_NAME
        facts["feature"] = probe_missing("feature_store.get_tensor(<missing>)",
                                         lambda: feature_store.get_tensor(probe), call)
    missing = EdgeAttr(MISSING_EDGE_TYPE, "coo")
    facts["edge"] = probe_missing("graph_store.get_edge_index(<missing>)",
                                  lambda: graph_store.get_edge_index(missing), call)
    return facts


def probe_missing(what, read, call):
    try:
        value = call(what, read)
    except (CallTimeout, CallSkipped):
        raise
    except Exception as error:
        return {"outcome": "raised", "error_type": type(error).__name__, "error": error_text(error)}
    return {"outcome": "none"} if value is None else {"outcome": "returned", "value": describe(value)}


def sampling_backend():
    """PyG's own criterion for NeighborLoader: pyg-lib first, else torch-sparse."""
    import torch_geometric.typing as pyg_typing
    if pyg_typing.WITH_PYG_LIB:
        return "pyg-lib"
    if pyg_typing.WITH_TORCH_SPARSE:
        return "torch-sparse"
    return None


def choose_seeds(tensor_facts, edge_facts, hetero, count=4):
    """A node type that receives edges (so the batch has neighbours) and its first few ids."""
    rows = {}
    for entry in tensor_facts:
        if entry["kind"] == "node":
            rows.setdefault(json.dumps(entry["group"]), rows_of(entry.get("full", {}))
                            or (entry["size"].get("value") or [None])[0])
    if not hetero:
        num_nodes = rows.get("null")
        if num_nodes is None and edge_facts and edge_facts[0]["size"]:
            num_nodes = max(edge_facts[0]["size"])
        return None, list(range(min(count, num_nodes or 0)))
    for entry in edge_facts:
        dst = entry["edge_type"][2]
        if rows.get(json.dumps(dst)):
            return dst, list(range(min(count, rows[json.dumps(dst)])))
    return None, []


def gather_sampling(feature_store, graph_store, tensor_facts, edge_facts, options, call):
    import torch
    backend = sampling_backend()
    facts = {"backend": backend, "status": None}
    if options.skip_sampling:
        facts["status"] = "skipped-by-flag"
        return facts
    if backend is None:
        facts["status"] = "unavailable"
        return facts
    hetero = bool(edge_facts) and edge_facts[0]["edge_type"] is not None
    input_type, seeds = choose_seeds(tensor_facts, edge_facts, hetero)
    if not seeds:
        facts["status"] = "no-seeds"
        return facts
    facts.update(input_type=input_type, seeds=seeds, num_neighbors=[2, 2], hetero=hetero)

    def first_batch():
        return next(iter(neighbor_loader(feature_store, graph_store, facts)))

    try:
        batch = call(LOADER_CALL, first_batch, timeout=options.bounds["setup_s"])
    except (CallTimeout, CallSkipped):
        raise
    except Exception as error:
        import traceback
        facts.update(status="failed", error=error_text(error), traceback=traceback.format_exc()[-2500:])
        return facts
    facts["status"] = "ok"
    facts["batch"], facts["problems"] = inspect_batch(batch, hetero, input_type, seeds, tensor_facts)
    if facts["problems"]:
        facts["status"] = "wrong"
    return facts


def neighbor_loader(feature_store, graph_store, sampling, **worker_options):
    import warnings
    import torch
    from torch_geometric.loader import NeighborLoader
    index = torch.tensor(sampling["seeds"], dtype=torch.long)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the pyg-lib deprecation notice is not the store's fault
        return NeighborLoader((feature_store, graph_store), num_neighbors=sampling["num_neighbors"],
                              input_nodes=(sampling["input_type"], index) if sampling["hetero"] else index,
                              batch_size=len(sampling["seeds"]), shuffle=False, **worker_options)


# The two loader calls, as their crash or timeout records name them (the rules tell them apart by these).
LOADER_CALL = "NeighborLoader((feature_store, graph_store)) first batch"
WORKER_CALL = "NeighborLoader(num_workers=1) first batch in a forked worker"


def gather_worker_sampling(feature_store, graph_store, sampling, tensor_attrs, options, call):
    """One batch through a loader with one forked worker, as training with num_workers >= 1 gets it.

    The worker inherits the stores with whatever connections they hold, samples and fetches the
    features there (filter_per_worker=True), and sends back plain lists: a tensor sent through the
    loader's queue would be shared through a socket, which the read-only promise rules out. The
    rows it got are then compared with the same rows read here, in the main process.
    """
    import multiprocessing
    facts = {"status": None, "num_workers": 1, "start_method": "fork"}
    if sampling.get("status") != "ok":
        facts.update(status="not-run", reason="the batch in the main process did not pass")
        return facts
    if "fork" not in multiprocessing.get_all_start_methods():
        facts.update(status="unavailable", reason="this platform cannot fork")
        return facts
    worker_timeout = options.bounds["worker_loader_s"]
    facts["worker_timeout_s"] = worker_timeout

    def worker_batch():
        loader = neighbor_loader(feature_store, graph_store, sampling, num_workers=1,
                                 multiprocessing_context="fork", filter_per_worker=True,
                                 timeout=worker_timeout, transform=plain_batch)
        iterator = iter(loader)
        try:
            return next(iterator)
        finally:
            end_workers(iterator)

    try:
        batch = call(WORKER_CALL, worker_batch, timeout=options.bounds["setup_s"])
    except (CallTimeout, CallSkipped):
        raise
    except Exception as error:
        facts.update(status="failed", error=worker_error(error))
        return facts
    facts["status"] = "ok"
    facts["problems"] = compare_worker_rows(feature_store, batch, tensor_attrs, call)
    if facts["problems"]:
        facts["status"] = "wrong"
    return facts


def end_workers(iterator):
    """Stop the loader's workers now (joined, then terminated if stuck), not when garbage collected."""
    shutdown = getattr(iterator, "_shutdown_workers", None)  # what DataLoader's own __del__ calls
    if shutdown is not None:
        shutdown()


def plain_batch(batch):
    """Runs in the worker: n_id and node features of each node type as plain lists."""
    from torch_geometric.data import HeteroData
    stores = [(t, batch[t]) for t in batch.node_types] if isinstance(batch, HeteroData) else [(None, batch)]
    plain = []
    for node_type, store in stores:
        features = {}
        for name, value in store.items():
            if name != "n_id" and hasattr(value, "tolist") and hasattr(value, "dtype"):
                features[name] = {"dtype": str(value.dtype).replace("torch.", ""), "values": value.tolist()}
        n_id = getattr(store, "n_id", None)
        plain.append({"group": node_type, "n_id": n_id.tolist() if n_id is not None else None, "features": features})
    return plain


def worker_error(error):
    """The loader's error names the worker's own: keep its first line and the worker's last line."""
    text = safe_str(error)
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) > 2:
        text = "%s ... %s" % (lines[0], lines[-1].strip())
    return sanitise_text("%s: %s" % (type(error).__name__, text), 700)


def compare_worker_rows(feature_store, plain, tensor_attrs, call):
    """The worker's feature rows against the same rows read in this process."""
    import torch
    problems = []
    wanted = {(group_key(attr.group_name), attr.attr_name): attr for attr in tensor_attrs}
    for entry in plain:
        n_id = entry["n_id"]
        if not n_id:
            continue
        for name, feature in sorted(entry["features"].items()):
            attr = wanted.get((group_key(entry["group"]), name))
            if attr is None:
                continue
            got = torch.tensor(feature["values"], dtype=getattr(torch, feature["dtype"]))
            try:
                here = call("feature_store.get_tensor(%s, index=<worker batch n_id>)" % attr_label(attr),
                            feature_store.get_tensor, with_index(attr, torch.tensor(n_id)))
            except (CallTimeout, CallSkipped):
                raise
            except Exception as error:
                problems.append({"attr": name, "group": group_key(entry["group"]),
                                 "problem": "reading the worker's rows here raised %s" % error_text(error)})
                continue
            if not isinstance(here, torch.Tensor) or not same_values(got, here.to(got.dtype) if
                                                                      here.dtype != got.dtype else here):
                problems.append({"attr": name, "group": group_key(entry["group"]), "num_rows": len(n_id),
                                 "problem": "the rows the worker fetched differ from the same rows read in "
                                            "the main process"})
    return problems


def inspect_batch(batch, hetero, input_type, seeds, tensor_facts):
    """Shape facts of a sampled batch and the ways it departs from NeighborLoader's contract."""
    import torch
    problems, summary = [], {}
    node_attrs = {}
    for entry in tensor_facts:
        if entry["kind"] == "node":
            node_attrs.setdefault(entry["group"], []).append(entry["attr"])
    stores = [(node_type, batch[node_type]) for node_type in batch.node_types] if hetero else [(None, batch)]
    counts = {}
    for node_type, store in stores:
        n_id = getattr(store, "n_id", None)
        if not isinstance(n_id, torch.Tensor):
            problems.append("node type %r has no n_id" % (node_type,))
            continue
        counts[node_type] = n_id.numel()
        shapes = {}
        for name in node_attrs.get(node_type, []):
            value = getattr(store, name, None)
            shapes[name] = describe(value)
            if not isinstance(value, torch.Tensor):
                problems.append("feature %r of %r in the batch is %s" % (name, node_type, type_name(value)))
            elif value.dim() == 0 or value.shape[0] != n_id.numel():
                problems.append("feature %r of %r has %s rows for %d sampled nodes"
                                % (name, node_type, list(value.shape)[:1], n_id.numel()))
        summary[str(node_type)] = {"num_nodes": n_id.numel(), "features": shapes}
    seed_store = batch[input_type] if hetero else batch
    n_id = getattr(seed_store, "n_id", None)
    if isinstance(n_id, torch.Tensor) and n_id[:len(seeds)].tolist() != seeds:
        problems.append("the first n_id entries %s are not the seeds %s" % (n_id[:len(seeds)].tolist(), seeds))
    edge_stores = [(edge_type, batch[edge_type]) for edge_type in batch.edge_types] if hetero else [(None, batch)]
    for edge_type, store in edge_stores:
        edge_index = getattr(store, "edge_index", None)
        src, dst = (edge_type[0], edge_type[2]) if edge_type else (None, None)
        key = "__".join(edge_type) if edge_type else "edge_index"
        if not isinstance(edge_index, torch.Tensor) or edge_index.dim() != 2 or edge_index.size(0) != 2:
            problems.append("edge_index of %r is %s, not a [2, E] tensor" % (edge_type, describe(edge_index)))
            continue
        summary[key] = {"edge_index": describe(edge_index)}
        if edge_index.numel() and src in counts and dst in counts:
            if int(edge_index[0].max()) >= counts[src] or int(edge_index[1].max()) >= counts[dst]:
                problems.append("edge_index of %r points past the sampled nodes" % (edge_type,))
    return summary, problems


def gather_write_check(feature_store, graph_store, tensor_attrs, options, call):
    """Put, overwrite and remove a scratch feature and a scratch edge type, then restore."""
    if not options.write_check:
        return {"performed": False}
    facts = {"performed": True, "feature_store": None, "graph_store": None}
    node_attrs = [attr for attr in tensor_attrs if group_kind(attr.group_name) == "node"]
    if node_attrs:
        scratch = with_index(node_attrs[0], None)
        scratch.attr_name = SCRATCH_NAME
        facts["feature_store"] = roundtrip_feature(feature_store, scratch, call)
    facts["graph_store"] = roundtrip_edges(graph_store, call)
    return facts


def roundtrip_feature(feature_store, scratch, call):
    import torch
    steps, label = [], attr_label(scratch)
    first = torch.arange(8, dtype=torch.float32).view(4, 2)
    second = first + 100

    def listed():
        return any(attr.group_name == scratch.group_name and attr.attr_name == SCRATCH_NAME
                   for attr in feature_store.get_all_tensor_attrs())

    def step(name, action, check):
        try:
            result = call("write check: %s %s" % (name, label), action)
            steps.append({"step": name, "ok": bool(check(result))})
        except (CallTimeout, CallSkipped):
            raise
        except Exception as error:
            steps.append({"step": name, "ok": False, "error": error_text(error)})

    previous = call("write check: read %s before" % label, feature_store.get_tensor, scratch)
    try:
        step("put", lambda: feature_store.put_tensor(first, scratch), lambda _: True)
        step("get after put", lambda: feature_store.get_tensor(scratch),
             lambda got: isinstance(got, torch.Tensor) and same_values(got, first))
        step("listed after put", listed, lambda found: found)
        step("overwrite", lambda: feature_store.put_tensor(second, scratch), lambda _: True)
        step("get after overwrite", lambda: feature_store.get_tensor(scratch),
             lambda got: isinstance(got, torch.Tensor) and same_values(got, second))
        step("remove", lambda: feature_store.remove_tensor(scratch), lambda _: True)
        step("get after remove is None", lambda: feature_store.get_tensor(scratch), lambda got: got is None)
        step("not listed after remove", listed, lambda found: not found)
    finally:
        cleanup = restore_feature(feature_store, scratch, previous, call)
    return {"attr": label, "existed_before": previous is not None, "steps": steps, "cleanup": cleanup}


def restore_feature(feature_store, scratch, previous, call):
    """Leave the scratch attribute exactly as found: absent, or holding its old value."""
    try:
        if previous is not None:
            call("write check: restore", feature_store.put_tensor, previous, scratch)
            return {"ok": True, "action": "restored the previous value"}
        if call("write check: final read", feature_store.get_tensor, scratch) is not None:
            call("write check: final remove", feature_store.remove_tensor, scratch)
            if call("write check: final read", feature_store.get_tensor, scratch) is not None:
                return {"ok": False, "action": "scratch attribute still present"}
        return {"ok": True, "action": "scratch attribute absent"}
    except (CallTimeout, CallSkipped):
        return {"ok": False, "action": "cleanup did not finish (time bound)"}
    except Exception as error:
        return {"ok": False, "action": "cleanup raised", "error": error_text(error)}


def roundtrip_edges(graph_store, call):
    import torch
    from torch_geometric.data import EdgeAttr
    steps = []
    attr = EdgeAttr(SCRATCH_EDGE_TYPE, "coo", size=(4, 4))
    first = (torch.tensor([0, 1, 2]), torch.tensor([1, 2, 3]))
    second = (torch.tensor([3, 2]), torch.tensor([0, 1]))

    def read():
        try:
            return graph_store.get_edge_index(attr)
        except KeyError:
            return None

    def matches(got, expected):
        return (isinstance(got, (tuple, list)) and len(got) == 2
                and all(isinstance(a, torch.Tensor) and same_values(a.long(), b) for a, b in zip(got, expected)))

    def listed():
        return any(item.edge_type == SCRATCH_EDGE_TYPE for item in graph_store.get_all_edge_attrs())

    def step(name, action, check):
        try:
            result = call("write check: %s scratch edges" % name, action)
            steps.append({"step": name, "ok": bool(check(result))})
        except (CallTimeout, CallSkipped):
            raise
        except Exception as error:
            steps.append({"step": name, "ok": False, "error": error_text(error)})

    previous = call("write check: read scratch edges before", read)
    try:
        step("put", lambda: graph_store.put_edge_index(first, attr), lambda _: True)
        step("get after put", read, lambda got: matches(got, first))
        step("listed after put", listed, lambda found: found)
        step("overwrite", lambda: graph_store.put_edge_index(second, attr), lambda _: True)
        step("get after overwrite", read, lambda got: matches(got, second))
        step("remove", lambda: graph_store.remove_edge_index(attr), lambda _: True)
        step("get after remove raises KeyError", read, lambda got: got is None)
        step("not listed after remove", listed, lambda found: not found)
    finally:
        try:
            if previous is not None:
                call("write check: restore scratch edges", graph_store.put_edge_index, previous, attr)
                cleanup = {"ok": True, "action": "restored the previous value"}
            elif call("write check: final read", read) is not None:
                call("write check: final remove", graph_store.remove_edge_index, attr)
                still = call("write check: final read", read) is not None
                cleanup = {"ok": not still, "action": "scratch edges still present" if still
                           else "scratch edges absent"}
            else:
                cleanup = {"ok": True, "action": "scratch edges absent"}
        except Exception as error:
            cleanup = {"ok": False, "action": "cleanup failed", "error": error_text(error)}
    return {"edge_type": list(SCRATCH_EDGE_TYPE), "existed_before": previous is not None, "steps": steps,
            "cleanup": cleanup}


def gather_facts(options, call, out):
    """Every fact section in order; `out` (a CallReporter) gets each one as soon as it is known,
    so the parent keeps them if a later call crashes the process."""
    facts = {"setup": None, "tensor_attrs": None, "tensors": [], "edge_attrs": None, "edges": [],
             "graph_meta": None, "missing_keys": None, "sampling": None, "worker_sampling": None,
             "write_check": {"performed": False}}

    def publish(key, value):
        facts[key] = value
        out.publish(key, value)

    def append(key, value):
        facts[key].append(value)
        out.append(key, value)

    setup, feature_store, graph_store = gather_setup(options, call)
    publish("setup", setup)
    if setup["status"] != "ok":
        return facts
    if not (setup["feature_store"]["is_feature_store"] and setup["graph_store"]["is_graph_store"]):
        return facts
    try:
        tensor_attr_facts, tensor_attrs = gather_tensor_attrs(feature_store, call)
        publish("tensor_attrs", tensor_attr_facts)
        edge_attr_facts, edge_attrs = gather_edge_attrs(graph_store, call)
        publish("edge_attrs", edge_attr_facts)
        for attr in tensor_attrs:
            append("tensors", gather_tensor(feature_store, attr, call))
        for attr in edge_attrs:
            append("edges", gather_edge(graph_store, attr, call))
        publish("graph_meta", gather_graph_meta(graph_store))
        publish("missing_keys", gather_missing_keys(feature_store, graph_store, tensor_attrs, call))
        if edge_attrs and not facts["edge_attrs"]["problems"]:
            # Published before the batch: if PyG's sampler crashes on the data, the parent reports it here.
            publish("sampling", {"backend": sampling_backend(), "status": "running"})
            publish("sampling", gather_sampling(feature_store, graph_store, facts["tensors"], facts["edges"],
                                                options, call))
            if facts["sampling"]["status"] == "ok":
                publish("worker_sampling", {"status": "running"})
                publish("worker_sampling", gather_worker_sampling(feature_store, graph_store, facts["sampling"],
                                                                  tensor_attrs, options, call))
        else:
            publish("sampling", {"backend": sampling_backend(), "status": "not-run",
                                 "reason": "the graph store lists no usable edges"})
        if options.write_check:  # replaced below unless a timeout cuts the round trip short
            publish("write_check", {"performed": True, "interrupted": True})
        publish("write_check", gather_write_check(feature_store, graph_store, tensor_attrs, options, call))
    except (CallTimeout, CallSkipped):
        pass  # rule_timeout reports it; the sections gathered so far stay
    return facts


def child_main(options_text):
    """The child process: import the stack and the stores, gather the facts, publish them."""
    options, reporter = calls.start_child(options_text)
    caller = calls.BoundedCaller(options.bounds["call_s"], reporter)
    # urllib3 binds a socket at import time to test for IPv6; the libraries' own
    # import must not open one. The stores themselves may (a remote store).
    importing = {"libraries": True}
    sandbox.refuse_sockets(lambda: importing["libraries"])
    reporter.begin("import torch, torch_geometric", options.bounds["import_s"])
    versions = library_versions()
    reporter.end()
    importing["libraries"] = False
    reporter.publish("versions", versions)
    facts = gather_facts(options, caller, reporter)
    facts["versions"] = versions
    calls.finish_child(reporter, facts=facts, caller=caller.state())


def library_versions():
    import torch
    import torch_geometric
    return {"python": sys.version.split()[0], "torch": torch.__version__, "torch_geometric": torch_geometric.__version__}
