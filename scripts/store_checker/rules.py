"""Rules: the store facts -> findings, each a small function with a stable id."""

import json
import os
import sys

from diagnostics_core import calls, command
from diagnostics_core.contract import script_command
from .findings import SCRATCH_EDGE_TYPE, SCRATCH_NAME, TOOL, finding
from .gather import LOADER_CALL, WORKER_CALL, rows_of
from .run import rerun_words


MAIN_CHECKER = script_command("check_sampling_backends.py", "--require-neighbor-backend")


# Imports and calls a reference as the checker does; the reference's parts and the --path folders come as
# arguments, never inside the program text.
REPRODUCE = ("import functools, importlib, os, runpy, sys; source, names = sys.argv[1], sys.argv[2].split(\".\"); "
             "py = source.endswith(\".py\"); sys.path[:0] = [os.path.dirname(os.path.abspath(source))] if py else "
             "sys.argv[3:]; found = runpy.run_path(source) if py else vars(importlib.import_module(source)); "
             "print(functools.reduce(getattr, names[1:], found[names[0]])())")


def reproduce_command(reference, options):
    """A command that imports and calls `reference` the way the checker did, from the working folder."""
    module, _, names = reference.rpartition(":")
    return command.line("cd", os.getcwd(), command.Raw("&&"), sys.executable, "-c", REPRODUCE, module, names,
                        list(options.path))


def rule_setup(facts, options):
    setup = facts["setup"]
    if setup is None or setup["status"] in ("timeout", "not-found"):
        return []  # rule_timeout; a reference that names nothing was refused as a usage error
    if setup["status"] == "error":
        return [finding("store-factory-failed", {"references": setup["references"], "error": setup["error"],
                                                 "traceback": setup.get("traceback")},
                        fix="%s  # reproduces it; it must print the store(s): a (FeatureStore, GraphStore) pair, "
                            "or one store each for --feature-store and --graph-store"
                            % reproduce_command(setup["failed_reference"], options))]
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
    for listing, name, malformed, fix, empty, empty_fix in (
            (tensor_attrs, "get_all_tensor_attrs", "store-tensor-attrs-malformed",
             "return a list of TensorAttr(group_name, attr_name) objects, one per stored tensor",
             "store-no-features", "put node features (e.g. attr_name='x'); sampled batches will carry none"),
            (edge_attrs, "get_all_edge_attrs", "store-edge-attrs-malformed",
             "return a list of EdgeAttr(edge_type, layout, is_sorted, size) objects, one per stored edge index",
             "store-no-edges", "put at least one edge index; NeighborLoader reads the first listed edge attribute "
                               "for the node count")):
        if listing is None or listing["status"] == "timeout":
            continue
        if listing["status"] == "error":
            found.append(finding("store-call-failed", {"call": name + "()", "error": listing["error"]},
                                 fix="make %s() return the stored attributes without raising; PyG calls it "
                                     "for every loader" % name))
            continue
        if listing["problems"]:
            found.append(finding(malformed, {"call": name + "()", "problems": listing["problems"][:20]}, fix=fix))
        if listing["status"] == "ok" and not listing.get("count"):
            found.append(finding(empty, {"listed": listing["items"]}, fix=empty_fix))
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
        elif full.get("device") == "meta":
            found.append(meta_finding(label, "get_tensor(index=None)", full))
            continue
        elif full and "skipped" not in full and full.get("type") != "torch.Tensor":
            found.append(finding("store-tensor-not-tensor", dict(label, call="get_tensor(index=None)", returned=full),
                                 fix="return torch.Tensor from _get_tensor (wrap with torch.as_tensor); lists "
                                     "and arrays break collation in NeighborLoader"))
        indexed = entry.get("indexed", {})
        if "single_row" in indexed:
            found.append(meta_finding(label, "get_tensor(index=[row])", indexed["single_row"]))
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
            elif read.get("device") == "meta":
                found.append(meta_finding(label, call, read))
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
                                 fix="store this feature (evidence.attr) with one dtype for every node type "
                                     "(usually float32 for features, int64 for labels); mixed dtypes break "
                                     "shared layers"))
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


