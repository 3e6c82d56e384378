"""The spec: the graph, model, sampling and hardware as plain data, from flags or from the sizes a probe read
from the user's file or store. Every number is checked here, before any arithmetic: a value out of range is
a usage error naming the flag (or the file's or store's field), so the model only ever sees sizes of a real
job and its loops stay short."""

import os
import re
import sys

from diagnostics_core import container
from diagnostics_core.cli import UsageError
from .findings import TOOL
from .launch import worker_start_method

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8, "int32": 4, "uint8": 1,
               "bool": 1, "int8": 1, "int16": 2}
# Beyond any job this tool will see: a typo (an extra digit group), not a graph.
MAX_NODES, MAX_EDGES, MAX_FEATURES = 10 ** 12, 10 ** 13, 10 ** 6
MAX_BYTES = 1 << 60
MAX_HOPS, MAX_FANOUT = 16, 10 ** 6  # a wider hop is every neighbour: -1
MAX_DIMS, MAX_ELEMENT = 8, 16      # a tensor's rank and element size, as read from a file
LIMITS = {  # flag -> (lowest, highest) for the whole-number flags
    "--nodes": (1, MAX_NODES), "--edges": (0, MAX_EDGES), "--features": (0, MAX_FEATURES),
    "--edge-features": (0, MAX_FEATURES), "--layers": (1, 64), "--hidden": (1, 1 << 20), "--heads": (1, 1024),
    "--classes": (1, 1 << 24), "--batch-size": (1, 1 << 30), "--num-workers": (0, 1024),
    "--gpus-per-node": (0, 1024), "--cores": (1, 1 << 20), "--machines": (1, 1 << 16),
    "--ranks-per-node": (1, 4096), "--prefetch-factor": (1, 1024)}
PYTHONS = ((3, 8), (3, 99))  # --python-version: the oldest torch ever ran on, and beyond any release
UNITS = {"": 1, "b": 1, "k": 10 ** 3, "kb": 10 ** 3, "m": 10 ** 6, "mb": 10 ** 6, "g": 10 ** 9, "gb": 10 ** 9,
         "t": 10 ** 12, "tb": 10 ** 12, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}
HELP = TOOL.command("--help")


def shown(value, limit=60):
    """A refused value as the evidence shows it: numbers as they are, other things as short text."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 10 ** 30:
        return value
    text = "%r" % (value,) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[:limit] + "..."


def invalid(flag, value, why, fix=HELP, **where):
    """A refused size: `flag` is the flag that gave it (for a file or store, --data or --store, and
    `where` names the file or store and the field)."""
    field = where.get("field")
    line = "%s %s: %s" % (flag, shown(value), why) if not field else "%s %s: %s = %s: %s" % (
        flag, where.get("file") or where.get("store"), field, shown(value), why)
    return UsageError("plan_capacity.py: error: %s" % line, "plan-size-invalid",
                      dict({"flag": flag, "value": shown(value), "why": why}, **where), fix)


def whole(flag, value, low, high, **where):
    """A whole number in [low, high] (bool is not one), else plan-size-invalid naming `flag` (and the field)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise invalid(flag, value, "expected a whole number", **where)
    if value < low or value > high:
        raise invalid(flag, value, "must be between %d and %d" % (low, high), **where)
    return value


def count(flag, value):
    """A whole-number flag checked against its LIMITS; None stays None (not given)."""
    return None if value is None else whole(flag, value, *LIMITS[flag])


