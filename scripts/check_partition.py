#!/usr/bin/env python3
"""Check a PyG partition folder before every rank starts loading it.

Validates a folder written by torch_geometric.distributed.Partitioner against
what the installed PyG writes and reads: META.json, one part_N/ per partition
with the files each part needs, node and edge maps that cover every node and
edge exactly once, offsets and type lists that agree between META.json and the
files, feature rows that match the maps, and the labels and seed splits that
PyG's distributed training recipe keeps next to the folder.

Files are loaded the way PyG loads them on this torch (torch.load with
weights_only=True and PyG's own fallback rule). Each part is then replayed
through PyG's real LocalGraphStore.from_partition and
LocalFeatureStore.from_partition, fed from what was already loaded, so the
verdict for every part is PyG's own.

Read-only: nothing in the folder is written, renamed or deleted. Loading and
PyG's from_partition run in a child process (the shared sandbox,
diagnostics_core), so a file that crashes or hangs the unpickler or PyG yields a
finding, not a dead or stuck checker.
"""

import errno
import json
import os
import re
import sys
import time

sys.dont_write_bytecode = True  # importing the shared library must not write scripts/__pycache__
if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diagnostics_core import calls, cli, safe_json, safe_pickle, sandbox  # noqa: E402
from diagnostics_core.calls import CallTimeout, CallerState, error_text, type_name  # noqa: E402
from diagnostics_core.contract import Tool  # noqa: E402
from diagnostics_core.text import quote, safe_str, sanitise, sanitise_text, write_json  # noqa: E402

SCHEMA_VERSION = "1.0"
CHECKER_VERSION = "1.0.0"
CHILD_FLAG = "--internal-child-run"  # not a user flag: marks the child process

DEFAULT_TIMEOUT = 120.0
DEFAULT_MAX_PARTS = 256  # parts examined; each adds a few kilobytes of JSON and its files' load time
MAX_PARTS_LIMIT = 100000
MAX_TYPES = 1000  # node or edge types in META.json; more is not a graph PyG's Partitioner wrote
LIST_SHOWN = 64  # part numbers quoted per layout list
META_MAX_BYTES = 1 << 20
META_MAX_DEPTH = 32
META_SHOWN_BYTES = 8192  # META.json content quoted in the JSON up to this size
META_KEYS = ("num_parts", "node_types", "edge_types", "node_offset", "is_hetero", "is_sorted")
PART_FILES = ("graph.pt", "node_feats.pt", "edge_feats.pt")
EXAMPLES_SHOWN = 5  # offending ids quoted per problem
FEATURES_SHOWN = 256  # features described per type and part; a file may hold any number
NAME_LIMIT = 256  # characters of a feature name kept

FINDINGS = {
    "partition-meta-missing": ("error", "META.json is missing"),
    "partition-meta-invalid": ("error", "META.json is unreadable, incomplete or from another PyG version"),
    "partition-part-missing": ("error", "a part_N/ folder named by num_parts is missing"),
    "partition-part-unexpected": ("warning", "a part_N/ folder beyond num_parts exists"),
    "partition-file-missing": ("error", "a file PyG reads is missing"),
    "partition-file-unloadable": ("error", "a file cannot be loaded the way PyG loads it"),
    "partition-edge-feats-unloadable": ("error", "edge_feats.pt is a defaultdict that weights_only loading rejects"),
    "partition-pickle-fallback": ("warning", "PyG would load a file with weights_only=False"),
    "partition-pickle-holds-code": ("error", "a file would import or call code beyond tensors and containers "
                                             "when unpickled, or could not be proven free of it"),
    "partition-path-outside-root": ("error", "a type name in META.json points outside the partition folder"),
    "partition-output-capped": ("warning", "not every part was examined, or the report was cut to stay bounded"),
    "partition-load-timeout": ("error", "loading a file did not finish within the time bound"),
    "partition-map-invalid": ("error", "a node or edge map is not a 1-D integer tensor of partition ids"),
    "partition-map-size-mismatch": ("error", "a map's length disagrees with the graph's node or edge count"),
    "partition-types-mismatch": ("error", "node or edge types disagree between META.json and the files"),
    "partition-offset-mismatch": ("error", "node offsets disagree between META.json, maps and features"),
    "partition-graph-invalid": ("error", "a part's graph.pt has the wrong structure, dtype or ranges"),
    "partition-graph-not-sorted": ("error", "META.json says is_sorted but edges are not sorted by destination"),
    "partition-node-coverage": ("error", "nodes are not owned by exactly one part as node_map says"),
    "partition-edge-coverage": ("error", "edges are not stored in exactly one part as edge_map says"),
    "partition-feature-mismatch": ("error", "feature tensors disagree with the ids they belong to"),
    "partition-empty-part": ("error", "a part owns no nodes of a type: LocalFeatureStore.from_partition fails"),
    "partition-from-partition-fails": ("error", "PyG's from_partition raises for some parts"),
    "partition-labels-missing": ("info", "no labels found for training"),
    "partition-labels-invalid": ("error", "the label tensor is unloadable or has the wrong length"),
    "partition-seeds-invalid": ("error", "a per-part seed split is missing, unloadable or out of range"),
    "partition-load-crashed": ("error", "loading a file or PyG's from_partition killed the process"),
    "partition-usage-error": ("error", "the command line is not valid"),
    "partition-stack-missing": ("error", "torch or torch_geometric is not importable in this interpreter"),
    "partition-checker-internal-error": ("error", "the checker itself failed"),
}

