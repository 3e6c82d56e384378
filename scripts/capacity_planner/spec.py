"""The spec: the graph, model, sampling and hardware as plain data, from flags or from the sizes a probe read
from the user's file or store. Every size is checked here; a bad one is a usage error naming the flag."""

import re

from diagnostics_core.cli import UsageError

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8, "int32": 4, "uint8": 1,
               "bool": 1, "int8": 1, "int16": 2}
# Beyond any job this tool will see: a typo (an extra digit group), not a graph.
MAX_NODES, MAX_EDGES, MAX_FEATURES = 10 ** 12, 10 ** 13, 10 ** 6
MAX_BYTES = 1 << 60
UNITS = {"": 1, "b": 1, "k": 10 ** 3, "kb": 10 ** 3, "m": 10 ** 6, "mb": 10 ** 6, "g": 10 ** 9, "gb": 10 ** 9,
         "t": 10 ** 12, "tb": 10 ** 12, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}


def invalid(tool, flag, value, why, fix):
    return UsageError("plan_capacity.py: error: %s %s: %s" % (flag, value, why), "plan-size-invalid",
                      {"flag": flag, "value": value, "why": why}, fix)


def parse_bytes(tool, flag, text):
    match = re.match(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$", str(text))
    unit = match.group(2).lower() if match else None
    if not match or unit not in UNITS:
        raise invalid(tool, flag, text, "expected a size such as 80GB, 512GiB or 64000000000",
                      tool.command("--help"))
    value = int(float(match.group(1)) * UNITS[unit])
    if value > MAX_BYTES:
        raise invalid(tool, flag, text, "larger than any machine (%d bytes)" % MAX_BYTES, tool.command("--help"))
    return value


def count(tool, flag, value, low, high):
    if value is None:
        return None
    if value < low or value > high:
        raise invalid(tool, flag, value, "must be between %d and %d" % (low, high), tool.command("--help"))
    return value


def homo_graph(tool, options):
    if options.nodes is None or options.edges is None:
        raise UsageError("plan_capacity.py: error: give the graph: --nodes and --edges, or --data PATH, or "
                         "--store MODULE:CALLABLE (see --help)", tool.usage_id,
                         {"message": "no graph given"}, tool.command("--help"))
    nodes = count(tool, "--nodes", options.nodes, 1, MAX_NODES)
    edges = count(tool, "--edges", options.edges, 0, MAX_EDGES)
    features = count(tool, "--features", options.features, 0, MAX_FEATURES)
    edge_features = count(tool, "--edge-features", options.edge_features, 0, MAX_FEATURES)
    size = DTYPE_BYTES[options.feature_dtype]
    return make_homo(nodes, edges, features, size, edge_features, 8 if options.labels else 0, options.undirected)


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


def hetero_graph(tool, options):
    """--node-type NAME:NODES:FEATURES and --edge-type SRC,REL,DST:EDGES, repeated."""
    size = DTYPE_BYTES[options.feature_dtype]
    node_types = {}
    for text in options.node_type:
        parts = text.split(":")
        try:
            name, nodes, features = parts[0], int(parts[1]), int(parts[2]) if len(parts) > 2 else 0
        except (IndexError, ValueError):
            raise invalid(tool, "--node-type", text, "expected NAME:NODES[:FEATURES]", tool.command("--help"))
        count(tool, "--node-type", nodes, 1, MAX_NODES)
        count(tool, "--node-type", features, 0, MAX_FEATURES)
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
            raise invalid(tool, "--edge-type", text, "expected SRC,REL,DST:EDGES", tool.command("--help"))
        count(tool, "--edge-type", edges, 0, MAX_EDGES)
        for name in (names[0], names[2]):
            if name not in node_types:
                raise invalid(tool, "--edge-type", text, "node type %r has no --node-type" % name,
                              tool.command("--help"))
        edge_types[key] = {"edges": edges, "edge_bytes": 16, "src": names[0], "dst": names[2]}
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


def from_probed(sizes, options):
    """A graph from the sizes probe.py read (file or store); --edges fills in what a store cannot say."""
    if sizes["kind"] == "homo":
        attrs = sizes["attrs"]
        edge_index = attrs.get("edge_index")
        edges = edge_index["shape"][1] if edge_index and len(edge_index["shape"]) == 2 else 0
        nodes = sizes.get("nodes") or 0
        x = attrs.get("x")
        features = x["shape"][1] if x and len(x["shape"]) == 2 else 0
        graph = make_homo(nodes, edges, features, x["element_size"] if x else 4, 0, 0, options.undirected,
                          source="file")
        # every tensor that has a row per node or per edge, exactly as saved
        per_node = sum(entry_bytes(a) // max(nodes, 1) for k, a in attrs.items()
                       if a["shape"] and a["shape"][0] == nodes and k != "edge_index")
        per_edge = sum(entry_bytes(a) // max(edges, 1) for k, a in attrs.items()
                       if k != "edge_index" and a["shape"] and a["shape"][0] == edges and edges != nodes)
        graph.update(node_bytes=per_node, edge_bytes=16 + per_edge)
        graph["describe"] = "%d nodes x %d B, %d edges x %d B (read from the file's shapes)" % (
            nodes, per_node, graph["edges"], 16 + per_edge)
        return graph
    if sizes["kind"] == "hetero":
        node_types, edge_types = {}, {}
        for name, entry in sizes["node_types"].items():
            x = entry["attrs"].get("x")
            feature_bytes = entry_bytes(x) // max(entry["nodes"], 1) if x else 0
            node_types[name] = {"nodes": entry["nodes"], "features": x["shape"][1] if x and len(x["shape"]) == 2
                                else 0, "feature_bytes": feature_bytes,
                                "node_bytes": sum(entry_bytes(a) // max(entry["nodes"], 1)
                                                  for a in entry["attrs"].values())}
        for key, entry in sizes["edge_types"].items():
            edge_index = entry["attrs"].get("edge_index")
            names = key.split(",")
            edge_types[key] = {"edges": edge_index["shape"][1] if edge_index else 0, "edge_bytes": 16,
                               "src": names[0], "dst": names[-1]}
        return make_hetero(node_types, edge_types, source="file")
    # a store pair: node features from get_tensor_size, edges from --edges
    features = [f for f in sizes["features"] if f["shape"]]
    x = [f for f in features if f["attr"] == "x"] or features
    nodes = x[0]["shape"][0] if x else (options.nodes or 0)
    width = x[0]["shape"][1] if x and len(x[0]["shape"]) > 1 else 0
    graph = make_homo(nodes, options.edges or 0, width, DTYPE_BYTES[options.feature_dtype], 0,
                      8 if options.labels else 0, options.undirected, source="store")
    return graph


def entry_bytes(entry):
    value = entry["element_size"]
    for n in entry["shape"]:
        value *= n
    return value


def model_spec(tool, options):
    heads = count(tool, "--heads", options.heads, 1, 1024)
    return {"conv": options.conv, "layers": count(tool, "--layers", options.layers, 1, 64),
            "hidden": count(tool, "--hidden", options.hidden, 1, 1 << 20), "heads": heads,
            "classes": count(tool, "--classes", options.classes, 1, 1 << 24)}


def sampling_spec(tool, options):
    return {"fanouts": options.num_neighbors, "batch_size": count(tool, "--batch-size", options.batch_size, 1,
                                                                   1 << 30),
            "workers": count(tool, "--num-workers", options.num_workers, 0, 1024), "disjoint": options.disjoint,
            "subgraph_type": options.subgraph_type}


def default_shm(host_ram):
    return host_ram // 2  # Linux mounts /dev/shm (tmpfs) at half of RAM unless told otherwise


def hardware_spec(tool, options):
    host_ram = parse_bytes(tool, "--host-ram", options.host_ram)
    shm = parse_bytes(tool, "--shm", options.shm) if options.shm else default_shm(host_ram)
    return {"gpus_per_node": count(tool, "--gpus-per-node", options.gpus_per_node, 0, 1024),
            "gpu_memory": parse_bytes(tool, "--gpu-memory", options.gpu_memory), "host_ram": host_ram,
            "cores": count(tool, "--cores", options.cores, 1, 1 << 20), "shm": shm,
            "shm_source": "--shm" if options.shm else "assumed: tmpfs default, half of --host-ram (Docker gives "
                                                        "64 MB unless --shm-size)",
            "machines": count(tool, "--machines", options.machines, 1, 1 << 16)}