def parse_bytes(flag, text):
    match = re.match(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$", str(text))
    unit = match.group(2).lower() if match else None
    if not match or unit not in UNITS:
        raise invalid(flag, text, "expected a size such as 80GB, 512GiB or 64000000000")
    value = float(match.group(1)) * UNITS[unit]  # a few hundred digits are inf here, not an error
    if not value <= MAX_BYTES:
        raise invalid(flag, text, "larger than any machine (%d bytes)" % MAX_BYTES)
    return int(value)


def fan_outs(text):
    """--num-neighbors: per-hop counts, each 1..MAX_FANOUT or -1 (every neighbour), at most MAX_HOPS hops.
    Parsed here rather than by argparse so that a refusal names the flag and the bound."""
    try:
        hops = [int(part) for part in str(text).split(",")]
    except ValueError:
        raise invalid("--num-neighbors", text, "expected comma-separated fan-outs, each positive or -1 (all "
                      "neighbours), such as 10,5")
    if len(hops) > MAX_HOPS:
        raise invalid("--num-neighbors", text, "at most %d hops" % MAX_HOPS)
    for hop in hops:
        if hop != -1 and not 1 <= hop <= MAX_FANOUT:
            raise invalid("--num-neighbors", text, "each fan-out must be -1 (every neighbour) or between 1 and %d"
                          % MAX_FANOUT)
    return hops


# --- from flags ------------------------------------------------------------------------------------

def make_spec(options):
    """The request from the command line; the graph is None when a file or store gives it (read later,
    in a child)."""
    spec = {"model": model_spec(options), "sampling": sampling_spec(options), "hardware": hardware_spec(options)}
    if options.store:
        count("--edges", options.edges)
        count("--nodes", options.nodes)
        spec["graph"] = None
    elif options.data:
        spec["graph"] = None
    elif options.node_type:
        spec["graph"] = hetero_graph(options)
    else:
        spec["graph"] = homo_graph(options)
    return spec


def homo_graph(options):
    if options.nodes is None or options.edges is None:
        raise UsageError("plan_capacity.py: error: give the graph: --nodes and --edges, or --data PATH, or "
                         "--store MODULE:CALLABLE (see --help)", TOOL.usage_id, {"message": "no graph given"}, HELP)
    size = DTYPE_BYTES[options.feature_dtype]
    return make_homo(count("--nodes", options.nodes), count("--edges", options.edges),
                     count("--features", options.features), size, count("--edge-features", options.edge_features),
                     8 if options.labels else 0, options.undirected)


def make_homo(nodes, edges, features, feature_size, edge_features=0, label_bytes=8, undirected=False,
              source="flags"):
    stored_edges = 2 * edges if undirected else edges
    node_bytes = features * feature_size + label_bytes
    edge_bytes = 16 + edge_features * feature_size
    return {"kind": "homo", "nodes": nodes, "edges": stored_edges, "edges_given": edges, "undirected": undirected,
            "features": features, "feature_bytes": features * feature_size, "node_bytes": node_bytes,
            "edge_bytes": edge_bytes, "source": source,
            "describe": "%d nodes x %d B, %d edges x %d B%s" % (nodes, node_bytes, stored_edges, edge_bytes,
                                                                 " (2 x %d given, made undirected: at most)" % edges
                                                                 if undirected else "")}


def hetero_graph(options):
    """--node-type NAME:NODES:FEATURES and --edge-type SRC,REL,DST:EDGES, repeated."""
    size = DTYPE_BYTES[options.feature_dtype]
    node_types = {}
    for text in options.node_type:
        parts = text.split(":")
        try:
            name, nodes, features = parts[0], int(parts[1]), int(parts[2]) if len(parts) > 2 else 0
        except (IndexError, ValueError):
            raise invalid("--node-type", text, "expected NAME:NODES[:FEATURES]")
        whole("--node-type", nodes, *LIMITS["--nodes"])
        whole("--node-type", features, *LIMITS["--features"])
        node_types[name] = {"nodes": nodes, "features": features, "feature_bytes": features * size,
                            "node_bytes": features * size + (8 if options.labels else 0)}
    edge_types = {}
    for text in options.edge_type:
        key, _, edges = text.rpartition(":")
        names = key.split(",")
        try:
            edges = int(edges)
        except ValueError:
            edges = None
        if len(names) != 3 or edges is None:
            raise invalid("--edge-type", text, "expected SRC,REL,DST:EDGES")
        whole("--edge-type", edges, *LIMITS["--edges"])
        for name in (names[0], names[2]):
            if name not in node_types:
                raise invalid("--edge-type", text, "node type %r has no --node-type" % name)
        edge_types[key] = {"edges": edges, "edge_bytes": 16, "src": names[0], "dst": names[2]}
    whole("--node-type", sum(t["nodes"] for t in node_types.values()), *LIMITS["--nodes"], field="all node types")
    whole("--edge-type", sum(t["edges"] for t in edge_types.values()), *LIMITS["--edges"], field="all edge types")
    return make_hetero(node_types, edge_types)


def make_hetero(node_types, edge_types, source="flags"):
    nodes = sum(t["nodes"] for t in node_types.values())
    edges = sum(t["edges"] for t in edge_types.values())
    features = max([t["features"] for t in node_types.values()] or [0])
    return {"kind": "hetero", "node_types": node_types, "edge_types": edge_types, "nodes": nodes, "edges": edges,
            "edges_given": edges, "undirected": False, "features": features, "source": source,
            "feature_bytes": max([t["feature_bytes"] for t in node_types.values()] or [0]),
            "node_bytes": max([t["node_bytes"] for t in node_types.values()] or [0]), "edge_bytes": 16,
            "describe": "%d node types, %d edge types, %d nodes, %d edges; the GPU figures treat the batch as one "
                        "type of the widest features" % (len(node_types), len(edge_types), nodes, edges)}


def model_spec(options):
    return {"conv": options.conv, "layers": count("--layers", options.layers),
            "hidden": count("--hidden", options.hidden), "heads": count("--heads", options.heads),
            "classes": count("--classes", options.classes)}


def python_version(text):
    """--python-version X.Y -> [X, Y], within PYTHONS."""
    match = re.match(r"^\s*(\d{1,2})\.(\d{1,3})\s*$", str(text))
    version = (int(match.group(1)), int(match.group(2))) if match else None
    if version is None or not PYTHONS[0] <= version <= PYTHONS[1]:
        why = "expected the job's Python as X.Y, from %d.%d" % PYTHONS[0]
        raise UsageError("plan_capacity.py: error: --python-version %s: %s" % (shown(text), why), TOOL.usage_id,
                         {"message": why, "value": shown(text)}, HELP)
    return list(version)


def sampling_spec(options):
    """The loader and the launch shape that starts it (they decide /dev/shm together)."""
    if options.python_version:
        python, python_source = python_version(options.python_version), "given: --python-version"
    else:
        python = list(sys.version_info[:2])
        python_source = "assumed: the planner's own Python %d.%d (give --python-version for the job's)" % tuple(python)
    method, method_source = worker_start_method(options.launch, options.start_method, python)
    return {"fanouts": fan_outs(options.num_neighbors), "batch_size": count("--batch-size", options.batch_size),
            "workers": count("--num-workers", options.num_workers), "disjoint": options.disjoint,
            "subgraph_type": options.subgraph_type,
            "prefetch_factor": count("--prefetch-factor", options.prefetch_factor),
            "launch": options.launch, "start_method_asked": options.start_method,
            "graph_in_spawn_args": options.graph_in_spawn_args, "python": python, "python_source": python_source,
            "worker_start_method": method, "worker_start_method_source": method_source}


def size_text(value):
    return "%.1f GiB" % (value / float(1 << 30)) if value >= 1 << 30 else "%.0f MiB" % (value / float(1 << 20))


def this_machine():
    """This machine's limits (diagnostics_core.container): the defaults of --host-ram, --shm and --cores."""
    return {"memory": container.get_usable_memory(), "shm": container.get_shm(), "cores": container.get_usable_cores()}


def default_host_ram(machine):
    memory = machine["memory"]
    if not memory.get("usable_bytes"):
        return 512 * 10 ** 9, "assumed: 512GB (this machine's RAM could not be read; give --host-ram)"
    if memory.get("cgroup_limit_bytes") == memory["usable_bytes"]:
        return memory["usable_bytes"], "this machine: the cgroup memory limit, %s (container.get_usable_memory)" % (
            size_text(memory["usable_bytes"]))
    return memory["usable_bytes"], "this machine: MemTotal, %s (container.get_usable_memory)" % size_text(
        memory["usable_bytes"])


def default_shm(host_ram, host_ram_given, machine):
    """/dev/shm when --shm is not given: half of a --host-ram given (Linux's tmpfs default, for another
    machine), else this machine's free /dev/shm."""
    shm = machine["shm"]
    if host_ram_given or not shm:
        return host_ram // 2, ("assumed: tmpfs default, half of --host-ram (Docker gives 64 MB unless --shm-size)"
                               if host_ram_given else "assumed: half of the host RAM (this machine has no /dev/shm)")
    return shm["free_bytes"], "this machine: /dev/shm has %s free of %s (container.get_shm)" % (
        size_text(shm["free_bytes"]), size_text(shm["total_bytes"]))


