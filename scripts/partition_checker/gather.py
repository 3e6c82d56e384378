"""The child side: read the partition folder the way PyG does (files loaded bounded, pickles scanned
before anything is unpickled, PyG's own from_partition replayed), publishing plain facts."""

import errno
import json
import os
import re

from diagnostics_core import calls, safe_json, safe_pickle, sandbox
from diagnostics_core.calls import CallTimeout, error_text, type_name
from diagnostics_core.text import safe_str, sanitise, sanitise_text

MAX_TYPES = 1000  # node or edge types in META.json; more is not a graph PyG's Partitioner wrote
LIST_SHOWN = 64  # part numbers quoted per layout list
META_MAX_BYTES = 1 << 20
META_MAX_DEPTH = 32
META_KEYS = ("num_parts", "node_types", "edge_types", "node_offset", "is_hetero", "is_sorted")
PART_FILES = ("graph.pt", "node_feats.pt", "edge_feats.pt")
EXAMPLES_SHOWN = 5  # offending ids quoted per problem
FEATURES_SHOWN = 256  # features described per type and part; a file may hold any number
NAME_LIMIT = 256  # characters of a feature name kept



class PickleFallbackNotRun(Exception):
    """PyG would retry with weights_only=False; not done without --allow-pickle."""


class PickleHoldsCode(Exception):
    """--allow-pickle was given, but the scan did not prove the file free of code: not loaded."""

    def __init__(self, scanned):
        Exception.__init__(self, "not loaded: the file names %s" % (
            ", ".join(scanned["refused"][:EXAMPLES_SHOWN]) or scanned["error"]))
        self.scanned = scanned


class OutsideRoot(Exception):
    """A path PyG would read resolves outside ROOT: refused unopened."""


def torch_load_as_pyg(path, allow_pickle):
    """Mirror torch_geometric.io.fs.torch_load (PyG 2.8) for a local file.

    With torch >= 2.4 PyG loads with weights_only=True and retries with
    weights_only=False only when torch's message names add_safe_globals;
    any other UnpicklingError propagates. Older torch: plain torch.load.
    Returns (value, whether the weights_only=False fallback was used).
    """
    import pickle
    import torch
    import torch_geometric.typing
    if not torch_geometric.typing.WITH_PT24:
        with open(path, "rb") as handle:
            return torch.load(handle, None), False
    try:
        with open(path, "rb") as handle:
            return torch.load(handle, None, weights_only=True), False
    except pickle.UnpicklingError as error:
        if "add_safe_globals" not in str(error):
            raise
        if not allow_pickle:
            raise PickleFallbackNotRun(str(error)) from None
    # --allow-pickle: only a file the scan proves free of code, and even then through an unpickler
    # that refuses any other name (the file may change between scan and load).
    scanned = safe_pickle.scan(path)
    if not scanned["safe"]:
        raise PickleHoldsCode(scanned)
    with open(path, "rb") as handle:
        return torch.load(handle, None, weights_only=False, pickle_module=safe_pickle.restricted_pickle_module()), True


class Loaded:
    """What loading one file gave: a value, or why not."""

    def __init__(self, path, status, value=None, error=None, scan=None):
        self.path, self.status, self.value, self.error, self.scan = path, status, value, error, scan

    @property
    def ok(self):
        return self.status in ("ok", "pickle-fallback-loaded")

    def facts(self, root):
        facts = {"path": os.path.relpath(self.path, root), "status": self.status}
        if self.error is not None:
            facts["error"] = error_text(self.error)
        if self.status == "error" and is_defaultdict_rejection(self.error):
            facts["cause"] = "defaultdict-weights-only"
        if self.scan is not None:
            facts["scan"] = self.scan
        return facts


def is_defaultdict_rejection(error):
    text = str(error)
    return "SETITEMS" in text and "defaultdict" in text