TOOL = Tool("check_partition", CHECKER_VERSION, SCHEMA_VERSION, FINDINGS,
            usage_id="partition-usage-error", internal_id="partition-checker-internal-error")
finding = TOOL.finding

USAGE = """\
%(prog)s ROOT [--labels PATH] [--label-node-type TYPE] [--allow-pickle]
       [--timeout SECONDS] [--max-parts N] [--pretty]
       %(prog)s --list-findings"""

EPILOG = """\
exit codes:
  0  the gate "contract" passed: every check passed and PyG's from_partition
     loads every part (warnings or info may remain)
  1  the gate "contract" failed: at least one error finding (see "parts" for
     PyG's own verdict per part)
  2  usage error: a bad flag or value, ROOT not a directory, or torch/
     torch_geometric missing in this interpreter (partition-stack-missing);
     one line on stderr and a JSON document whose finding says so
  3  internal error in the checker; the JSON says so in "findings"

what it guarantees:
  Exactly one JSON document on stdout; warnings on stderr. Read-only: the
  folder is never modified and no file, directory or socket is created.
  Files are unpickled only as PyG would with weights_only=True. A file that
  fails that is scanned with pickletools (nothing executed): one that names
  anything beyond containers and tensors is reported as code and never
  loaded; --allow-pickle loads the others with weights_only=False through an
  unpickler that refuses every other name. Type names in META.json cannot
  reach outside ROOT. Loading runs in a child process: a load that crashes
  is reported (partition-load-crashed), one that runs past --timeout is ended
  even when it blocks in C, after which no further file is opened.

labels and seeds:
  Partitioner writes no labels. PyG's distributed example saves them as
  <parent>/<dataset>-label/label.pt and seed splits as
  <parent>/<dataset>-{train,val,test}-partitions/partition<N>.pt next to ROOT;
  both are found there automatically, or pass --labels.

examples:
  python scripts/check_partition.py data/partitions/products/2-parts/products-partitions --pretty
  python scripts/check_partition.py parts/ --labels parts-label/label.pt
  python scripts/check_partition.py parts/ --labels paper_y.pt --label-node-type paper
  python scripts/check_partition.py parts/ | jq '.parts[] | {index, from_partition}'
"""


# ---------------------------------------------------------------------------
# Bounded loading, the way PyG loads
# ---------------------------------------------------------------------------

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
    return Loaded(path, "pickle-fallback-loaded" if fallback else "ok", value)


def scan_file(path, call):
    """What unpickling the file would import and call, found without running it (safe_pickle)."""
    try:
        return call("scan(%s)" % path, safe_pickle.scan, path)
    except CallTimeout as error:
        return {"safe": False, "refused": [], "error": "the scan did not finish: %s" % error}


# ---------------------------------------------------------------------------
# Small tensor helpers (all return plain data)
# ---------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------
# Facts: META.json and the folder layout
# ---------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------
# Facts: node and edge maps
# ---------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------
# Facts: one part at a time
# ---------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------
# Facts: labels and seed splits kept next to the folder by PyG's recipe
# ---------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------
# All facts
# ---------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------
# Rules: facts -> findings
# ---------------------------------------------------------------------------

REPARTITION = ("re-run torch_geometric.distributed.Partitioner(data, num_parts, root).generate_partition() with "
               "the installed PyG into an empty folder and copy that folder whole to every machine")


def rule_meta(facts, options):
    meta = facts["meta"]
    if not meta["present"]:
        return [finding("partition-meta-missing", {"root": facts["root"], "layout": facts["layout"]},
                        fix="point at the folder Partitioner wrote (it holds META.json and part_0/...), or %s"
                            % REPARTITION)]
    if meta["error"] or meta["problems"]:
        return [finding("partition-meta-invalid", {"error": meta["error"], "problems": meta["problems"][:20],
                                                   "content": shown_meta(meta["content"])},
                        fix="%s; PyG %s reads num_parts, is_hetero, is_sorted, node_types and edge_types from it"
                            % (REPARTITION, facts["loading"]["torch_geometric"]))]
    return []