def hardware_spec(options):
    machine = this_machine() if not (options.host_ram and options.shm and options.cores) else None
    if options.host_ram:
        host_ram, host_ram_source = parse_bytes("--host-ram", options.host_ram), "--host-ram"
    else:
        host_ram, host_ram_source = default_host_ram(machine)
    if options.shm:
        shm, shm_source = parse_bytes("--shm", options.shm), "--shm"
    else:
        shm, shm_source = default_shm(host_ram, bool(options.host_ram), machine)
    if options.cores is not None:
        cores, cores_source = count("--cores", options.cores), "--cores"
    else:
        found = machine["cores"]
        cores = found["usable"] or 1
        cores_source = "this machine: %d usable cores (affinity %s, cgroup quota %s; container.get_usable_cores)" % (
            cores, found["affinity"], found["cgroup_cores"])
    return {"gpus_per_node": count("--gpus-per-node", options.gpus_per_node),
            "gpu_memory": parse_bytes("--gpu-memory", options.gpu_memory), "host_ram": host_ram,
            "host_ram_source": host_ram_source, "cores": cores, "cores_source": cores_source, "shm": shm,
            "shm_source": shm_source, "ranks_per_node": count("--ranks-per-node", options.ranks_per_node),
            "machines": count("--machines", options.machines)}