def inside(path, root):
    """Whether `path` resolves (symbolic links followed) to ROOT or below it."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def load_file(path, options, call, confined=True):
    """Load one file as PyG would; `confined`: the path comes from the folder (META.json type names)
    and must stay inside ROOT. Labels and seed splits beside ROOT are found by fixed patterns."""
    if confined and not inside(path, options.root):
        return Loaded(path, "outside-root", error=OutsideRoot("%s resolves outside ROOT %s: not opened"
                                                              % (path, os.path.realpath(options.root))))
    if not os.path.exists(path):  # exists, not isfile: a stalled mount or pipe must hit the time bound
        return Loaded(path, "missing")
    try:
        value, fallback = call("torch.load(%s)" % path, torch_load_as_pyg, path, options.allow_pickle)
    except CallTimeout as error:
        return Loaded(path, "timeout", error=error)
    except PickleFallbackNotRun as error:
        return Loaded(path, "pickle-fallback-not-run", error=error, scan=scan_file(path, call))
    except PickleHoldsCode as error:
        return Loaded(path, "pickle-holds-code", error=error, scan=error.scanned)
    except Exception as error:
        # The scan tells code (a file naming os.system is refused by torch too) from a damaged file.
        return Loaded(path, "error", error=error, scan=scan_file(path, call))
    on_meta = meta_tensor_at(value)
    if on_meta is not None:  # a shape and a dtype without values: nothing in it can be checked or trained on
        return Loaded(path, "meta-device", error=MetaTensors("%s is a tensor on the meta device (no values)"
                                                             % on_meta))
    return Loaded(path, "pickle-fallback-loaded" if fallback else "ok", value)


class MetaTensors(Exception):
    """A loaded file holds tensors on the meta device."""


def meta_tensor_at(value, where="the file", depth=0):
    """Where the first tensor on the meta device sits in a loaded value (containers walked, bounded), or None."""
    import torch
    if isinstance(value, torch.Tensor):
        return where if value.device.type == "meta" else None
    if depth > 8:
        return None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) else ()
    for count, (key, item) in enumerate(items):
        if count >= 1000:
            break
        found = meta_tensor_at(item, "%s[%s]" % (where, safe_str(key)[:60]), depth + 1)
        if found is not None:
            return found
    return None


def scan_file(path, call):
    """What unpickling the file would import and call, found without running it (safe_pickle)."""
    try:
        return call("scan(%s)" % path, safe_pickle.scan, path)
    except CallTimeout as error:
        return {"safe": False, "refused": [], "error": "the scan did not finish: %s" % error}


def describe(value):
    import torch
    if isinstance(value, torch.Tensor):
        return {"type": "torch.Tensor", "dtype": str(value.dtype).replace("torch.", ""), "shape": list(value.shape)}
    return {"type": type_name(value)}


def is_index_tensor(value):
    import torch
    return (isinstance(value, torch.Tensor) and value.dim() == 1 and not value.is_floating_point()
            and not value.is_complex() and value.dtype != torch.bool)


def count_outside(ids, upper):
    """How many ids fall outside [0, upper)."""
    if upper is None or ids.numel() == 0:
        return 0
    return int(((ids < 0) | (ids >= upper)).sum())


def examples(ids):
    return ids[:EXAMPLES_SHOWN].tolist()


def edge_type_str(edge_type):
    return "__".join(edge_type) if edge_type is not None else None


def gather_meta(root):
    path = os.path.join(root, "META.json")
    facts = {"present": os.path.isfile(path), "error": None, "content": None, "problems": []}
    if not facts["present"]:
        return facts
    try:  # bounded: a deeply nested or huge META.json is a finding, not a RecursionError
        content = safe_json.load_file(path, META_MAX_BYTES, META_MAX_DEPTH)
    except safe_json.Refused as error:
        facts["error"] = "META.json: %s" % error
        return facts
    facts["content"] = content
    facts["problems"] = meta_problems(content)
    return facts


def meta_problems(meta):
    """Departures from what this PyG's Partitioner writes (partition.py, META.json)."""
    if not isinstance(meta, dict):
        return ["META.json holds a %s, not an object" % type_name(meta)]
    problems = ["key %r is missing" % key for key in META_KEYS if key not in meta]
    num_parts = meta.get("num_parts")
    if "num_parts" in meta and not (isinstance(num_parts, int) and not isinstance(num_parts, bool)
                                    and num_parts >= 1):
        problems.append("num_parts is %r, not a positive integer" % (num_parts,))
    for key in ("is_hetero", "is_sorted"):
        if key in meta and not isinstance(meta[key], bool):
            problems.append("%s is %r, not true or false (PyG tests `is False`)" % (key, meta[key]))
    for key in ("node_types", "edge_types"):
        if isinstance(meta.get(key), list) and len(meta[key]) > MAX_TYPES:
            return problems + ["%s lists %d types; more than %d is not a partition this checker examines"
                               % (key, len(meta[key]), MAX_TYPES)]
    if meta.get("is_hetero") is True:
        node_types = meta.get("node_types")
        if not (isinstance(node_types, list) and node_types and all(isinstance(t, str) for t in node_types)):
            problems.append("node_types is %r, not a non-empty list of names" % (node_types,))
            node_types = []
        elif len(set(node_types)) != len(node_types):
            problems.append("node_types lists a type twice")
        edge_types = meta.get("edge_types")
        if not (isinstance(edge_types, list) and edge_types):
            problems.append("edge_types is %r, not a non-empty list of [src, rel, dst]" % (edge_types,))
        else:
            for edge_type in edge_types:
                if not (isinstance(edge_type, list) and len(edge_type) == 3
                        and all(isinstance(part, str) for part in edge_type)):
                    problems.append("edge type %r is not [src, rel, dst]" % (edge_type,))
                elif node_types and (edge_type[0] not in node_types or edge_type[2] not in node_types):
                    problems.append("edge type %r names a node type missing from node_types" % (edge_type,))
        offsets = meta.get("node_offset")
        if not (isinstance(offsets, list) and all(isinstance(o, int) for o in offsets)
                and len(offsets) == len(node_types or [])):
            problems.append("node_offset is %r, not one integer per node type" % (offsets,))
    elif meta.get("is_hetero") is False:
        for key in ("node_types", "edge_types", "node_offset"):
            if meta.get(key) is not None:
                problems.append("%s is %r in a homogeneous partition (PyG writes null)" % (key, meta[key]))
    return problems