def shown_meta(content):
    """META.json as quoted in the JSON: whole when small, else its size (the file is the evidence)."""
    size = len(json.dumps(content))
    return content if size <= META_SHOWN_BYTES else {"not_shown": "%d bytes of JSON" % size}


def rule_layout(facts, options):
    layout = facts["layout"]
    found = []
    if layout["missing"]:
        found.append(finding("partition-part-missing", {"missing": layout["missing"],
                                                        "missing_count": layout["missing_count"],
                                                        "found": layout["parts_found"],
                                                        "found_count": layout["parts_found_count"],
                                                        "misnamed": layout["misnamed"]},
                             fix="copy the missing part_N/ folders from the machine that ran the Partitioner "
                                 "(PyG names them part_0, part_1, ...), or %s" % REPARTITION))
    if layout["unexpected"]:
        found.append(finding("partition-part-unexpected", {"unexpected": layout["unexpected"],
                                                           "unexpected_count": layout["unexpected_count"],
                                                           "num_parts": layout["num_parts_expected"]},
                             fix="these folders come from an earlier run with more parts; partition into an "
                                 "empty folder so stale parts cannot mix in"))
    return found


def load_problem_findings(facts, options):
    """Missing, unloadable, unsafe or timed-out files, wherever they are."""
    found = []
    files = []
    for kind in ("node", "edge"):
        files.extend((None, entry) for entry in ((facts["maps"] or {}).get(kind) or {}).values())
    for part in facts["parts"]:
        files.extend((part["index"], entry) for entry in part.get("files", {}).values())
    by_status = {}
    for pid, entry in files:
        by_status.setdefault(entry["status"], []).append(dict(entry, part=pid))
    missing = by_status.get("missing", [])
    required = [e for e in missing if not e["path"].endswith(("node_feats.pt", "edge_feats.pt"))]
    optional = [e for e in missing if e not in required]
    if required:
        found.append(finding("partition-file-missing", {"files": required},
                             fix="copy the complete folder again (an interrupted copy is the usual cause), or %s"
                                 % REPARTITION))
    if optional:
        found.append(finding("partition-file-missing", {"files": optional}, severity="warning",
                             fix="from_partition loads without it, but the part then has no node or edge "
                                 "features; copy the complete folder again"))
    outside = by_status.get("outside-root", [])
    if outside:
        found.append(finding("partition-path-outside-root", {"files": outside[:20], "count": len(outside),
                                                             "root": facts["root"]},
                             fix="type names in META.json must be plain names (no '/' or '..', no symbolic links "
                                 "out of the folder); nothing outside ROOT was opened; %s" % REPARTITION))
    # A file is rewritten or loaded with weights_only=False only after the scan proved it holds nothing
    # but containers and tensors; anything else is reported as code, with no command that would load it.
    holds_code = [e for e in files_of(by_status, "error", "pickle-fallback-not-run", "pickle-holds-code")
                  if e.get("scan") is not None and (e["scan"].get("refused") or (
                      not e["scan"].get("safe") and (e["status"] != "error" or e.get("cause"))))]
    errors = [e for e in by_status.get("error", []) if e not in holds_code]
    defaultdicts = [e for e in errors if e.get("cause") == "defaultdict-weights-only"]
    others = [e for e in errors if e not in defaultdicts]
    if holds_code:
        found.append(finding("partition-pickle-holds-code", {"files": holds_code[:20], "count": len(holds_code)},
                             fix="do not load these files (no --allow-pickle, no torch.load without weights_only=True): "
                                 "unpickling them imports or calls what evidence.files[].scan.refused names. "
                                 "Delete the folder and %s, on a machine you trust" % REPARTITION))
    if defaultdicts:
        found.append(finding("partition-edge-feats-unloadable", {"files": defaultdicts,
                                                                 "torch": facts["loading"]["torch"]},
                             fix=edge_feats_fix(facts["root"], [e["path"] for e in defaultdicts])))
    if others:
        found.append(finding("partition-file-unloadable", {"files": others},
                             fix="the file is truncated or corrupt (or saved by a newer torch); copy it again "
                                 "from the source, or %s" % REPARTITION))
    unsafe = [e for e in files_of(by_status, "pickle-fallback-not-run", "pickle-fallback-loaded")
              if e not in holds_code]
    if unsafe:
        found.append(finding("partition-pickle-fallback", {"files": unsafe},
                             fix="save these files with tensors, dicts and lists only; the scan found nothing but "
                                 "those in them, so rerun with --allow-pickle to check their contents: %s"
                                 % TOOL.command(quote(facts["root"]), "--allow-pickle")))
    return found