def meta_finding(label, call, returned):
    return finding("store-tensor-on-meta-device", dict(label, call=call, returned=returned),
                   fix="return tensors that hold their values (device cpu, or the training GPU): a meta tensor "
                       "(torch.device('meta'), or a model built under `with torch.device('meta')`) has a shape "
                       "but no data, so NeighborLoader cannot collate or index it; load the real tensor in "
                       "_get_tensor / _get_edge_index")


def rule_edges(facts, options):
    return [item for edge in facts["edges"] for item in edge_findings(edge)]


def edge_findings(edge):
    """One listed edge index: the first problem reading it, else what its layout and size say."""
    label = {"edge_type": edge["edge_type"], "layout": edge["layout"]}
    read = edge.get("read", {})
    if read.get("missing"):
        return [finding("store-listed-attr-missing", dict(label, error=read["error"]),
                        fix="return the edge index for every EdgeAttr listed by get_all_edge_attrs()")]
    if "error" in read:
        return [finding("store-call-failed", dict(label, call="get_edge_index()", error=read["error"]),
                        fix="make _get_edge_index return the (row, col) pair for listed edge attributes")]
    if "structure" in edge:
        return [finding("store-edge-index-shape", dict(label, problem=edge["structure"], returned=read,
                                                       parts=edge.get("parts")),
                        fix="return a pair of 1-D tensors: (row, col) for COO, (rowptr, col) for CSR, "
                            "(row, colptr) for CSC")]
    on_meta = [part for part in edge.get("parts") or [] if part.get("device") == "meta"]
    if on_meta:
        return [meta_finding(label, "get_edge_index()", on_meta[0])]
    if not edge.get("integer") or not edge.get("same_dtype"):
        return [finding("store-edge-index-dtype", dict(label, dtypes=[p.get("dtype") for p in edge["parts"]]),
                        fix="store edge indices as torch.long (int64) tensors, both of one dtype")]
    found = edge_layout_findings(edge, label)
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
                                 fix="remove the scratch entry named in evidence.scratch from the store named in "
                                     "evidence.store by hand"))
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
    if call == LOADER_CALL:
        return [finding("store-sampling-failed", {"crashed": crash, "backend": (facts.get("sampling") or {}).get(
            "backend")}, fix="fix the other error findings first (ids past num_nodes crash the native sampler); "
                             "the signal and stderr_tail show where it died")]
    return [finding("store-call-crashed", crash,
                    fix="run the call named in evidence.call alone to reproduce it (python -X faulthandler "
                        "-c \"...\" prints the native stack); the store or a library it calls crashes or exits")]


def rule_timeout(facts, options):
    timed_out = facts["caller"]["timed_out"]
    if not timed_out:
        return []
    timed_out = dict(timed_out)
    call = timed_out["call"] = timed_out.get("call") or calls.NO_CALL_RUNNING
    if call == WORKER_CALL:
        return [finding("store-fork-unsafe", dict(timed_out, in_main_process="the same batch passed"),
                        fix="a forked worker hung on the stores: open connections per process (connect lazily, "
                            "reconnect when os.getpid() changes) or train with num_workers=0")]
    return [finding("store-call-timeout", dict(timed_out, skipped_calls=len(facts["caller"]["skipped"] or ())),
                    fix="find out why the call in evidence.call blocks (service down, lock, network); to allow "
                        "slower calls: %s" % TOOL.command(*rerun_words(options, **longer_bounds(timed_out, options))))]


def longer_bounds(timed_out, options):
    """The flags whose bound the call ran out of (--timeout for store calls, --setup-timeout for building the
    stores and the loader batch), each three times as long."""
    bound = timed_out.get("timeout_s") or options.timeout
    longer = calls.retry_timeout(bound)
    changed = {name: longer for name in ("timeout", "setup_timeout") if getattr(options, name) == bound}
    return changed or {"timeout": longer}


RULES = (rule_timeout, rule_setup, rule_attr_listings, rule_tensor_reads, rule_dtypes_across_groups, rule_row_counts,
         rule_edges, rule_types, rule_graph_meta, rule_missing_keys, rule_sampling, rule_worker_sampling,
         rule_write_check, rule_crash)