def usable_meta(meta_facts):
    """The META values the rest of the checks can rely on, or None where unusable."""
    meta = meta_facts["content"] if isinstance(meta_facts["content"], dict) else {}
    num_parts = meta.get("num_parts")
    num_parts = num_parts if isinstance(num_parts, int) and not isinstance(num_parts, bool) and num_parts >= 1 \
        else None
    hetero = meta.get("is_hetero") if isinstance(meta.get("is_hetero"), bool) else None
    if any(isinstance(meta.get(key), list) and len(meta[key]) > MAX_TYPES for key in ("node_types", "edge_types")):
        hetero = None  # nothing is loaded for a type list of that size (meta_problems says so)
    node_types = [t for t in meta.get("node_types") or [] if isinstance(t, str)] if hetero else [None]
    edge_types = [tuple(t) for t in meta.get("edge_types") or []
                  if isinstance(t, list) and len(t) == 3 and all(isinstance(p, str) for p in t)] if hetero else [None]
    offsets = meta.get("node_offset") if hetero else None
    return {"num_parts": num_parts, "is_hetero": hetero, "is_sorted": meta.get("is_sorted") is True,
            "node_types": node_types, "edge_types": edge_types,
            "node_offset": offsets if isinstance(offsets, list) else None}


def gather_layout(root, num_parts):
    """part_N/ folders found and expected; lists are cut to LIST_SHOWN entries, each with its count."""
    names = os.listdir(root)
    found = sorted(int(m.group(1)) for m in (re.fullmatch(r"part_(\d+)", name) for name in names)
                   if m and os.path.isdir(os.path.join(root, m.group(0))))
    found_set = set(found)
    missing_count = sum(1 for i in found_set if num_parts and i < num_parts)
    missing_count = (num_parts or 0) - missing_count
    missing = []
    for i in range(num_parts or 0):  # stops after LIST_SHOWN: num_parts may be any integer
        if len(missing) == LIST_SHOWN:
            break
        if i not in found_set:
            missing.append(i)
    unexpected = [i for i in found if num_parts and i >= num_parts]
    misnamed = sorted(name for name in names if re.fullmatch(r"part-?\d+", name))
    return {"num_parts_expected": num_parts or 0,
            "parts_found": found[:LIST_SHOWN], "parts_found_count": len(found),
            "missing": missing, "missing_count": missing_count,
            "unexpected": unexpected[:LIST_SHOWN], "unexpected_count": len(unexpected),
            "misnamed": misnamed[:LIST_SHOWN], "misnamed_count": len(misnamed)}


def map_paths(root, meta):
    """Where this PyG reads the maps from (partition.py load_partition_info)."""
    if meta["is_hetero"]:
        nodes = {t: os.path.join(root, "node_map", "%s.pt" % t) for t in meta["node_types"]}
        edges = {t: os.path.join(root, "edge_map", "%s.pt" % edge_type_str(t)) for t in meta["edge_types"]}
    else:
        nodes = {None: os.path.join(root, "node_map.pt")}
        edges = {None: os.path.join(root, "edge_map.pt")}
    return nodes, edges