def files_of(by_status, *statuses):
    return [entry for status in statuses for entry in by_status.get(status, [])]


def edge_feats_fix(root, relative_paths):
    """Rewrite the named edge_feats.pt files as plain dicts, which weights_only loading accepts (tested).

    Only files the scan proved to hold containers and tensors get here; the rewrite scans each
    again and loads it through safe_pickle's restricted unpickler, so a file changed since this
    check is left alone. Paths travel as arguments, never inside the program text.
    """
    root = root.rstrip(os.sep)
    scripts = os.path.dirname(os.path.abspath(__file__))
    program = ("import sys; sys.path.insert(0, sys.argv[1]); from diagnostics_core import safe_pickle; "
               "sys.exit(safe_pickle.rewrite_as_dict(sys.argv[2:]))")
    # The interpreter running this checker has the torch that must load the files.
    return "cp -a %s %s && %s -B -c %s %s %s" % (
        quote(root), quote(root + ".bak"), quote(sys.executable), quote(program), quote(scripts),
        " ".join(quote(os.path.join(root, path)) for path in relative_paths))


def rule_maps(facts, options):
    maps = facts["maps"]
    if not maps:
        return []
    found = []
    bad = {}
    for kind in ("node", "edge"):
        for key, entry in maps[kind].items():
            if entry.get("problem") or entry.get("invalid_part_ids"):
                bad["%s_map %s" % (kind, json.loads(key))] = {k: entry.get(k) for k in (
                    "path", "type", "dtype", "shape", "problem", "invalid_part_ids")}
    if bad:
        found.append(finding("partition-map-invalid", {"maps": bad},
                             fix="each map must be an int64 tensor holding a part id in [0, num_parts) per node "
                                 "or edge; %s" % REPARTITION))
    if maps.get("extra_files"):
        found.append(finding("partition-types-mismatch", {"map_files_for_unlisted_types": maps["extra_files"]},
                             fix="META.json and node_map/, edge_map/ come from different runs; %s" % REPARTITION))
    return found


def iter_edge_summaries(facts):
    for part in facts["parts"]:
        for key, summary in part.get("graph", {}).get("per_type", {}).items():
            yield part["index"], key, summary


def iter_node_summaries(facts):
    for part in facts["parts"]:
        for key, summary in part.get("nodes", {}).get("per_type", {}).items():
            yield part["index"], key, summary


def rule_graph(facts, options):
    found, invalid, unsorted, size_mismatch, types = [], [], [], [], []
    for part in facts["parts"]:
        graph = part.get("graph", {})
        if graph.get("problem"):
            invalid.append({"part": part["index"], "problem": graph["problem"]})
        if graph.get("unknown_keys") or graph.get("missing_edge_types"):
            types.append({"part": part["index"], "file": "graph.pt", "unknown": graph.get("unknown_keys"),
                          "missing": graph.get("missing_edge_types")})
    for pid, key, summary in iter_edge_summaries(facts):
        if summary.get("problem"):
            invalid.append({"part": pid, "edge_type": key, "problem": summary["problem"]})
            continue
        if summary.get("row_out_of_range") or summary.get("col_out_of_range"):
            invalid.append({"part": pid, "edge_type": key, "size": summary["size"],
                            "row_out_of_range": summary["row_out_of_range"],
                            "col_out_of_range": summary["col_out_of_range"]})
        expected = summary.get("expected_size")
        if expected and None not in expected and summary["size"] != expected:
            size_mismatch.append({"part": pid, "edge_type": key, "graph_size": summary["size"],
                                  "node_map_lengths": expected})
        if facts["meta"]["content"].get("is_sorted") is True and not summary.get("sorted_by_destination", True):
            unsorted.append({"part": pid, "edge_type": key})
    if invalid:
        found.append(finding("partition-graph-invalid", {"problems": invalid[:20]},
                             fix="graph.pt must hold edge_id, row, col (1-D int64, one entry per edge, ids "
                                 "below size) and size=(num_src, num_dst); %s" % REPARTITION))
    if size_mismatch:
        found.append(finding("partition-map-size-mismatch", {"problems": size_mismatch[:20]},
                             fix="the node map does not describe this graph (truncated or from another run); "
                                 "copy node_map* again or %s" % REPARTITION))
    if unsorted:
        found.append(finding("partition-graph-not-sorted", {"parts": unsorted[:20]},
                             fix="set \"is_sorted\": false in META.json (PyG then sorts on load) or %s; with the "
                                 "wrong flag PyG builds a wrong CSC and samples wrong neighbours" % REPARTITION))
    if types:
        found.append(finding("partition-types-mismatch", {"problems": types[:20]},
                             fix="graph.pt and META.json edge_types come from different runs; %s" % REPARTITION))
    return found


