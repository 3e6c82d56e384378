#!/usr/bin/env python3
"""Check that a custom PyG FeatureStore/GraphStore pair honours PyG's contract.

A store that returns the wrong shape, dtype or row order usually breaks only
deep inside NeighborLoader, often on another machine and hours into a job.
This checker calls the stores the way PyG's loaders do, compares what comes
back with what PyG expects, samples one real NeighborLoader batch over the
pair when a sampling backend works (in the main process, then again in a
forked loader worker, as num_workers >= 1 runs it), and prints one JSON
document with findings (each with evidence, a fix and a docs anchor).

Store calls run in the thread that built the stores, as under PyG's loader
with num_workers=0, so thread-bound clients (sqlite3, most database drivers)
work as they do in training.

Read-only by default: only get_* calls are made. Write checks (put, overwrite,
remove on a scratch attribute, restoring what was there) run only with
--write-check. The stores, and PyG's sampler on their data, run in a child
process (the shared sandbox, diagnostics_core); every call is bounded in wall
time, so a segfaulting, hanging or daemonising store yields a finding instead
of a crash, a hang or a stray process.
"""

import json
import os
import re
import sys
import time

sys.dont_write_bytecode = True  # importing the shared library must not write scripts/__pycache__
if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diagnostics_core import calls, cli, sandbox  # noqa: E402
from diagnostics_core.calls import CallSkipped, CallTimeout, CallerState, error_text, type_name  # noqa: E402
from diagnostics_core.contract import Tool, script_command  # noqa: E402
from diagnostics_core.markdown import stderr_line  # noqa: E402
from diagnostics_core.text import quote, safe_str, sanitise_text, write_json  # noqa: E402

SCHEMA_VERSION = "1.0"
CHECKER_VERSION = "1.0.0"
CHILD_FLAG = "--internal-child-run"  # not a user flag: marks the child process

DEFAULT_TIMEOUT = 10.0
DEFAULT_SETUP_TIMEOUT = 120.0
FULL_READ_LIMIT = 10_000_000  # elements; bigger tensors are checked row by row
MAX_ATTRS = 200  # attributes checked one by one; the rest are only listed
SCRATCH_NAME = "__pyg_contract_scratch__"
MISSING_NAME = "__pyg_contract_missing__"
SCRATCH_EDGE_TYPE = (SCRATCH_NAME, "to", SCRATCH_NAME)
MISSING_EDGE_TYPE = (MISSING_NAME, "to", MISSING_NAME)
MAIN_CHECKER = script_command("check_sampling_backends.py", "--require-neighbor-backend")

# Every finding this checker can emit: id -> (default severity, title).
FINDINGS = {
    "store-factory-failed": ("error", "the store reference could not be imported, called or unpacked"),
    "store-wrong-base-class": ("error", "an object is not a PyG FeatureStore/GraphStore subclass"),
    "store-call-failed": ("error", "a store method PyG relies on raised"),
    "store-call-timeout": ("error", "a store call did not return within the time bound"),
    "store-tensor-attrs-malformed": ("error", "get_all_tensor_attrs() returns something PyG cannot use"),
    "store-edge-attrs-malformed": ("error", "get_all_edge_attrs() returns something PyG cannot use"),
    "store-no-edges": ("error", "the graph store lists no edges"),
    "store-no-features": ("warning", "the feature store lists no tensors"),
    "store-listed-attr-missing": ("error", "an attribute the store lists cannot be read back"),
    "store-tensor-not-tensor": ("error", "a read returns something other than a torch.Tensor"),
    "store-dtype-inconsistent": ("error", "the same feature comes back with different dtypes"),
    "store-row-count-mismatch": ("error", "row counts disagree between attributes or with the graph"),
    "store-tensor-size-mismatch": ("error", "get_tensor_size() disagrees with the tensor"),
    "store-indexed-read-wrong": ("error", "an indexed read returns the wrong rows"),
    "store-edge-index-shape": ("error", "an edge index has the wrong structure or shape"),
    "store-edge-index-dtype": ("error", "an edge index is not an integer tensor pair of one dtype"),
    "store-edge-index-out-of-range": ("error", "an edge index points outside the node count"),
    "store-edge-pointer-invalid": ("error", "a CSR/CSC pointer is not a valid compressed index"),
    "store-edge-sorted-claim-false": ("error", "edges claimed sorted by destination are not"),
    "store-edge-size-missing": ("error", "an edge attribute has no size (node counts)"),
    "store-edge-type-unknown-node-type": ("error", "an edge type names a node type the feature store lacks"),
    "store-homo-hetero-mismatch": ("error", "one store is homogeneous and the other heterogeneous"),
    "store-graph-meta-invalid": ("error", "the graph store's meta attribute breaks PyG's layout conversion"),
    "store-missing-key-behaviour": ("warning", "a missing key is not reported the way PyG expects"),
    "store-edge-features-not-sampled": ("warning", "NeighborLoader will not fetch these edge features"),
    "store-sampling-unavailable": ("warning", "no neighbour-sampling backend: the loader check was skipped"),
    "store-sampling-failed": ("error", "a real NeighborLoader batch over the stores failed or was wrong"),
    "store-fork-unsafe": ("error", "a batch fails or comes back wrong in a forked loader worker (num_workers >= 1) "
                                   "though it works in the main process"),
    "store-write-roundtrip-failed": ("error", "put/overwrite/remove on a scratch attribute misbehaved"),
    "store-write-cleanup-failed": ("error", "the scratch attribute could not be removed again"),
    "store-call-crashed": ("error", "a store call killed the process (segfault, abort, exit)"),
    "store-usage-error": ("error", "the command line is not valid"),
    "store-reference-not-found": ("error", "the module or callable named on the command line does not exist"),
    "store-stack-missing": ("error", "torch or torch_geometric is not importable in this interpreter"),
    "store-checker-internal-error": ("error", "the checker itself failed"),
}