def summarize_map(loaded, num_parts, root):
    import torch
    facts = loaded.facts(root)
    if not loaded.ok:
        return facts
    value = loaded.value
    facts.update(describe(value))
    if not is_index_tensor(value):
        facts["problem"] = "not a 1-D integer tensor"
        return facts
    facts["length"] = value.numel()
    if num_parts is not None and value.numel():
        bad = (value < 0) | (value >= num_parts)
        facts["invalid_part_ids"] = int(bad.sum())
        if not bad.any():
            facts["per_part"] = torch.bincount(value, minlength=num_parts).tolist()
    return facts


def extra_type_files(root, meta):
    """Map files present on disk for types META.json does not list."""
    if not meta["is_hetero"]:
        return {}
    extra = {}
    for folder, names in (("node_map", meta["node_types"]), ("edge_map", [edge_type_str(t) for t in meta["edge_types"]])):
        directory = os.path.join(root, folder)
        if os.path.isdir(directory):
            unknown = sorted(f[:-3] for f in os.listdir(directory) if f.endswith(".pt") and f[:-3] not in names)
            if unknown:
                extra[folder] = unknown
    return extra


class Totals:
    """Counts accumulated across parts: how often each node/edge id was stored."""

    def __init__(self, node_counts, edge_counts):
        import torch
        self.nodes = {t: torch.zeros(n, dtype=torch.int32) for t, n in node_counts.items() if n is not None}
        self.edges = {t: torch.zeros(n, dtype=torch.int32) for t, n in edge_counts.items() if n is not None}
        self.edges_stored = {t: 0 for t in edge_counts}
        self.feature_shapes = {}  # (type, name) -> {part: [dtype, trailing shape]}


def add_ids(counter, ids):
    import torch
    inside = ids[(ids >= 0) & (ids < counter.numel())]
    counter += torch.bincount(inside, minlength=counter.numel()).to(counter.dtype)


def summarize_graph(graph, pid, meta, maps, totals):
    """graph.pt of one part: structure, ranges, ownership and sorting, per edge type."""
    if meta["is_hetero"]:
        if not isinstance(graph, dict):
            return {"problem": "graph.pt holds a %s, not a dict keyed by edge type" % type_name(graph)}
        keys = list(graph)
        per_type = {edge_type_str(t): summarize_edges(graph[t], t, pid, meta, maps, totals)
                    for t in keys if isinstance(t, tuple) and len(t) == 3}
        return {"edge_types": sorted(per_type),
                "unknown_keys": sorted(str(k) for k in keys if not (isinstance(k, tuple) and k in meta["edge_types"])),
                "missing_edge_types": sorted(edge_type_str(t) for t in meta["edge_types"] if t not in graph),
                "per_type": per_type}
    return {"per_type": {"edge_index": summarize_edges(graph, None, pid, meta, maps, totals)}}


def summarize_edges(entry, edge_type, pid, meta, maps, totals):
    if not isinstance(entry, dict):
        return {"problem": "holds a %s, not a dict with edge_id/row/col/size" % type_name(entry)}
    missing = [key for key in ("edge_id", "row", "col", "size") if key not in entry]
    if missing:
        return {"problem": "keys %s are missing" % missing}
    row, col, edge_id, size = entry["row"], entry["col"], entry["edge_id"], entry["size"]
    facts = {"row": describe(row), "col": describe(col), "edge_id": describe(edge_id), "size": None}
    if not (is_index_tensor(row) and is_index_tensor(col) and is_index_tensor(edge_id)):
        facts["problem"] = "row, col and edge_id must be 1-D integer tensors"
        return facts
    if not row.numel() == col.numel() == edge_id.numel():
        facts["problem"] = "row, col and edge_id differ in length"
        return facts
    facts["num_edges"] = row.numel()
    try:
        facts["size"] = [int(size[0]), int(size[1])]
    except (TypeError, IndexError, ValueError):
        facts["problem"] = "size is %r, not (num_src_nodes, num_dst_nodes)" % (size,)
        return facts
    src, dst = (edge_type[0], edge_type[2]) if edge_type else (None, None)
    node_counts = {t: m.get("length") for t, m in maps["node"].items()}
    facts["expected_size"] = [node_counts.get(src), node_counts.get(dst)]
    facts["row_out_of_range"] = count_outside(row, facts["size"][0])
    facts["col_out_of_range"] = count_outside(col, facts["size"][1])
    facts["sorted_by_destination"] = bool((col[1:] >= col[:-1]).all()) if col.numel() > 1 else True
    # Edge ids in graph.pt are global across edge types; edge_map/<type>.pt is indexed per type.
    offset = maps["edge_offset"].get(edge_type, 0) if meta["is_hetero"] else 0
    local_id = edge_id - (offset or 0)
    edge_map = maps["edge_values"].get(edge_type)
    facts["edge_ids_out_of_range"] = count_outside(local_id, maps["edge"][edge_type].get("length")
                                                   if edge_type in maps["edge"] else None)
    if edge_map is not None:
        inside = local_id[(local_id >= 0) & (local_id < edge_map.numel())]
        elsewhere = inside[edge_map[inside] != pid]
        facts["edges_mapped_elsewhere"] = elsewhere.numel()
        facts["edges_mapped_elsewhere_examples"] = examples(elsewhere)
    node_map = maps["node_values"].get(dst)
    if node_map is not None:
        owned = col[(col >= 0) & (col < node_map.numel())]
        facts["destination_not_owned"] = int((node_map[owned] != pid).sum())
    if edge_type in totals.edges:
        add_ids(totals.edges[edge_type], local_id)
    totals.edges_stored[edge_type] = totals.edges_stored.get(edge_type, 0) + row.numel()
    facts["local_edge_ids"] = local_id  # dropped before rendering; compared with edge_feats.pt
    return facts