# --- from the sizes a probe read -------------------------------------------------------------------

class Reader(object):
    """Where probed sizes came from (a file or a store), so that a refusal names the flag, the input and the
    field, with a fix for that kind of input."""

    def __init__(self, options):
        if options.data:
            self.flag, self.where = "--data", {"file": options.data}
            self.fix = ("check how the file was saved (torch.save(data) or torch.save(data.to_dict()) of a real "
                        "graph), or give the sizes: %s" % TOOL.command("--nodes", "N", "--edges", "E", "--features",
                                                                       "F"))
        else:
            from diagnostics_core.contract import script_command
            self.flag, self.where = "--store", {"store": options.store}
            words = [options.store] + (["--path", os.path.abspath(options.path)] if options.path else [])
            self.fix = "%s  # checks the pair call by call; fix the size the store reports" % script_command(
                "check_store_contract.py", *words)

    def whole(self, field, value, low, high):
        return whole(self.flag, value, low, high, fix=self.fix, field=field, **self.where)

    def refuse(self, field, value, why):
        return invalid(self.flag, value, why, fix=self.fix, field=field, **self.where)

    def tensor(self, field, entry):
        """A tensor's shape and element size as the probe read them -> its bytes, each dimension checked."""
        shape = entry.get("shape")
        if not isinstance(shape, list) or len(shape) > MAX_DIMS:
            raise self.refuse(field + ".shape", shape, "expected a list of at most %d dimensions" % MAX_DIMS)
        for index, dim in enumerate(shape):
            self.whole("%s.shape[%d]" % (field, index), dim, 0, MAX_EDGES)
        size = self.whole(field + ".element_size", entry.get("element_size"), 1, MAX_ELEMENT)
        total = size * product(shape)
        if total > MAX_BYTES:
            raise self.refuse(field, shape, "%d bytes, more than any machine holds (%d)" % (total, MAX_BYTES))
        return total


def product(values):
    result = 1
    for value in values:
        result *= value
    return result


def edge_count(reader, field, attrs):
    edge_index = attrs.get("edge_index")
    if not edge_index:
        return 0
    reader.tensor(field + "edge_index", edge_index)
    shape = edge_index["shape"]
    if len(shape) != 2 or shape[0] != 2:
        raise reader.refuse(field + "edge_index.shape", shape, "expected [2, number of edges]")
    return reader.whole(field + "edge_index.shape[1]", shape[1], 0, MAX_EDGES)


def feature_width(reader, field, x):
    if not x or len(x["shape"]) != 2:
        return 0
    return reader.whole(field + "x.shape[1]", x["shape"][1], 0, MAX_FEATURES)


def from_probed(sizes, options):
    """A graph from the sizes probe.py read (file or store), every field checked; --edges fills in what a
    store cannot say."""
    reader = Reader(options)
    if sizes["kind"] == "homo":
        return homo_from_file(reader, sizes, options)
    if sizes["kind"] == "hetero":
        return hetero_from_file(reader, sizes)
    return homo_from_store(reader, sizes, options)