def rule_edge_map_sizes(facts, options):
    maps, coverage = facts["maps"], facts["coverage"]
    if not maps or not coverage or not coverage["complete"]:
        return []
    problems = []
    for key, entry in maps["edge"].items():
        stored = coverage["edges_stored"].get(key)
        if entry.get("length") is not None and stored is not None and entry["length"] != stored:
            problems.append({"edge_type": json.loads(key), "edge_map_length": entry["length"],
                             "edges_stored_in_parts": stored})
    if not problems:
        return []
    return [finding("partition-map-size-mismatch", {"problems": problems},
                    fix="edge_map does not describe the edges stored in the parts (truncated or from another "
                        "run); copy edge_map* again or %s" % REPARTITION)]


def rule_coverage(facts, options):
    found = []
    coverage = facts["coverage"]
    if not coverage:
        return found
    for kind, finding_id, elsewhere_key in (("nodes", "partition-node-coverage", "nodes_mapped_elsewhere"),
                                            ("edges", "partition-edge-coverage", "edges_mapped_elsewhere")):
        problems = [dict(entry, type=json.loads(key)) for key, entry in coverage[kind].items()
                    if (entry["missing"] and coverage["complete"]) or entry["repeated"]]
        summaries = iter_node_summaries(facts) if kind == "nodes" else iter_edge_summaries(facts)
        for pid, key, summary in summaries:
            if summary.get(elsewhere_key):
                problems.append({"part": pid, "type": key, elsewhere_key: summary[elsewhere_key],
                                 "examples": summary.get(elsewhere_key + "_examples")})
            if summary.get("ids_out_of_range") or summary.get("edge_ids_out_of_range"):
                problems.append({"part": pid, "type": key, "ids_out_of_range": summary.get(
                    "ids_out_of_range") or summary.get("edge_ids_out_of_range")})
            if kind == "edges" and summary.get("destination_not_owned"):
                problems.append({"part": pid, "type": key, "destination_not_owned": summary["destination_not_owned"]})
        if problems:
            found.append(finding(finding_id, {"problems": problems[:20]},
                                 fix="every %s must be stored in exactly the part its map names; parts from "
                                     "different runs were mixed or files are incomplete; %s"
                                     % (kind[:-1], REPARTITION)))
    return found


def rule_offsets(facts, options):
    maps = facts["maps"]
    meta = facts["meta"]["content"] or {}
    if not maps or meta.get("is_hetero") is not True or facts["meta"]["problems"]:
        return []
    problems = []
    running = 0
    for node_type, offset in zip(meta["node_types"], meta["node_offset"]):
        if running is not None and offset != running:
            problems.append({"node_type": node_type, "meta_offset": offset, "sum_of_earlier_map_lengths": running})
        length = maps["node"].get(json.dumps(node_type), {}).get("length")
        running = running + length if running is not None and length is not None else None
    for pid, key, summary in iter_node_summaries(facts):
        if summary.get("offset_mismatches"):
            problems.append({"part": pid, "node_type": key, "global_id_minus_offset_differs_from_id":
                             summary["offset_mismatches"]})
    if not problems:
        return []
    return [finding("partition-offset-mismatch", {"problems": problems[:20]},
                    fix="node_offset must be the running sum of node counts in node_types order; META.json and "
                        "the files come from different runs; %s" % REPARTITION)]