def summarize_node_feats(node_feats, pid, meta, maps, totals):
    if meta["is_hetero"]:
        if not isinstance(node_feats, dict):
            return {"problem": "node_feats.pt holds a %s, not a dict keyed by node type" % type_name(node_feats)}
        per_type = {t: summarize_nodes(node_feats[t], t, pid, meta, maps, totals)
                    for t in node_feats if t in meta["node_types"]}
        return {"unknown_keys": sorted(str(k) for k in node_feats if k not in meta["node_types"]),
                "missing_node_types": sorted(t for t in meta["node_types"] if t not in node_feats),
                "per_type": per_type}
    return {"per_type": {"nodes": summarize_nodes(node_feats, None, pid, meta, maps, totals)}}


def summarize_nodes(entry, node_type, pid, meta, maps, totals):
    if not isinstance(entry, dict) or "global_id" not in entry or "feats" not in entry:
        return {"problem": "not a dict with global_id and feats"}
    global_id = entry["global_id"]
    facts = {"global_id": describe(global_id)}
    if not is_index_tensor(global_id):
        facts["problem"] = "global_id is not a 1-D integer tensor"
        return facts
    facts["num_nodes"] = global_id.numel()
    num_nodes = maps["node"].get(node_type, {}).get("length")
    # Heterogeneous parts store homogeneous ids in global_id and type-local ids in id.
    if meta["is_hetero"]:
        local_id = entry.get("id")
        if not is_index_tensor(local_id) or local_id.numel() != global_id.numel():
            facts["problem"] = "id is missing or not one type-local id per global_id"
            return facts
        offset = maps["node_offset"].get(node_type)
        if offset is not None:
            wrong = global_id - offset != local_id
            facts["offset_mismatches"] = int(wrong.sum())
    else:
        local_id = global_id
    facts["ids_out_of_range"] = count_outside(local_id, num_nodes)
    node_map = maps["node_values"].get(node_type)
    if node_map is not None:
        inside = local_id[(local_id >= 0) & (local_id < node_map.numel())]
        elsewhere = inside[node_map[inside] != pid]
        facts["nodes_mapped_elsewhere"] = elsewhere.numel()
        facts["nodes_mapped_elsewhere_examples"] = examples(elsewhere)
    if node_type in totals.nodes:
        add_ids(totals.nodes[node_type], local_id)
    facts["features"] = summarize_features(entry["feats"], global_id.numel(), node_type, pid, totals)
    if "time" in entry:
        facts["time"] = describe(entry["time"])
        facts["time"]["expected_rows"] = num_nodes
    return facts


def summarize_features(feats, num_rows, group, pid, totals):
    import torch
    if not isinstance(feats, dict):
        return {"problem": "feats holds a %s, not a dict of tensors" % type_name(feats)}
    facts = {}
    if len(feats) > FEATURES_SHOWN:
        facts["problem"] = "holds %d features; the first %d are checked" % (len(feats), FEATURES_SHOWN)
    for name, value in list(feats.items())[:FEATURES_SHOWN]:
        name = sanitise_text(safe_str(name), NAME_LIMIT)  # names come from the file: any size
        entry = describe(value)
        entry["expected_rows"] = num_rows
        facts[name] = entry
        if isinstance(value, torch.Tensor) and value.dim() > 0:
            key = json.dumps([group if not isinstance(group, tuple) else list(group), name])
            totals.feature_shapes.setdefault(key, {})[pid] = [entry["dtype"]] + entry["shape"][1:]
    return facts


