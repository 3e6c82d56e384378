"""The memory model: plain functions from a spec (sizes, model, sampling) and the coefficients to figures.
Each figure is {"bytes", "how": measured|formula|cited, "source"} so a reader can check where it came from."""

import math

# Cited, not measurable on this CPU-only machine (checked 2026-12-02):
CUDA_CONTEXT_BYTES = 723 << 20
CUDA_CONTEXT_SOURCE = ("cited: the CUDA context and kernels, 723 MiB seen on the first CUDA call "
                       "(discuss.pytorch.org/t/what-is-the-reason-for-pytorchs-gpu-memory-floor/73021); "
                       "varies by GPU, driver and CUDA version: measure with nvidia-smi on the target; checked 2026-12-02")
NCCL_BYTES = 2 * 32 * (4 << 20)
NCCL_SOURCE = ("cited: NCCL keeps NCCL_BUFFSIZE (default 4 MiB, NCCL docs 'Environment Variables') per channel "
               "and direction; bounded here by 32 channels x 2 directions; checked 2026-12-02")
DDP_BUCKET_SOURCE = ("cited: DDP copies gradients into communication buckets (torch.nn.parallel."
                     "DistributedDataParallel docs: gradient_as_bucket_view=False by default), one more "
                     "4 bytes per parameter; checked 2026-12-02")


def figure(value, how, source, **extra):
    return dict({"bytes": int(max(0, round(value))), "how": how, "source": source}, **extra)


def total(*figures):
    return sum(f["bytes"] for f in figures)


def linear(coefficient, edges, nodes):
    return coefficient["per_edge"] * edges + coefficient["per_node"] * nodes


def measured(coefficients, group, name, edges, nodes, what):
    coefficient = coefficients[group][name]
    return figure(linear(coefficient, edges, nodes), "measured",
                  "measured: %s = %.3f B/edge x %d + %.3f B/node x %d (%s, %s)" % (
                      what, coefficient["per_edge"], edges, coefficient["per_node"], nodes, group + "." + name,
                      coefficients["provenance_label"]))


def sampler_terms(graph):
    """(edges, destination nodes) pairs the sampler sorts: one per edge type."""
    if graph["kind"] == "hetero":
        return [(t["edges"], graph["node_types"][t["dst"]]["nodes"]) for t in graph["edge_types"].values()]
    return [(graph["edges"], graph["nodes"])]


def sampler_figure(coefficients, graph, name, what):
    """A loader coefficient summed over the edge types (the sampler builds one CSC per edge type)."""
    parts = [measured(coefficients, "loader", name, e, n, what) for e, n in sampler_terms(graph)]
    if len(parts) == 1:
        return parts[0]
    return figure(total(*parts), "measured", "measured: sum over %d edge types of: %s" % (
        len(parts), "; ".join(p["source"] for p in parts)))


def data_bytes(graph):
    """Bytes of every tensor of the graph in memory: exact from shapes and dtypes."""
    if graph["kind"] == "hetero":
        value = sum(t["nodes"] * t["node_bytes"] for t in graph["node_types"].values())
        value += sum(t["edges"] * t["edge_bytes"] for t in graph["edge_types"].values())
    else:
        value = graph["nodes"] * graph["node_bytes"] + graph["edges"] * graph["edge_bytes"]
    return figure(value, "formula", "formula: tensor bytes from shapes and dtypes (%s)" % graph["describe"])


def process_base(coefficients):
    return figure(coefficients["process_base_bytes"], "measured",
                  "measured: RSS of a process after importing torch and torch_geometric (%s)"
                  % coefficients["provenance_label"])


# --- sampled batches -------------------------------------------------------------------------------

def expected_min(fanout, mean_degree):
    """E[min(k, D)] for a Poisson(mean_degree) in-degree D; k=-1 means every neighbour.

    Summed only over the degrees that carry probability, mean +- (8 standard deviations + 25): the loop's
    length is bounded by that window whatever k is, and the terms are computed in log space, so a large
    mean neither underflows nor overflows."""
    if fanout < 0:
        return float(max(mean_degree, 0.0))
    if mean_degree <= 0 or fanout == 0:
        return 0.0
    spread = 8.0 * math.sqrt(mean_degree) + 25.0
    low, high = max(0, int(mean_degree - spread)), int(math.ceil(mean_degree + spread))
    if fanout <= low:
        return float(fanout)  # fewer than k neighbours has no probability to speak of
    log_mean, accumulated, below = math.log(mean_degree), 0.0, 0.0
    for degree in range(low, min(fanout, high)):
        probability = math.exp(degree * log_mean - mean_degree - math.lgamma(degree + 1))
        accumulated += degree * probability
        below += probability
    if fanout >= high:
        return accumulated  # k or more neighbours has no probability to speak of: E[D] over the window
    return accumulated + fanout * max(0.0, 1.0 - below)