TOOL = Tool("check_store_contract", CHECKER_VERSION, SCHEMA_VERSION, FINDINGS,
            usage_id="store-usage-error", internal_id="store-checker-internal-error")
finding = TOOL.finding

USAGE = """\
%(prog)s MODULE:CALLABLE [options]
       %(prog)s --feature-store MODULE:CALLABLE --graph-store MODULE:CALLABLE [options]
       %(prog)s --list-findings"""

EPILOG = """\
store references:
  MODULE:CALLABLE    MODULE is a dotted module importable from a --path
                     directory or the current directory (e.g. mypkg.stores),
                     or a path to a .py file (e.g. ./stores.py). CALLABLE
                     (dotted names allowed) is called with no arguments; it
                     may also name a ready object. The positional form must
                     give a (FeatureStore, GraphStore) pair; --feature-store
                     and --graph-store each give one store. Run from the
                     skill's folder, add --path /your/project so that MODULE
                     is found there.

exit codes:
  0  the gate "contract" passed: no error finding (warnings or info may remain)
  1  the gate "contract" failed: at least one error finding
  2  usage error: a bad flag or value, a MODULE or CALLABLE that does not
     exist (store-reference-not-found), or torch/torch_geometric missing in
     this interpreter (store-stack-missing); one line on stderr and a JSON
     document whose finding says so
  3  internal error in the checker; the JSON says so in "findings"

what it guarantees:
  Exactly one JSON document on stdout (anything the stores print goes to
  stderr). Read-only unless --write-check is given: only get_* calls are
  made, and no file, directory (__pycache__ included) or socket is created
  by the checker. The stores run in a child process, each call in the
  thread that built them: a store call that crashes is reported
  (store-call-crashed), one that runs past --timeout is ended even when it
  blocks in C (store-call-timeout), after which no further calls are made.
  One batch also runs in a forked loader worker (store-fork-unsafe when
  only that fails); the worker, and processes the stores start, are ended
  with the child.

examples:
  python scripts/check_store_contract.py mypkg.stores:make_stores --pretty
  python scripts/check_store_contract.py ./stores.py:build --timeout 30
  python scripts/check_store_contract.py --feature-store mypkg.fs:FS --graph-store mypkg.gs:GS
  python scripts/check_store_contract.py mypkg.stores:make_stores --write-check
  python scripts/check_store_contract.py mypkg.stores:make_stores | jq '.findings[] | {id, fix}'
"""


# ---------------------------------------------------------------------------
# Bounded calls into user code
# ---------------------------------------------------------------------------

# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------
# Facts: loading the stores
# ---------------------------------------------------------------------------

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
                        timeout=options.setup_timeout)
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
                                 options.feature_store, options.path, timeout=options.setup_timeout)
            facts["failed_reference"] = options.graph_store
            graph_store = call("%s()" % options.graph_store, build_from_reference,
                               options.graph_store, options.path, timeout=options.setup_timeout)
    except (CallTimeout, CallSkipped):
        facts.update(status="timeout", error="building the stores did not finish in %ss" % options.setup_timeout)
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


# ---------------------------------------------------------------------------
# Facts: tensor attributes
# ---------------------------------------------------------------------------

def gather_tensor_attrs(feature_store, call):
    """Listing facts plus the usable TensorAttr objects."""
    from torch_geometric.data import TensorAttr
    facts = {"status": "ok", "error": None, "returned": None, "items": [], "problems": []}
    try:
        listed = call("feature_store.get_all_tensor_attrs()", feature_store.get_all_tensor_attrs)
    except (CallTimeout, CallSkipped):
        facts["status"] = "timeout"
        return facts, []
    except Exception as error:
        facts.update(status="error", error=error_text(error))
        return facts, []
    facts["returned"] = type_name(listed)
    if not isinstance(listed, (list, tuple)):
        facts["problems"].append("returned %s, not a list of TensorAttr" % type_name(listed))
        try:
            listed = list(listed)
        except TypeError:
            return facts, []
    usable, seen = [], set()
    for item in listed:
        if not isinstance(item, TensorAttr):
            facts["problems"].append("item %r is a %s, not a TensorAttr" % (item, type_name(item)))
            continue
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
        if isinstance(got, torch.Tensor):
            entry["matches"] = same_values(got, expected)
            entry["same_dtype"] = got.dtype == expected.dtype
            entry["same_shape"] = list(got.shape) == list(expected.shape)
            if not entry["matches"] and entry["same_dtype"]:
                entry["misread"] = misread(got, expected, index.tolist())
        facts[key] = entry
    return facts


# ---------------------------------------------------------------------------
# Facts: edge attributes
# ---------------------------------------------------------------------------

def gather_edge_attrs(graph_store, call):
    from torch_geometric.data import EdgeAttr
    from torch_geometric.data.graph_store import EdgeLayout
    facts = {"status": "ok", "error": None, "returned": None, "items": [], "problems": []}
    try:
        listed = call("graph_store.get_all_edge_attrs()", graph_store.get_all_edge_attrs)
    except (CallTimeout, CallSkipped):
        facts["status"] = "timeout"
        return facts, []
    except Exception as error:
        facts.update(status="error", error=error_text(error))
        return facts, []
    facts["returned"] = type_name(listed)
    if not isinstance(listed, (list, tuple)):
        facts["problems"].append("returned %s, not a list of EdgeAttr" % type_name(listed))
        try:
            listed = list(listed)
        except TypeError:
            return facts, []
    usable = []
    for item in listed:
        if not isinstance(item, EdgeAttr):
            facts["problems"].append("item %r is a %s, not an EdgeAttr" % (item, type_name(item)))
            continue
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