def summarize_edge_feats(edge_feats, graph_facts, pid, meta, totals):
    """edge_feats.pt: per edge type, ids must be the part's edges and rows must match them."""
    import torch
    if not isinstance(edge_feats, dict):
        return {"problem": "edge_feats.pt holds a %s, not a dict" % type_name(edge_feats)}
    facts = {"container": type_name(edge_feats), "entries": len(edge_feats)}
    if not edge_feats:
        return facts
    per_type = {}
    entries = edge_feats.items() if meta["is_hetero"] else [(None, edge_feats)]
    for edge_type, entry in entries:
        key = edge_type_str(edge_type) if edge_type else "edge_index"
        if not isinstance(entry, dict) or "global_id" not in entry:
            per_type[str(key)] = {"problem": "no global_id"}
            continue
        global_id = entry["global_id"]
        summary = {"global_id": describe(global_id)}
        graph_ids = graph_facts.get("per_type", {}).get(key, {}).get("local_edge_ids")
        if is_index_tensor(global_id) and graph_ids is not None:
            summary["ids_match_graph"] = global_id.numel() == graph_ids.numel() and bool(
                torch.equal(global_id.sort().values, graph_ids.sort().values))
        rows = global_id.numel() if isinstance(global_id, torch.Tensor) else None
        summary["features"] = summarize_features(entry.get("feats", {}), rows, edge_type, pid, totals)
        if "edge_time" in entry:
            summary["edge_time"] = dict(describe(entry["edge_time"]), expected_rows=rows)
        per_type[str(key)] = summary
    facts["per_type"] = per_type
    return facts


def replay_from_partition(root, pid, cache, options, call):
    """PyG's own from_partition for one part, reading files from `cache`.

    torch_geometric.io.fs.torch_load is swapped for a lookup in what this
    checker already loaded, so PyG runs its real code on the same objects
    without a second read and without unpickling anything unsafe.
    """
    from torch_geometric.distributed import LocalFeatureStore, LocalGraphStore
    from torch_geometric.io import fs

    def cached_torch_load(path, map_location=None):
        key = os.path.abspath(path)
        loaded = cache.get(key)
        if loaded is None:  # a file this checker did not expect PyG to read
            loaded = cache[key] = load_file(key, options, call)
        if loaded.ok:
            return loaded.value
        if loaded.status == "missing":
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        raise loaded.error if loaded.error is not None else OSError("%s: %s" % (path, loaded.status))

    verdict = {}
    original = fs.torch_load
    fs.torch_load = cached_torch_load
    try:
        for store in (LocalGraphStore, LocalFeatureStore):
            if call.reporter:
                call.reporter.begin("%s.from_partition(%r, %d)" % (store.__name__, root, pid), call.timeout)
            try:
                store.from_partition(root, pid)
                verdict[store.__name__] = {"loads": True}
            except PickleFallbackNotRun:
                verdict[store.__name__] = {"loads": None, "reason": "needs weights_only=False (see the "
                                                                    "findings: only a file proven free of code "
                                                                    "may be loaded that way)"}
            except (PickleHoldsCode, OutsideRoot) as error:
                verdict[store.__name__] = {"loads": None, "reason": error_text(error)}
            except CallTimeout:
                verdict[store.__name__] = {"loads": None, "reason": "a file load timed out"}
            except Exception as error:
                verdict[store.__name__] = {"loads": False, "error": error_text(error)}
            finally:
                if call.reporter:
                    call.reporter.end()
    finally:
        fs.torch_load = original
    return verdict


def gather_part(root, pid, meta, maps, totals, cache, options, call):
    part_dir = os.path.join(root, "part_%d" % pid)
    facts = {"index": pid, "present": os.path.isdir(part_dir), "files": {}}
    if not facts["present"]:
        facts["from_partition"] = replay_from_partition(root, pid, cache, options, call)
        return facts
    loaded = {}
    for name in PART_FILES:
        loaded[name] = cache[os.path.abspath(os.path.join(part_dir, name))] = load_file(
            os.path.abspath(os.path.join(part_dir, name)), options, call)
        facts["files"][name] = loaded[name].facts(root)
    if loaded["graph.pt"].ok:
        facts["graph"] = summarize_graph(loaded["graph.pt"].value, pid, meta, maps, totals)
    if loaded["node_feats.pt"].ok:
        facts["nodes"] = summarize_node_feats(loaded["node_feats.pt"].value, pid, meta, maps, totals)
    if loaded["edge_feats.pt"].ok:
        facts["edge_features"] = summarize_edge_feats(loaded["edge_feats.pt"].value, facts.get("graph", {}),
                                                      pid, meta, totals)
    facts["from_partition"] = replay_from_partition(root, pid, cache, options, call)
    for name in PART_FILES:  # free the part before loading the next one
        cache.pop(os.path.abspath(os.path.join(part_dir, name)), None)
    for summary in facts.get("graph", {}).get("per_type", {}).values():
        summary.pop("local_edge_ids", None)
    return facts