def batch_sizes(nodes, edges, fanouts, batch_size, disjoint=False):
    """-> (worst case, expected) {"nodes", "edges"} of one sampled batch.

    Worst case: every node has at least k neighbours and none repeats (formula); without disjoint trees a
    hop reaches only nodes not seen before and samples each edge at most once, so the graph caps both.
    Expected: Poisson in-degrees of mean E/N; each hop's draws land on uniformly random nodes, of which only
    unseen ones are new."""
    seeds = min(batch_size, nodes)
    worst_nodes, worst_edges, frontier = seeds, 0, seeds
    mean_degree = edges / float(max(nodes, 1))
    seen, new, expected_edges = float(seeds), float(seeds), 0.0
    for fanout in fanouts:
        hop_edges = frontier * (fanout if fanout > 0 else max(int(math.ceil(mean_degree)), 1))
        frontier = hop_edges if disjoint else min(hop_edges, max(nodes - worst_nodes, 0))
        worst_edges += hop_edges
        worst_nodes += frontier
        draws = new * expected_min(fanout, mean_degree)
        expected_edges += draws
        if disjoint:  # every seed's tree apart: a node repeats only inside its own tree
            fresh = draws
        else:
            fresh = (nodes - seen) * (1.0 - math.exp(-draws / float(max(nodes, 1))))
        seen, new = seen + fresh, fresh
    if not disjoint:
        worst_edges = min(worst_edges, edges)
    return {"nodes": int(worst_nodes), "edges": int(worst_edges)}, {"nodes": int(round(seen)),
                                                                   "edges": int(round(expected_edges))}


def batch_tensor_bytes(graph, sizes):
    """Bytes of one batch's tensors: node tensors plus n_id per node, edge tensors plus e_id per edge."""
    return sizes["nodes"] * (graph["node_bytes"] + 8) + sizes["edges"] * (graph["edge_bytes"] + 8)


# --- GPU -------------------------------------------------------------------------------------------

def layer_widths(model, features):
    widths, width = [], features
    for layer in range(model["layers"]):
        out = model["classes"] if layer == model["layers"] - 1 else model["hidden"]
        widths.append((width, out))
        width = out
    return widths


GATHERS_INPUT = ("sage", "gin")  # these gather x before transforming it; gcn, gat, transformer transform first


def parameters(model, features):
    """Parameter count per conv type, from the layer shapes (formula; tests check it against PyG's modules)."""
    count, heads = 0, model["heads"]
    for fan_in, out in layer_widths(model, features):
        if model["conv"] == "sage":
            count += 2 * fan_in * out + out
        elif model["conv"] == "gcn":
            count += fan_in * out + out
        elif model["conv"] == "gat":
            per_head = max(out // heads, 1)
            count += fan_in * heads * per_head + 3 * heads * per_head
        elif model["conv"] == "gin":
            count += fan_in * out + out + out * out + out
        elif model["conv"] == "transformer":
            per_head = max(out // heads, 1)
            count += 4 * (fan_in * heads * per_head + heads * per_head)
    return count


def activation_figures(coefficients, model, features, nodes, edges, what):
    """Autograd-saved bytes of every layer, each layer's output, and the largest gathered message tensor."""
    conv = coefficients["conv"][model["conv"]]
    saved = gathered = outputs = 0.0
    for fan_in, out in layer_widths(model, features):
        width = fan_in if model["conv"] in GATHERS_INPUT else out
        saved += linear(conv["saved_per_channel"], edges, nodes) * width
        outputs += nodes * out * 4
        gathered = max(gathered, linear(conv["gathered_per_channel"], edges, nodes) * width)
    label = coefficients["provenance_label"]
    return [figure(saved, "measured", "measured: %s conv keeps %.3f B/edge + %.3f B/node per channel for backward "
                   "(%s; %s)" % (model["conv"], conv["saved_per_channel"]["per_edge"],
                                 conv["saved_per_channel"]["per_node"], what, label), name="saved_for_backward"),
            figure(outputs, "formula", "formula: nodes x out width x 4 per layer (%s)" % what, name="layer_outputs"),
            figure(gathered, "measured", "measured: largest per-layer gather, %.3f B/edge + %.3f B/node per "
                   "channel (aten::index_select, %s; %s)" % (conv["gathered_per_channel"]["per_edge"],
                                                           conv["gathered_per_channel"]["per_node"], what, label),
                   name="largest_message_tensor")]


def gpu_figures(coefficients, graph, model, nodes, edges, tensors, ddp, what):
    """GPU memory of one rank for one forward/backward over `nodes`/`edges` whose tensors take `tensors`."""
    count = parameters(model, graph["features"])
    figures = [figure(count * 16, "formula", "formula: %d parameters x 16 B (weights, gradients, Adam's two "
                      "moments, float32)" % count, name="parameters_and_optimizer"),
               figure(tensors, "formula", "formula: the %s's tensors" % what, name="input_tensors")]
    figures += activation_figures(coefficients, model, graph["features"], nodes, edges, what)
    if ddp:
        figures.append(figure(count * 4, "cited", DDP_BUCKET_SOURCE, name="ddp_gradient_buckets"))
        figures.append(figure(NCCL_BYTES, "cited", NCCL_SOURCE, name="nccl_buffers"))
    figures.append(figure(CUDA_CONTEXT_BYTES, "cited", CUDA_CONTEXT_SOURCE, name="cuda_context"))
    return {"bytes": total(*figures), "terms": figures}