def rule_features(facts, options):
    problems, types, empty = [], [], []
    for part in facts["parts"]:
        nodes = part.get("nodes", {})
        if nodes.get("problem"):
            problems.append({"part": part["index"], "file": "node_feats.pt", "problem": nodes["problem"]})
        if nodes.get("unknown_keys") or nodes.get("missing_node_types"):
            types.append({"part": part["index"], "file": "node_feats.pt", "unknown": nodes.get("unknown_keys"),
                          "missing": nodes.get("missing_node_types")})
        edges = part.get("edge_features", {})
        if edges.get("problem"):
            problems.append({"part": part["index"], "file": "edge_feats.pt", "problem": edges["problem"]})
        for key, summary in edges.get("per_type", {}).items():
            problems.extend(feature_problems(part["index"], "edge_feats.pt", key, summary))
            if summary.get("ids_match_graph") is False:
                problems.append({"part": part["index"], "file": "edge_feats.pt", "type": key,
                                 "problem": "global_id does not list the part's edges from graph.pt"})
    for pid, key, summary in iter_node_summaries(facts):
        if summary.get("problem"):
            problems.append({"part": pid, "file": "node_feats.pt", "type": key, "problem": summary["problem"]})
            continue
        problems.extend(feature_problems(pid, "node_feats.pt", key, summary))
        if summary.get("num_nodes") == 0:
            empty.append({"part": pid, "node_type": json.loads(key) if key != "nodes" else None})
    for key, by_part in (facts.get("feature_shapes") or {}).items():
        if len({json.dumps(v) for v in by_part.values()}) > 1:
            problems.append({"feature": json.loads(key), "problem": "dtype or width differs between parts",
                             "by_part": by_part})
    found = []
    if problems:
        found.append(finding("partition-feature-mismatch", {"problems": problems[:20]},
                             fix="each feature needs one row per id in its global_id, the same dtype and width "
                                 "in every part, and edge features must list the part's own edges; %s"
                                 % REPARTITION))
    if types:
        found.append(finding("partition-types-mismatch", {"problems": types[:20]},
                             fix="node_feats.pt and META.json node_types come from different runs; %s"
                                 % REPARTITION))
    if empty:
        found.append(finding("partition-empty-part", {"parts": empty[:20]},
                             fix="PyG cannot load a part that owns no node of some type (global_id.max() of an "
                                 "empty tensor); partition into fewer parts so every part owns nodes of every "
                                 "type"))
    return found


def feature_problems(pid, file, key, summary):
    problems = []
    for name, entry in (summary.get("features") or {}).items():
        if name == "problem":
            problems.append({"part": pid, "file": file, "type": key, "problem": entry})
        elif entry.get("type") != "torch.Tensor":
            problems.append({"part": pid, "file": file, "type": key, "feature": name,
                             "problem": "is %s, not a tensor" % entry.get("type")})
        elif entry.get("expected_rows") is not None and (entry["shape"] or [None])[0] != entry["expected_rows"]:
            problems.append({"part": pid, "file": file, "type": key, "feature": name,
                             "rows": (entry["shape"] or [None])[0], "expected_rows": entry["expected_rows"]})
    for field in ("time", "edge_time"):
        entry = summary.get(field)
        if entry and entry.get("expected_rows") is not None and (entry.get("shape") or [None])[0] != entry[
                "expected_rows"]:
            problems.append({"part": pid, "file": file, "type": key, "feature": field,
                             "rows": (entry.get("shape") or [None])[0], "expected_rows": entry["expected_rows"]})
    return problems


def rule_from_partition(facts, options):
    failing = {}
    for part in facts["parts"]:
        for store, verdict in part.get("from_partition", {}).items():
            if verdict["loads"] is False:
                failing.setdefault(str(part["index"]), {})[store] = verdict["error"]
    if not failing:
        return []
    shown = dict(list(failing.items())[:20])
    return [finding("partition-from-partition-fails", {"parts": shown, "parts_failing": len(failing),
                                                       "torch": facts["loading"]["torch"],
                                                       "torch_geometric": facts["loading"]["torch_geometric"]},
                    fix="apply the fixes of the other error findings (they name the cause); the errors are what "
                        "LocalGraphStore/LocalFeatureStore.from_partition raise on this machine")]


def rule_labels(facts, options):
    labels = facts["labels"]
    if labels is None:
        return []
    found = []
    if not labels["labels"] and not labels["features_named_y"]:
        found.append(finding("partition-labels-missing", {"searched": labels["paths_searched"]},
                             fix="Partitioner writes no labels: save them beside the folder, e.g. "
                                 "torch.save(data.y, '<parent>/<name>-label/label.pt'), and set "
                                 "feature_store.labels after from_partition"))
    problems = []
    for entry in labels["labels"]:
        if entry["status"] not in ("ok", "pickle-fallback-loaded"):
            problems.append({"path": entry["path"], "status": entry["status"], "error": entry.get("error")})
        elif entry.get("type") != "torch.Tensor" or not entry.get("shape"):
            problems.append({"path": entry["path"], "problem": "not a tensor with one row per node",
                             "type": entry.get("type")})
        elif entry.get("expected_rows") is None:
            problems.append({"path": entry["path"], "rows": entry["shape"][0],
                             "problem": "matches no node type's count; pass --label-node-type"})
        elif entry["shape"][0] != entry["expected_rows"]:
            problems.append({"path": entry["path"], "rows": entry["shape"][0], "node_type": entry.get("node_type"),
                             "expected_rows": entry["expected_rows"]})
    if problems:
        found.append(finding("partition-labels-invalid", {"problems": problems},
                             fix="save the full label tensor of the labelled node type, indexed by its global "
                                 "node id (e.g. torch.save(data.y, path) for the data you partitioned)"))
    seed_problems = []
    for name, split in labels["seeds"].items():
        for pid, entry in split["files"].items():
            if entry["status"] not in ("ok", "pickle-fallback-loaded"):
                seed_problems.append({"split": name, "part": int(pid), "status": entry["status"],
                                      "error": entry.get("error")})
            elif entry.get("index") is False or entry.get("out_of_range"):
                seed_problems.append({"split": name, "part": int(pid), "index_tensor": entry.get("index"),
                                      "out_of_range": entry.get("out_of_range"),
                                      "id_upper_bound": split["id_upper_bound"]})
    if seed_problems:
        found.append(finding("partition-seeds-invalid", {"problems": seed_problems[:20]},
                             fix="write one partition<N>.pt per part holding an int64 tensor of node ids of "
                                 "the labelled type, as PyG's example partition_graph.py does"))
    return found