def gather_labels(root, meta, maps, options, call):
    import glob
    import torch
    parent = os.path.dirname(os.path.abspath(root.rstrip(os.sep)))
    if options.labels:
        paths, source = [os.path.abspath(options.labels)], "--labels"
    else:
        paths, source = sorted(glob.glob(os.path.join(parent, "*-label", "label.pt"))), "detected"
    node_counts = {t: m.get("length") for t, m in maps["node"].items()}
    results = []
    for path in paths:
        loaded = load_file(path, options, call, confined=False)
        entry = dict(loaded.facts(os.path.dirname(path)), path=path, source=source)
        if loaded.ok:
            entry.update(describe(loaded.value))
            if isinstance(loaded.value, torch.Tensor) and loaded.value.dim() > 0:
                entry["node_type"], entry["expected_rows"] = label_node_type(
                    loaded.value.shape[0], meta, node_counts, options.label_node_type)
        results.append(entry)
    return {"paths_searched": [os.path.join(parent, "*-label", "label.pt")] if not options.labels else paths,
            "labels": results, "features_named_y": [], "seeds": gather_seeds(parent, meta, node_counts, results,
                                                                            options, call)}


def label_node_type(rows, meta, node_counts, requested):
    """The node type the labels belong to and its node count."""
    if not meta["is_hetero"]:
        return None, node_counts.get(None)
    if requested:
        return requested, node_counts.get(requested)
    matching = [t for t, n in node_counts.items() if n == rows]
    if len(matching) == 1:
        return matching[0], rows
    return None, None  # ambiguous or no type fits: the rule says so


def gather_seeds(parent, meta, node_counts, labels, options, call):
    import glob
    import torch
    splits = {}
    label_type = next((entry.get("node_type") for entry in labels if entry.get("node_type")), None)
    upper = node_counts.get(label_type if meta["is_hetero"] else None)
    for directory in sorted(glob.glob(os.path.join(parent, "*-partitions"))):
        split = re.search(r"-(train|val|test)-partitions$", directory)
        if not split or not os.path.isdir(directory):
            continue
        files = {}
        for pid in range(min(meta["num_parts"] or 0, options.max_parts)):
            path = os.path.join(directory, "partition%d.pt" % pid)
            loaded = load_file(path, options, call, confined=False)
            entry = loaded.facts(directory)
            if loaded.ok:
                entry.update(describe(loaded.value))
                value = loaded.value
                if isinstance(value, torch.Tensor):
                    entry["index"] = is_index_tensor(value)
                    entry["out_of_range"] = count_outside(value, upper) if entry["index"] else None
            files[str(pid)] = entry
        splits[os.path.basename(directory)] = {"split": split.group(1), "files": files,
                                               "id_upper_bound": upper}
    return splits