# ---------------------------------------------------------------------------
# Facts: missing keys, sampling, writes
# ---------------------------------------------------------------------------

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
        batch = call("NeighborLoader((feature_store, graph_store)) first batch", first_batch,
                     timeout=options.setup_timeout)
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


WORKER_START_S = 10.0  # added to --timeout for a worker's batch: forking and starting the worker
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
    worker_timeout = options.timeout + WORKER_START_S
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
        batch = call(WORKER_CALL, worker_batch, timeout=options.setup_timeout)
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


# ---------------------------------------------------------------------------
# All facts, in order; each section stops cleanly after a timeout
# ---------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------
# Rules: facts -> findings
# ---------------------------------------------------------------------------

def rule_setup(facts, options):
    setup = facts["setup"]
    if setup is None or setup["status"] == "timeout":
        return []  # rule_timeout
    if setup["status"] == "not-found":
        return [finding("store-reference-not-found", {"references": setup["references"],
                                                      "reference": setup["failed_reference"],
                                                      "error": setup["error"], "cwd": os.getcwd(),
                                                      "path": list(options.path)},
                        fix="name a module and callable that exist, and the folder that holds the module: "
                            "%s  # or give a .py file: ./stores.py:make_stores"
                            % TOOL.command(quote(setup["failed_reference"]), "--path", "/your/project"))]
    if setup["status"] == "error":
        module, _, attr_path = setup["failed_reference"].rpartition(":")
        head, _, rest = attr_path.partition(".")
        if module.endswith(".py"):
            target = "runpy.run_path(%r)[%r]%s" % (module, head, "." + rest if rest else "")
            reproduce = "python -c \"import runpy; print(%s())\"" % target
        else:
            reproduce = "python -c \"import %s as m; print(m.%s())\"" % (module, attr_path)
        return [finding("store-factory-failed", {"references": setup["references"], "error": setup["error"],
                                                 "traceback": setup.get("traceback")},
                        fix="%s  # reproduces it; must run from this directory and print the store(s): "
                            "a (FeatureStore, GraphStore) pair, or one store each for --feature-store and "
                            "--graph-store" % reproduce)]
    found = []
    for key, flag, base in (("feature_store", "is_feature_store", "torch_geometric.data.FeatureStore"),
                            ("graph_store", "is_graph_store", "torch_geometric.data.GraphStore")):
        if not setup[key][flag]:
            found.append(finding("store-wrong-base-class", {"store": key, "class": setup[key]["class"],
                                                            "expected_base": base},
                                 fix="derive the class from %s and implement its abstract methods; "
                                     "NeighborLoader rejects anything else" % base))
    return found


def rule_attr_listings(facts, options):
    found = []
    tensor_attrs, edge_attrs = facts["tensor_attrs"], facts["edge_attrs"]
    for listing, name, malformed, fix in (
            (tensor_attrs, "get_all_tensor_attrs", "store-tensor-attrs-malformed",
             "return a list of TensorAttr(group_name, attr_name) objects, one per stored tensor"),
            (edge_attrs, "get_all_edge_attrs", "store-edge-attrs-malformed",
             "return a list of EdgeAttr(edge_type, layout, is_sorted, size) objects, one per stored edge index")):
        if listing is None or listing["status"] == "timeout":
            continue
        if listing["status"] == "error":
            found.append(finding("store-call-failed", {"call": name + "()", "error": listing["error"]},
                                 fix="make %s() return the stored attributes without raising; PyG calls it "
                                     "for every loader" % name))
        elif listing["problems"]:
            found.append(finding(malformed, {"call": name + "()", "problems": listing["problems"][:20]}, fix=fix))
    if edge_attrs and edge_attrs["status"] == "ok" and not edge_attrs.get("count"):
        found.append(finding("store-no-edges", {"listed": edge_attrs["items"]},
                             fix="put at least one edge index; NeighborLoader reads the first listed edge "
                                 "attribute for the node count"))
    if tensor_attrs and tensor_attrs["status"] == "ok" and not tensor_attrs.get("count"):
        found.append(finding("store-no-features", {"listed": tensor_attrs["items"]},
                             fix="put node features (e.g. attr_name='x'); sampled batches will carry none"))
    return found