def homo_from_file(reader, sizes, options):
    attrs = sizes["attrs"]
    nodes = reader.whole("num_nodes", sizes.get("nodes"), 1, MAX_NODES)
    byte_counts = dict((name, reader.tensor(name, entry)) for name, entry in attrs.items())
    edges = edge_count(reader, "", attrs)
    x = attrs.get("x")
    features = feature_width(reader, "", x)
    graph = make_homo(nodes, edges, features, x["element_size"] if x else 4, 0, 0, options.undirected,
                      source="file")
    # every tensor that has a row per node or per edge, exactly as saved
    per_node = sum(byte_counts[k] // nodes for k, a in attrs.items() if a["shape"] and a["shape"][0] == nodes
                   and k != "edge_index")
    per_edge = sum(byte_counts[k] // max(edges, 1) for k, a in attrs.items()
                   if k != "edge_index" and a["shape"] and a["shape"][0] == edges and edges != nodes)
    graph.update(node_bytes=per_node, edge_bytes=16 + per_edge)
    graph["describe"] = "%d nodes x %d B, %d edges x %d B (read from the file's shapes)" % (
        nodes, per_node, graph["edges"], 16 + per_edge)
    return graph


def hetero_from_file(reader, sizes):
    node_types, edge_types = {}, {}
    for name, entry in sizes["node_types"].items():
        nodes = reader.whole("%s.num_nodes" % name, entry["nodes"], 0, MAX_NODES)
        byte_counts = dict((attr, reader.tensor("%s.%s" % (name, attr), value))
                           for attr, value in entry["attrs"].items())
        x = entry["attrs"].get("x")
        node_types[name] = {"nodes": nodes, "features": feature_width(reader, name + ".", x),
                            "feature_bytes": byte_counts.get("x", 0) // max(nodes, 1),
                            "node_bytes": sum(byte_counts.values()) // max(nodes, 1)}
    for key, entry in sizes["edge_types"].items():
        names = key.split(",")
        edge_types[key] = {"edges": edge_count(reader, key + ".", entry["attrs"]), "edge_bytes": 16,
                           "src": names[0], "dst": names[-1]}
    reader.whole("all node types", sum(t["nodes"] for t in node_types.values()), 1, MAX_NODES)
    reader.whole("all edge types", sum(t["edges"] for t in edge_types.values()), 0, MAX_EDGES)
    return make_hetero(node_types, edge_types, source="file")


def homo_from_store(reader, sizes, options):
    """Node features from get_tensor_size, edges from --edges; the edge attributes' sizes are checked too."""
    features = []
    for entry in sizes["features"]:
        field = "get_tensor_size(%s, %s)" % (entry["group"], entry["attr"])
        if entry["shape"] is None:
            continue
        if not isinstance(entry["shape"], list) or len(entry["shape"]) > MAX_DIMS:
            raise reader.refuse(field, entry["shape"], "expected a size of at most %d dimensions" % MAX_DIMS)
        for index, dim in enumerate(entry["shape"]):
            reader.whole("%s[%d]" % (field, index), dim, 0, MAX_EDGES)
        if entry["shape"]:
            features.append(dict(entry, field=field))
    for entry in sizes["edges"]:
        for index, dim in enumerate(entry["size"] or ()):
            reader.whole("edge attribute %s size[%d]" % (entry["edge_type"], index), dim, 0, MAX_NODES)
    x = [f for f in features if f["attr"] == "x"] or features
    if x:
        nodes = reader.whole(x[0]["field"] + "[0]", x[0]["shape"][0], 1, MAX_NODES)
    else:
        nodes = reader.whole("num_nodes (no feature tensor: give --nodes)", options.nodes or 0, 1, MAX_NODES)
    width = x[0]["shape"][1] if x and len(x[0]["shape"]) > 1 else 0
    reader.whole(x[0]["field"] + "[1]" if x else "features", width, 0, MAX_FEATURES)
    return make_homo(nodes, options.edges or 0, width, DTYPE_BYTES[options.feature_dtype], 0,
                     8 if options.labels else 0, options.undirected, source="store")