def gather_facts(root, options, call, out):
    """Every fact section in order; `out` (a CallReporter) gets each as soon as it is known,
    so the parent keeps them if a later load crashes the process."""
    import torch
    import torch_geometric
    import torch_geometric.typing
    facts = {"root": os.path.abspath(root),
             "loading": {"torch": torch.__version__, "torch_geometric": torch_geometric.__version__,
                         "weights_only": bool(torch_geometric.typing.WITH_PT24),
                         "allow_pickle": bool(options.allow_pickle)}}
    for key in ("root", "loading"):
        out.publish(key, facts[key])
    facts["meta"] = gather_meta(root)
    out.publish("meta", facts["meta"])
    meta = usable_meta(facts["meta"])
    facts["layout"] = gather_layout(root, meta["num_parts"])
    out.publish("layout", facts["layout"])
    facts["maps"], facts["parts"], facts["coverage"], facts["labels"] = None, [], None, None
    if meta["num_parts"] is None or meta["is_hetero"] is None:
        found = facts["layout"]["parts_found"][:options.max_parts]
        facts["examined"] = examined_facts(facts["layout"]["parts_found_count"], len(found), options)
        out.publish("examined", facts["examined"])
        for pid in found:
            facts["parts"].append({"index": pid, "present": True,
                                   "from_partition": replay_from_partition(root, pid, {}, options, call)})
            out.append("parts", facts["parts"][-1])
        return facts
    maps, cache = load_maps(root, meta, options, call)
    facts["maps"] = {"node": {json.dumps(t): m for t, m in maps["node"].items()},
                     "edge": {json.dumps(edge_type_str(t)): m for t, m in maps["edge"].items()},
                     "extra_files": extra_type_files(root, meta), "edge_offset": {
                         json.dumps(edge_type_str(t)): o for t, o in maps["edge_offset"].items()}}
    totals = Totals({t: m.get("length") for t, m in maps["node"].items()},
                    {t: m.get("length") for t, m in maps["edge"].items()})
    out.publish("maps", facts["maps"])
    examined = min(meta["num_parts"], options.max_parts)
    facts["examined"] = examined_facts(meta["num_parts"], examined, options)
    out.publish("examined", facts["examined"])
    for pid in range(examined):
        # sanitise: strings from the files (feature names) are cut, so each record stays bounded
        facts["parts"].append(sanitise(gather_part(root, pid, meta, maps, totals, cache, options, call)))
        out.append("parts", facts["parts"][-1])
    facts["coverage"] = coverage_facts(totals)
    # Missing ids mean something only when every part could be read.
    facts["coverage"]["complete"] = examined == meta["num_parts"] and all(
        part["present"] and all(part["files"][name]["status"] in ("ok", "pickle-fallback-loaded")
                                for name in ("graph.pt", "node_feats.pt")) for part in facts["parts"])
    facts["feature_shapes"] = totals.feature_shapes
    facts["labels"] = gather_labels(root, meta, maps, options, call)
    facts["labels"]["features_named_y"] = sorted({
        name for part in facts["parts"] for per in part.get("nodes", {}).get("per_type", {}).values()
        for name in per.get("features", {}) if name == "y"})
    return facts


def examined_facts(parts, examined, options):
    return {"parts": parts, "examined": examined, "not_examined": parts - examined, "max_parts": options.max_parts}


def load_maps(root, meta, options, call):
    """Node and edge maps, kept for the whole run (every part is checked against them)."""
    node_paths, edge_paths = map_paths(root, meta)
    cache, maps = {}, {"node": {}, "edge": {}, "node_values": {}, "edge_values": {}, "edge_offset": {},
                       "node_offset": {}}
    for kind, paths in (("node", node_paths), ("edge", edge_paths)):
        for key, path in paths.items():
            loaded = cache[os.path.abspath(path)] = load_file(os.path.abspath(path), options, call)
            maps[kind][key] = summarize_map(loaded, meta["num_parts"], root)
            if "length" in maps[kind][key]:
                maps[kind + "_values"][key] = loaded.value
    offset = 0
    for edge_type in meta["edge_types"]:  # Partitioner numbers edges type after type
        maps["edge_offset"][edge_type] = offset
        length = maps["edge"][edge_type].get("length")
        offset = offset + length if offset is not None and length is not None else None
    if meta["is_hetero"] and meta["node_offset"] is not None:
        maps["node_offset"] = dict(zip(meta["node_types"], meta["node_offset"]))
    return maps, cache


def coverage_facts(totals):
    facts = {"nodes": {}, "edges": {}}
    for kind, counters in (("nodes", totals.nodes), ("edges", totals.edges)):
        for key, counter in counters.items():
            missing = (counter == 0).nonzero().view(-1)
            repeated = (counter > 1).nonzero().view(-1)
            name = json.dumps(key if kind == "nodes" else edge_type_str(key))
            facts[kind][name] = {"expected": counter.numel(), "missing": missing.numel(),
                                 "missing_examples": examples(missing), "repeated": repeated.numel(),
                                 "repeated_examples": examples(repeated)}
    facts["edges_stored"] = {json.dumps(edge_type_str(t)): n for t, n in totals.edges_stored.items()}
    return facts


def child_main(options_text):
    """The child process: load the folder the way PyG does and publish the facts."""
    options, reporter = calls.start_child(options_text)
    caller = calls.BoundedCaller(options.bounds["load_s"], reporter)
    # urllib3 binds a socket at import time to test for IPv6: refused here, nothing needs the network.
    sandbox.refuse_sockets()
    reporter.begin("import torch, torch_geometric", options.bounds["import_s"])
    import torch_geometric.distributed  # noqa: F401  (imported here so the load is bounded and announced)
    reporter.end()
    facts = gather_facts(options.root, options, caller, reporter)
    calls.finish_child(reporter, facts=facts, caller=caller.state())