def rule_tensor_reads(facts, options):
    found = []
    for entry in facts["tensors"]:
        label = {"group": entry["group"], "attr": entry["attr"]}
        full = entry.get("full", {})
        if "error" in full:
            found.append(finding("store-call-failed", dict(label, call="get_tensor(index=None)",
                                                           error=full["error"]),
                                 fix="make get_tensor return the full tensor when index is None"))
        elif full.get("type") == "NoneType":
            found.append(finding("store-listed-attr-missing", dict(label, returned=None),
                                 fix="either store the tensor or stop listing it in get_all_tensor_attrs(); "
                                     "PyG fetches every listed attribute for each batch"))
        elif full and "skipped" not in full and full.get("type") != "torch.Tensor":
            found.append(finding("store-tensor-not-tensor", dict(label, call="get_tensor(index=None)", returned=full),
                                 fix="return torch.Tensor from _get_tensor (wrap with torch.as_tensor); lists "
                                     "and arrays break collation in NeighborLoader"))
        indexed = entry.get("indexed", {})
        if "error" in indexed:
            found.append(finding("store-call-failed", dict(label, call="get_tensor(index=[row])",
                                                           error=indexed["error"]),
                                 fix="support a torch.long index tensor in _get_tensor: NeighborLoader passes "
                                     "the sampled node ids"))
        for key in ("get_tensor", "multi_get_tensor"):
            read = indexed.get(key)
            if not read:
                continue
            call = "%s(index=%s)" % (key, indexed["index"])
            if "error" in read:
                found.append(finding("store-call-failed", dict(label, call=call, error=read["error"]),
                                     fix="support a torch.long index tensor in _get_tensor/_multi_get_tensor: "
                                         "NeighborLoader passes the sampled node ids"))
            elif read.get("type") != "torch.Tensor":
                found.append(finding("store-tensor-not-tensor", dict(label, call=call, returned=read),
                                     fix="return torch.Tensor for indexed reads too"))
            elif not read["same_dtype"]:
                found.append(finding("store-dtype-inconsistent", dict(label, call=call, dtype=read["dtype"],
                                                                      expected_dtype=indexed["expected"]["dtype"]),
                                     fix="return the stored dtype for every read; do not cast indexed reads"))
            elif not read["matches"]:
                found.append(finding("store-indexed-read-wrong", dict(
                    label, call=call, index=indexed["index"], shape=read["shape"],
                    expected_shape=indexed["expected"]["shape"], reference=indexed["reference"],
                    misread=read.get("misread")),
                    fix="return rows in the order of the index, repeats included (row k of the result is row "
                        "index[k]); after one SELECT ... WHERE id IN (...), put the rows back in that order: "
                        "rows = dict(cursor); torch.stack([rows[i] for i in index.tolist()]); do not sort, "
                        "deduplicate or offset the ids"))
        size = entry.get("size", {})
        if full.get("type") not in ("torch.Tensor", None):
            continue  # the size of a missing or non-tensor value says nothing new
        if "error" in size:
            found.append(finding("store-call-failed", dict(label, call="get_tensor_size()", error=size["error"]),
                                 fix="implement _get_tensor_size to return the tensor's shape as a tuple"))
        elif full.get("type") == "torch.Tensor" and size.get("value") != full["shape"]:
            found.append(finding("store-tensor-size-mismatch", dict(label, get_tensor_size=size.get("value"),
                                                                    tensor_shape=full["shape"]),
                                 fix="return the stored tensor's full shape from _get_tensor_size; PyG uses it "
                                     "to count nodes"))
    return found


def node_rows(facts):
    """Rows per node group as the feature store reports them: group -> {attr: rows}."""
    rows = {}
    for entry in facts["tensors"]:
        if entry["kind"] != "node":
            continue
        count = rows_of(entry.get("full", {})) if entry.get("full", {}).get("type") == "torch.Tensor" else None
        if count is None and entry.get("size", {}).get("value"):
            count = entry["size"]["value"][0]
        if count is not None:
            rows.setdefault(json.dumps(entry["group"]), {})[entry["attr"]] = count
    return rows


def rule_dtypes_across_groups(facts, options):
    dtypes = {}
    for entry in facts["tensors"]:
        full = entry.get("full", {})
        if entry["kind"] == "node" and full.get("type") == "torch.Tensor":
            dtypes.setdefault(entry["attr"], {})[json.dumps(entry["group"])] = full["dtype"]
    found = []
    for name, by_group in sorted(dtypes.items()):
        if len(set(by_group.values())) > 1:
            found.append(finding("store-dtype-inconsistent", {"attr": name, "dtype_by_group": by_group},
                                 severity="warning",
                                 fix="store %r with one dtype for every node type (usually float32 for "
                                     "features, int64 for labels); mixed dtypes break shared layers" % name))
    return found


def rule_row_counts(facts, options):
    found = []
    graph_counts = {}
    partitions = ((facts["setup"] or {}).get("feature_store") or {}).get("num_partitions") or 1
    # A partition holds only its own rows, so its counts differ from the global graph by design.
    edges = facts["edges"] if partitions == 1 else []
    for edge in edges:
        if edge["size"] is None:
            continue
        if edge["edge_type"] is None:
            ends = ((None, edge["size"][0]), (None, edge["size"][1]))
        else:
            ends = ((edge["edge_type"][0], edge["size"][0]), (edge["edge_type"][2], edge["size"][1]))
        for node_type, count in ends:
            graph_counts.setdefault(json.dumps(node_type), set()).add(count)
    for group, by_attr in sorted(node_rows(facts).items()):
        counts = graph_counts.get(group, set())
        if len(set(by_attr.values())) > 1 or (counts and set(by_attr.values()) != counts):
            found.append(finding("store-row-count-mismatch", {"group": json.loads(group), "rows_by_attr": by_attr,
                                                              "graph_node_counts": sorted(counts)},
                                 fix="every feature of a node type needs one row per node, and that count must "
                                     "equal the node count in EdgeAttr.size: NeighborLoader indexes features "
                                     "with graph node ids"))
    num_edges = {json.dumps(edge["edge_type"]): edge.get("num_edges") for edge in facts["edges"]}
    for entry in facts["tensors"]:
        if entry["kind"] != "edge" or entry.get("full", {}).get("type") != "torch.Tensor":
            continue
        edge_type = None if entry["group"] in ([None, None], []) else entry["group"]
        expected = num_edges.get(json.dumps(edge_type))
        if expected is not None and rows_of(entry["full"]) != expected:
            found.append(finding("store-row-count-mismatch", {"group": entry["group"], "attr": entry["attr"],
                                                              "rows": rows_of(entry["full"]),
                                                              "num_edges": expected},
                                 fix="an edge feature needs one row per edge of its edge type"))
    return found