def rule_crash(facts, options):
    crash = facts.get("crash")
    if not crash:
        return []
    return [finding("partition-load-crashed", crash,
                    fix="rewrite the file named in evidence.call (plain tensors and dicts, torch.save) on the "
                        "machine that wrote the partition, or repartition; evidence.stderr_tail holds the "
                        "Python stack of the crash")]


def rule_timeout(facts, options, caller):
    if caller.timed_out is None:
        return []
    return [finding("partition-load-timeout", caller.timed_out,
                    fix="the filesystem did not deliver the file in time (network mount?); rerun with --timeout "
                        "%d or copy the folder to local disk" % (int(caller.timed_out["timeout_s"]) * 3))]


def rule_capped(facts, options):
    """Parts not examined (--max-parts), or a child report too large to arrive whole."""
    examined, lost = facts.get("examined") or {}, facts.get("report_lost")
    if not examined.get("not_examined") and not lost:
        return []
    evidence = dict(examined)
    if lost:
        evidence["report_lost"] = dict(lost, parts_reported=len(facts["parts"]))
        return [finding("partition-output-capped", evidence, severity="error",
                        fix="the parts missing from \"parts\" were not verified; %s" % REPARTITION)]
    more = min(max(examined.get("parts") or 0, options.max_parts), MAX_PARTS_LIMIT)
    return [finding("partition-output-capped", evidence,
                    fix="%s of %s parts were checked; to check more: %s  # not run here: output and time grow "
                        "with the number of parts" % (examined.get("examined"), examined.get("parts"),
                                                      TOOL.command(quote(facts["root"]), "--max-parts", str(more))))]


RULES = (rule_meta, rule_layout, load_problem_findings, rule_maps, rule_graph, rule_edge_map_sizes,
         rule_coverage, rule_offsets, rule_features, rule_from_partition, rule_labels, rule_crash, rule_capped)


def diagnose(facts, options, caller):
    findings = rule_timeout(facts, options, caller)
    for rule in RULES:
        findings.extend(rule(facts, options))
    return findings  # Tool.document sorts them by severity


# ---------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------

FACT_SECTIONS = ("root", "loading", "meta", "layout", "examined", "maps", "parts", "coverage", "labels")


def render(facts, findings, options, started, internal_error=None, usage_error=False):
    # The gate "contract" fails on any error finding; it is not applied when the run never started.
    has_error = any(f["severity"] == "error" for f in findings)
    gates = {} if usage_error or internal_error is not None else {"contract": {"passed": not has_error}}
    parts = facts.get("parts") or []
    meta = {"name": TOOL.name, "version": CHECKER_VERSION, "argv": sys.argv[1:],
            "timeout_s": getattr(options, "timeout", None), "elapsed_s": round(time.time() - started, 3),
            "read_only": True, "child": facts.get("child")}
    document, exit_code = TOOL.document(findings, gates, meta, usage_error=usage_error, internal_error=internal_error)
    document["verdict"] = {
        "parts_checked": len(parts),
        "from_partition_fails": sorted(p["index"] for p in parts if any(
            v["loads"] is False for v in p.get("from_partition", {}).values())),
        "from_partition_unknown": sorted(p["index"] for p in parts if any(
            v["loads"] is None for v in p.get("from_partition", {}).values()))}
    for section in FACT_SECTIONS:
        document[section] = facts.get(section)
    if isinstance(document["meta"], dict) and "content" in document["meta"]:
        document["meta"] = dict(document["meta"], content=shown_meta(document["meta"]["content"]))
    return document, exit_code


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