def rule_edges(facts, options):
    found = []
    for edge in facts["edges"]:
        label = {"edge_type": edge["edge_type"], "layout": edge["layout"]}
        read = edge.get("read", {})
        if read.get("missing"):
            found.append(finding("store-listed-attr-missing", dict(label, error=read["error"]),
                                 fix="return the edge index for every EdgeAttr listed by get_all_edge_attrs()"))
            continue
        if "error" in read:
            found.append(finding("store-call-failed", dict(label, call="get_edge_index()", error=read["error"]),
                                 fix="make _get_edge_index return the (row, col) pair for listed edge attributes"))
            continue
        if "structure" in edge:
            found.append(finding("store-edge-index-shape", dict(label, problem=edge["structure"], returned=read,
                                                                parts=edge.get("parts")),
                                 fix="return a pair of 1-D tensors: (row, col) for COO, (rowptr, col) for CSR, "
                                     "(row, colptr) for CSC"))
            continue
        if not edge.get("integer") or not edge.get("same_dtype"):
            found.append(finding("store-edge-index-dtype", dict(label, dtypes=[p.get("dtype") for p in edge["parts"]]),
                                 fix="store edge indices as torch.long (int64) tensors, both of one dtype"))
            continue
        found.extend(edge_layout_findings(edge, label))
        if edge["size"] is None:
            homogeneous = edge["edge_type"] is None
            found.append(finding("store-edge-size-missing", label, severity="error" if homogeneous else "warning",
                                 fix="give EdgeAttr a size=(num_src_nodes, num_dst_nodes); "
                                     + ("NeighborLoader computes max(size) for homogeneous stores"
                                        if homogeneous else "PyG otherwise guesses node counts from features")))
    return found


def edge_layout_findings(edge, label):
    found = []
    size = edge["size"]
    if edge["layout"] == "coo" and not edge.get("lengths_match", True):
        found.append(finding("store-edge-index-shape", dict(label, problem="row and col lengths differ",
                                                            parts=edge["parts"]),
                             fix="row and col must have one entry per edge"))
        return found
    out_of_range = []
    for key, limit in (("row_range", size[0] if size else None), ("col_range", size[1] if size else None)):
        span = edge.get(key)
        if span and (span[0] < 0 or (limit is not None and span[1] >= limit)):
            out_of_range.append({"index": key[:3], "min": span[0], "max": span[1], "num_nodes": limit})
    if out_of_range:
        found.append(finding("store-edge-index-out-of-range", dict(label, size=size, problems=out_of_range),
                             fix="node ids must lie in [0, num_nodes) of their node type; check id offsets "
                                 "and EdgeAttr.size"))
    pointer = edge.get("pointer")
    if pointer is not None:
        problems = []
        if pointer["expected_length"] is not None and pointer["length"] != pointer["expected_length"]:
            problems.append("length %d, expected num_nodes + 1 = %d" % (pointer["length"], pointer["expected_length"]))
        if pointer.get("first", 0) != 0:
            problems.append("starts at %s, not 0" % pointer.get("first"))
        if pointer.get("last") is not None and pointer["last"] != pointer["num_edges"]:
            problems.append("ends at %s, not at the %d edges" % (pointer["last"], pointer["num_edges"]))
        if not pointer.get("monotone", True):
            problems.append("decreases somewhere (not sorted)")
        if problems:
            found.append(finding("store-edge-pointer-invalid", dict(label, pointer=pointer, problems=problems),
                                 fix="build the pointer with torch_geometric.utils.index2ptr over indices sorted "
                                     "by destination (CSC) or source (CSR), or store COO with is_sorted=False"))
    if edge["layout"] == "coo" and edge["is_sorted"] and edge.get("sorted_by_destination") is False:
        found.append(finding("store-edge-sorted-claim-false", label,
                             fix="sort by destination (torch_geometric.utils.sort_edge_index(edge_index, "
                                 "sort_by_row=False)) or declare is_sorted=False; a false claim makes PyG "
                                 "build a wrong CSC and sample wrong neighbours"))
    return found


def rule_types(facts, options):
    found = []
    node_groups = {json.dumps(entry["group"]) for entry in facts["tensors"] if entry["kind"] == "node"}
    edge_types = [edge["edge_type"] for edge in facts["edges"]]
    if not edge_types or not node_groups:
        return found
    hetero_graph = all(t is not None for t in edge_types)
    hetero_features = "null" not in node_groups
    if hetero_graph != hetero_features:
        found.append(finding("store-homo-hetero-mismatch", {
            "graph_store": "heterogeneous" if hetero_graph else "homogeneous (edge_type None)",
            "feature_store_groups": sorted(json.loads(g) or "None" for g in node_groups)},
            fix="use group_name=None for features of a homogeneous graph (edge_type=None), or node type names "
                "that match the (src, rel, dst) edge types of a heterogeneous one"))
        return found
    if hetero_graph:
        known = {json.loads(g) for g in node_groups}
        for edge_type in edge_types:
            unknown = [t for t in (edge_type[0], edge_type[2]) if t not in known]
            if unknown:
                found.append(finding("store-edge-type-unknown-node-type", {
                    "edge_type": edge_type, "unknown_node_types": unknown, "feature_store_node_types": sorted(known)},
                    fix="put at least one feature tensor (e.g. 'x') for every node type an edge type names; "
                        "PyG learns node types and counts from the feature store"))
    return found