def build_parser():
    parser = cli.make_parser(
        TOOL, usage=USAGE, epilog=EPILOG,
        description="Validate a partition folder written by torch_geometric.distributed.Partitioner before "
                    "training: META.json, part_N/ folders and files, node/edge map coverage, offsets, type "
                    "lists, feature rows, labels and seed splits, and PyG's own from_partition verdict for every "
                    "part on this torch. Prints one JSON document with findings (evidence, fix, docs anchor).")
    parser.add_argument("root", nargs="?", metavar="ROOT", help="the folder holding META.json and part_0/, ...")
    parser.add_argument("--labels", metavar="PATH",
                        help="label tensor to check (default: <parent>/*-label/label.pt, if present)")
    parser.add_argument("--label-node-type", metavar="TYPE",
                        help="node type the labels belong to (heterogeneous partitions; default: the one type "
                             "whose node count equals the label rows)")
    parser.add_argument("--allow-pickle", action="store_true",
                        help="load files PyG would load with weights_only=False that way, but only files a "
                             "pickletools scan proves hold nothing but containers and tensors, through an "
                             "unpickler that refuses any other name (a file holding code is never loaded)")
    parser.add_argument("--timeout", metavar="SECONDS", type=cli.seconds, default=DEFAULT_TIMEOUT,
                        help="bound on each file load (default %(default)s)")
    parser.add_argument("--max-parts", metavar="N", type=max_parts, default=DEFAULT_MAX_PARTS,
                        help="check parts 0..N-1 at most (default %(default)s); the rest are named in "
                             "partition-output-capped, so output and time stay bounded")
    return parser


def max_parts(text):
    import argparse
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a whole number of parts, got %r" % text)
    if not 1 <= value <= MAX_PARTS_LIMIT:
        raise argparse.ArgumentTypeError("must be between 1 and %d, got %s" % (MAX_PARTS_LIMIT, text))
    return value


def child_main(options_text):
    """The child process: load the folder the way PyG does and publish the facts."""
    options, reporter = calls.start_child(options_text)
    caller = calls.BoundedCaller(options.timeout, reporter, thread_name="partition-load")
    # urllib3 binds a socket at import time to test for IPv6: refused here, nothing needs the network.
    sandbox.refuse_sockets()
    reporter.begin("import torch, torch_geometric", max(options.timeout, 120.0))
    import torch_geometric.distributed  # noqa: F401  (imported here so the load is bounded and announced)
    reporter.end()
    facts = gather_facts(options.root, options, caller, reporter)
    calls.finish_child(reporter, facts=facts, caller=caller.state())


def run_child(options):
    """Gather the facts in a sandboxed child; -> (facts, CallerState)."""
    facts, done, outcome, timed_out, crash = calls.run_tool_child(__file__, CHILD_FLAG, options, "load")
    if done is not None:
        facts, state = done["facts"], CallerState(**done["caller"])
    elif outcome.returncode == 0 and outcome.killed_for is None:
        # The child finished, but its last record never arrived whole (too large for one record):
        # a bound on output, not a crash. The facts it published one by one still hold.
        state = CallerState()
        facts["report_lost"] = {"reason": "the child's final record exceeded the record size limit",
                                "child_returncode": 0}
    else:
        state = CallerState(timed_out=timed_out)
        if crash:
            facts["crash"] = crash
    for key, value in (("root", os.path.abspath(options.root)), ("loading", None), ("meta", None),
                       ("layout", None), ("examined", None), ("maps", None), ("parts", []), ("coverage", None),
                       ("labels", None)):
        facts.setdefault(key, value)  # sections a crash or kill cut short
    facts["child"] = sandbox.call_child_summary(outcome)
    return facts, state


def check_command_line(parser, options):
    if not options.root:
        parser.error("ROOT is required")
    if not os.path.isdir(options.root):
        parser.error("ROOT %r is not a directory" % options.root)
    if options.labels and not os.path.isfile(options.labels):
        parser.error("--labels %r is not a file" % options.labels)
    calls.require_torch_stack(TOOL, "partition-stack-missing")


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
        document, exit_code = render({}, [error.finding(TOOL)], None, started, usage_error=True)
        return cli.refuse(TOOL, error, document)
    state, facts, findings = CallerState(), {}, []
    try:
        facts, state = run_child(options)
        findings = diagnose(facts, options, state)
        document, exit_code = render(facts, findings, options, started)
    except Exception as error:
        import traceback
        document, exit_code = render(facts, findings, options, started, internal_error={
            "error": error_text(error), "traceback": traceback.format_exc()[-3000:]})
    write_json(document, options.pretty)
    return exit_code


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == CHILD_FLAG:
        child_main(sys.argv[2])
    sys.exit(main())