def rule_graph_meta(facts, options):
    meta = facts["graph_meta"]
    if not meta or not meta["has_meta"] or not facts["edges"]:
        return []
    if meta["type"] != "dict":
        return [finding("store-graph-meta-invalid", {"meta_type": meta["type"]},
                        fix="set graph_store.meta = {'is_hetero': <bool>} (PyG's csc()/csr() call "
                            "graph_store.meta.get('is_hetero') whenever a 'meta' attribute exists)")]
    hetero_graph = all(edge["edge_type"] is not None for edge in facts["edges"])
    if bool(meta["is_hetero"]) != hetero_graph:
        return [finding("store-graph-meta-invalid", {"meta_is_hetero": meta["is_hetero"],
                                                     "edge_types_are_typed": hetero_graph},
                        fix="set graph_store.meta['is_hetero'] = %s to match the stored edge types" % hetero_graph)]
    return []


def rule_missing_keys(facts, options):
    missing = facts["missing_keys"] or {}
    found = []
    feature = missing.get("feature")
    if feature and feature["outcome"] == "returned":
        found.append(finding("store-missing-key-behaviour", {"call": "get_tensor(<missing attr>)", "got": feature},
                             severity="error",
                             fix="return None from _get_tensor for an attribute that does not exist; returning "
                                 "data makes absent features look present"))
    elif feature and feature["outcome"] == "raised":
        found.append(finding("store-missing-key-behaviour", {"call": "get_tensor(<missing attr>)", "got": feature},
                             fix="return None from _get_tensor for a missing attribute (PyG's FeatureStore "
                                 "contract); raising breaks callers that probe for optional features"))
    edge = missing.get("edge")
    if edge and edge["outcome"] == "returned":
        found.append(finding("store-missing-key-behaviour", {"call": "get_edge_index(<missing edge type>)",
                                                             "got": edge}, severity="error",
                             fix="return None from _get_edge_index for an unknown edge type; PyG then raises "
                                 "KeyError"))
    elif edge and edge["outcome"] == "raised" and edge["error_type"] != "KeyError":
        found.append(finding("store-missing-key-behaviour", {"call": "get_edge_index(<missing edge type>)",
                                                             "got": edge},
                             fix="return None from _get_edge_index for an unknown edge type so PyG raises "
                                 "KeyError, which callers catch"))
    return found


def rule_sampling(facts, options):
    sampling = facts["sampling"]
    found = []
    edge_features = [{"group": e["group"], "attr": e["attr"]} for e in facts["tensors"] if e["kind"] == "edge"]
    if edge_features:
        hetero = bool(facts["edges"]) and facts["edges"][0]["edge_type"] is not None
        found.append(finding("store-edge-features-not-sampled", {
            "edge_features": edge_features,
            "effect": "dropped from batches" if hetero else "indexed with node ids, giving one row per node"},
            fix="do not rely on NeighborLoader for edge features of a (FeatureStore, GraphStore) pair: fetch "
                "them yourself with feature_store.get_tensor(edge_type, 'edge_attr', index=batch[...].e_id)"))
    if not sampling or sampling["status"] in ("running", "crashed"):
        return found  # the batch never returned; rule_crash or rule_timeout says why
    if sampling["status"] == "unavailable":
        found.append(finding("store-sampling-unavailable", {
            "pyg_lib": False, "torch_sparse": False, "main_checker_finding": "neighbor-sampling-unavailable"},
            fix="%s  # shows why and the install line; then rerun this check" % MAIN_CHECKER))
    elif sampling["status"] == "failed":
        found.append(finding("store-sampling-failed", {"backend": sampling["backend"], "seeds": sampling["seeds"],
                                                       "input_type": sampling["input_type"],
                                                       "error": sampling["error"],
                                                       "traceback": sampling.get("traceback")},
                             fix="fix the other error findings first; the traceback shows which store call "
                                 "NeighborLoader tripped on"))
    elif sampling["status"] == "wrong":
        found.append(finding("store-sampling-failed", {"backend": sampling["backend"], "seeds": sampling["seeds"],
                                                       "problems": sampling["problems"], "batch": sampling["batch"]},
                             fix="fix the other error findings first; the problems list what the batch got wrong"))
    return found


def rule_write_check(facts, options):
    write = facts["write_check"]
    if not write.get("performed"):
        return []
    if write.get("interrupted"):
        return [finding("store-write-cleanup-failed", {"scratch": [SCRATCH_NAME, list(SCRATCH_EDGE_TYPE)],
                                                       "cleanup": "a store call timed out during the round trip"},
                        fix="check the store for '%s' entries and remove them by hand" % SCRATCH_NAME)]
    found = []
    for key in ("feature_store", "graph_store"):
        result = write.get(key)
        if not result:
            continue
        failed = [step for step in result["steps"] if not step["ok"]]
        if failed:
            found.append(finding("store-write-roundtrip-failed", {"store": key, "failed_steps": failed,
                                                                  "all_steps": [s["step"] for s in result["steps"]]},
                                 fix="_put_tensor must overwrite, _remove_tensor must delete and return True, "
                                     "and get_all_*_attrs must reflect both" if key == "feature_store" else
                                     "_put_edge_index must overwrite, _remove_edge_index must delete, and "
                                     "get_all_edge_attrs must reflect both"))
        if not result["cleanup"]["ok"]:
            scratch = result.get("attr") or json.dumps(result.get("edge_type"))
            found.append(finding("store-write-cleanup-failed", {"store": key, "scratch": scratch,
                                                                "cleanup": result["cleanup"]},
                                 fix="remove the scratch entry %s from the %s by hand" % (scratch, key)))
    return found


def rule_worker_sampling(facts, options):
    worker = facts.get("worker_sampling") or {}
    fix = ("open the connection in the process that uses it: connect lazily on first use and reconnect when "
           "os.getpid() differs from the pid that connected (or open it in the loader's worker_init_fn); "
           "a connection, socket or background I/O thread does not survive fork(). Until then train with "
           "num_workers=0, or pass filter_per_worker=False so features are fetched in the main process")
    if worker.get("status") == "failed":
        return [finding("store-fork-unsafe", {"call": WORKER_CALL, "error": worker.get("error"),
                                              "start_method": worker.get("start_method"),
                                              "in_main_process": "the same batch passed"}, fix=fix)]
    if worker.get("status") == "wrong":
        return [finding("store-fork-unsafe", {"call": WORKER_CALL, "problems": worker.get("problems"),
                                              "start_method": worker.get("start_method"),
                                              "in_main_process": "the same batch passed"}, fix=fix)]
    return []


def rule_crash(facts, options):
    """A store call, or PyG's sampler on the store's data, ended the child process."""
    crash = facts.get("crash")
    if not crash:
        return []
    call = crash.get("call") or calls.NO_CALL_RUNNING
    crash = dict(crash, call=call)
    if call == WORKER_CALL:
        return [finding("store-fork-unsafe", dict(crash, in_main_process="the same batch passed"),
                        fix="the process died while its forked loader worker ran: run the loader with "
                            "num_workers=0 to confirm, then open connections per process (see the docs section)")]
    if call.startswith("NeighborLoader"):
        return [finding("store-sampling-failed", {"crashed": crash, "backend": (facts.get("sampling") or {}).get(
            "backend")}, fix="fix the other error findings first (ids past num_nodes crash the native sampler); "
                             "the signal and stderr_tail show where it died")]
    return [finding("store-call-crashed", crash,
                    fix="run the call named in evidence.call alone to reproduce it (python -X faulthandler "
                        "-c \"...\" prints the native stack); the store or a library it calls crashes or exits")]


def rule_timeout(facts, options, caller):
    if not caller.timed_out:
        return []
    timed_out = dict(caller.timed_out)
    call = timed_out["call"] = timed_out.get("call") or calls.NO_CALL_RUNNING
    bound = timed_out.get("timeout_s") or getattr(options, "timeout", None) or DEFAULT_TIMEOUT
    if call == WORKER_CALL:
        return [finding("store-fork-unsafe", dict(timed_out, in_main_process="the same batch passed"),
                        fix="a forked worker hung on the stores: open connections per process (connect lazily, "
                            "reconnect when os.getpid() changes) or train with num_workers=0")]
    return [finding("store-call-timeout", dict(timed_out, skipped_calls=len(caller.skipped or ())),
                    fix="find out why %s blocks (service down, lock, network); to allow slower calls rerun with "
                        "--timeout %d" % (call, int(float(bound) * 3)))]


RULES = (rule_setup, rule_attr_listings, rule_tensor_reads, rule_dtypes_across_groups, rule_row_counts,
         rule_edges, rule_types, rule_graph_meta, rule_missing_keys, rule_sampling, rule_worker_sampling,
         rule_write_check, rule_crash)


def diagnose(facts, options, caller):
    findings = rule_timeout(facts, options, caller)
    for rule in RULES:
        findings.extend(rule(facts, options))
    return findings  # Tool.document sorts them by severity


# ---------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------

FACT_SECTIONS = ("setup", "tensor_attrs", "tensors", "edge_attrs", "edges", "graph_meta", "missing_keys",
                 "sampling", "worker_sampling", "write_check")


def render(facts, findings, options, caller, started, internal_error=None, usage_error=False):
    # The gate "contract" fails on any error finding; it is not applied when the run never started.
    has_error = any(f["severity"] == "error" for f in findings)
    gates = {} if usage_error or internal_error is not None else {"contract": {"passed": not has_error}}
    meta = {
        "name": TOOL.name,
        "version": CHECKER_VERSION,
        "argv": sys.argv[1:],
        "timeout_s": getattr(options, "timeout", None),
        "setup_timeout_s": getattr(options, "setup_timeout", None),
        "write_check": bool(getattr(options, "write_check", False)),
        "calls": caller.count,
        "skipped_calls": len(caller.skipped),
        "elapsed_s": round(time.time() - started, 3),
        "read_only": not getattr(options, "write_check", False),
        "child": facts.get("child"),
    }
    document, exit_code = TOOL.document(findings, gates, meta, usage_error=usage_error, internal_error=internal_error)
    document["versions"] = facts.get("versions")
    for section in FACT_SECTIONS:
        document[section] = facts.get(section)
    return document, exit_code


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

def build_parser():
    parser = cli.make_parser(
        TOOL, usage=USAGE, epilog=EPILOG,
        description="Validate a custom FeatureStore/GraphStore pair against PyG's CRUD and sampling contract "
                    "before training: attribute listings, tensor types, dtypes, row counts, get_tensor_size, "
                    "indexed reads, edge-index layouts, missing-key behaviour and one real NeighborLoader "
                    "batch. Prints one JSON document with findings (evidence, fix, docs anchor).")
    parser.add_argument("stores", nargs="?", metavar="MODULE:CALLABLE", type=reference,
                        help="callable returning a (FeatureStore, GraphStore) pair")
    parser.add_argument("--feature-store", metavar="MODULE:CALLABLE", type=reference,
                        help="callable returning the FeatureStore (use with --graph-store)")
    parser.add_argument("--graph-store", metavar="MODULE:CALLABLE", type=reference,
                        help="callable returning the GraphStore (use with --feature-store)")
    parser.add_argument("--path", metavar="DIR", action="append", default=[], type=directory,
                        help="directory to import MODULE from, searched before the current directory "
                             "(repeatable); needed when running from the skill's folder")
    parser.add_argument("--write-check", action="store_true",
                        help="also put, overwrite and remove a scratch feature '%s' and a scratch edge type, "
                             "restoring what was there (off by default: the store may be a live service)"
                             % SCRATCH_NAME)
    parser.add_argument("--skip-sampling", action="store_true",
                        help="do not build a NeighborLoader batch over the stores")
    parser.add_argument("--timeout", metavar="SECONDS", type=cli.seconds, default=DEFAULT_TIMEOUT,
                        help="bound on each store call (default %(default)s)")
    parser.add_argument("--setup-timeout", metavar="SECONDS", type=cli.seconds,
                        default=DEFAULT_SETUP_TIMEOUT,
                        help="bound on building the stores and on the NeighborLoader batch (default %(default)s)")
    return parser


def reference(text):
    import argparse
    module_part, colon, attr_path = text.rpartition(":")
    if not colon or not module_part or not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", attr_path):
        raise argparse.ArgumentTypeError("expected MODULE:CALLABLE (e.g. mypkg.stores:make_stores), got %r" % text)
    if module_part.endswith(".py"):
        if not os.path.isfile(module_part):
            raise argparse.ArgumentTypeError("no such file: %r" % module_part)
    elif not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", module_part):
        raise argparse.ArgumentTypeError("%r is neither a dotted module name nor a .py file" % module_part)
    return text


def directory(text):
    import argparse
    if not os.path.isdir(text):
        raise argparse.ArgumentTypeError("--path %r is not a directory" % text)
    return os.path.abspath(text)


class NoOptions:
    """Stand-in for parsed options when the command line itself was the problem."""
    timeout = setup_timeout = None
    write_check = False
    path = ()


def child_main(options_text):
    """The child process: import the stack and the stores, gather the facts, publish them."""
    options, reporter = calls.start_child(options_text)
    caller = calls.BoundedCaller(options.timeout, reporter, thread_name="store-call")
    # urllib3 binds a socket at import time to test for IPv6; the libraries' own
    # import must not open one. The stores themselves may (a remote store).
    importing = {"libraries": True}
    sandbox.refuse_sockets(lambda: importing["libraries"])
    reporter.begin("import torch, torch_geometric", options.setup_timeout)
    versions = library_versions()
    reporter.end()
    importing["libraries"] = False
    reporter.publish("versions", versions)
    facts = gather_facts(options, caller, reporter)
    facts["versions"] = versions
    calls.finish_child(reporter, facts=facts, caller=caller.state())


def run_child(options):
    """Gather the facts in a sandboxed child; -> (facts, CallerState)."""
    facts, done, outcome, timed_out, crash = calls.run_tool_child(__file__, CHILD_FLAG, options, "call")
    if done is not None:
        facts = done["facts"]
        state = CallerState(**done["caller"])
    else:
        state = CallerState(timed_out=timed_out)
        if crash:
            facts["crash"] = crash
            for key in ("sampling", "worker_sampling"):
                if (facts.get(key) or {}).get("status") == "running":
                    facts[key]["status"] = "crashed"
    for key, value in (("setup", None), ("tensor_attrs", None), ("tensors", []), ("edge_attrs", None),
                       ("edges", []), ("graph_meta", None), ("missing_keys", None), ("sampling", None),
                       ("worker_sampling", None), ("write_check", {"performed": False})):
        facts.setdefault(key, value)
    facts["child"] = sandbox.call_child_summary(outcome)
    return facts, state


def library_versions():
    import torch
    import torch_geometric
    return {"python": sys.version.split()[0], "torch": torch.__version__, "torch_geometric": torch_geometric.__version__}


def check_command_line(parser, options):
    if options.stores and (options.feature_store or options.graph_store):
        parser.error("give either MODULE:CALLABLE or --feature-store/--graph-store, not both")
    if not options.stores and not (options.feature_store and options.graph_store):
        parser.error("give MODULE:CALLABLE, or both --feature-store and --graph-store")
    calls.require_torch_stack(TOOL, "store-stack-missing")


def main(argv=None):
    started = time.time()
    parser = build_parser()
    try:
        options = parser.parse_args(argv)
        answered = cli.metadata_command(TOOL, options)
        if answered is not None:
            return answered
        check_command_line(parser, options)
    except cli.UsageError as error:
        document, exit_code = render({}, [error.finding(TOOL)], NoOptions(), CallerState(), started,
                                     usage_error=True)
        return cli.refuse(TOOL, error, document)
    state, facts, findings = CallerState(), {}, []
    try:
        facts, state = run_child(options)
        findings = diagnose(facts, options, state)
        not_found = (facts.get("setup") or {}).get("status") == "not-found"
        document, exit_code = render(facts, findings, options, state, started, usage_error=not_found)
        if not_found:
            stderr_line("check_store_contract.py: error: %s (store-reference-not-found)"
                                               % facts["setup"]["error"])
    except Exception as error:
        import traceback
        document, exit_code = render(facts, findings, options, state, started, internal_error={
            "error": error_text(error), "traceback": traceback.format_exc()[-3000:]})
    write_json(document, options.pretty)
    return exit_code


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == CHILD_FLAG:
        child_main(sys.argv[2])
    sys.exit(main())
