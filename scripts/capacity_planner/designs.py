"""The designs a job can take, each sized from the model: host RAM per process and per node (steady and at
the peak of loading), /dev/shm, GPU memory per rank, and whether it fits the hardware."""

from .model import (PREFETCH_SOURCE, batch_sizes, batch_tensor_bytes, data_bytes, figure, gpu_figures,
                    measured, process_base, sampler_figure, total)

ORDER = ("full-batch", "one-process-loader", "ddp-shared-copy", "ddp-private-copies", "multi-node",
         "store-pair")


def loader_line(spec, is_sorted):
    sampling = spec["sampling"]
    extra = ", is_sorted=True" if is_sorted else ""
    if sampling["disjoint"]:
        extra += ", disjoint=True"
    if sampling["subgraph_type"] != "directional":
        extra += ", subgraph_type=%r" % sampling["subgraph_type"]
    return "NeighborLoader(data, num_neighbors=%s, batch_size=%d, num_workers=%d%s%s)" % (
        sampling["fanouts"], sampling["batch_size"], sampling["workers"],
        ", persistent_workers=True" if sampling["workers"] else "", extra)


def sampled_gpu(spec, coefficients, ddp):
    graph, sampling = spec["graph"], spec["sampling"]
    worst, expected = batch_sizes(graph["nodes"], graph["edges"], sampling["fanouts"], sampling["batch_size"],
                                  sampling["disjoint"])
    result = {}
    for name, sizes in (("worst_case", worst), ("expected", expected)):
        how = ("formula: batch_size x (1 + k1 + k1*k2 + ...), capped by the graph" if name == "worst_case" else
               "formula: Poisson in-degrees of mean E/N, unseen nodes only (tests check it against sampled batches)")
        if sampling["subgraph_type"] == "induced":
            how += "; induced: PyG adds every edge among the sampled nodes, not modelled, so edges are a lower bound"
        tensors = batch_tensor_bytes(graph, sizes)
        gpu = gpu_figures(coefficients, graph, spec["model"], sizes["nodes"], sizes["edges"], tensors, ddp,
                          "sampled batch, %s" % name.replace("_", " "))
        result[name] = dict(gpu, batch={"nodes": sizes["nodes"], "edges": sizes["edges"],
                                        "tensor_bytes": tensors, "how": how})
    return result


def transit_shm(spec, gpu):
    workers = spec["sampling"]["workers"]
    return figure(workers * 2 * gpu["expected"]["batch"]["tensor_bytes"], "formula",
                  "%s: %d workers x 2 x %d B per expected batch" % (PREFETCH_SOURCE, workers,
                                                                    gpu["expected"]["batch"]["tensor_bytes"]))


def private_process(spec, coefficients, features_in_ram=True):
    """One process that loads the graph (torch.load, no mmap) and builds its own NeighborLoader."""
    graph, workers = spec["graph"], spec["sampling"]["workers"]
    base, data = process_base(coefficients), data_bytes(graph)
    if not features_in_ram:
        data = figure(data["bytes"] - feature_bytes(graph), "formula",
                      "formula: the graph's tensors without node features (those stay in the store)")
    name = "private_workers" if workers else "private"
    steady = sampler_figure(coefficients, graph, name + "_steady_bytes", "the sampler's CSC copy after construction")
    peak = sampler_figure(coefficients, graph, name + "_peak_bytes", "loader construction peak (sort)")
    shm = sampler_figure(coefficients, graph, name + "_shm_bytes", "share_memory_() of the sampler's copy "
                         "(num_workers > 0)") if workers else figure(0, "formula", "formula: no workers, nothing shared")
    return {"steady": [base, data, steady], "peak": [base, data, peak], "shm": shm}


def feature_bytes(graph):
    if graph["kind"] == "hetero":
        return sum(t["nodes"] * t["feature_bytes"] for t in graph["node_types"].values())
    return graph["nodes"] * graph["feature_bytes"]


def shared_process(spec, coefficients):
    """One rank that memory-maps a pre-sorted saved graph and builds its loader with is_sorted=True."""
    graph, workers = spec["graph"], spec["sampling"]["workers"]
    name = "sorted_workers" if workers else "sorted"
    base = process_base(coefficients)
    steady = sampler_figure(coefficients, graph, name + "_steady_bytes", "is_sorted=True loader, private part")
    peak = sampler_figure(coefficients, graph, name + "_peak_bytes", "is_sorted=True loader construction peak")
    shm = sampler_figure(coefficients, graph, name + "_shm_bytes", "share_memory_() moves the mapped edges into "
                         "/dev/shm (num_workers > 0)") if workers else figure(0, "formula", "formula: no workers, "
                                                                                "the mapped edges stay in the page cache")
    if workers:  # the mapped file's pages stay in the page cache; the /dev/shm copy is this rank's own
        return {"steady": [base, steady, shm], "peak": [base, steady, shm], "shm": shm}
    return {"steady": [base, steady], "peak": [base, peak], "shm": shm}


def host_block(process, ranks, page_cache=None, transit=None):
    steady, peak = total(*process["steady"]), total(*process["peak"])
    shm_per_rank = process["shm"]["bytes"] + (transit["bytes"] if transit else 0)
    cache = page_cache["bytes"] if page_cache else 0
    in_flight = transit["bytes"] if transit else 0  # batches on their way through /dev/shm are RAM too
    block = {"per_process_steady": {"bytes": steady, "terms": process["steady"]},
             "per_process_peak": {"bytes": max(steady, peak), "terms": process["peak"]},
             "ranks_per_node": ranks,
             "per_node_steady": {"bytes": ranks * (steady + in_flight) + cache},
             "per_node_peak": {"bytes": ranks * (max(steady, peak) + in_flight) + cache},
             "shm_per_rank": {"bytes": shm_per_rank, "terms": [process["shm"]] + ([transit] if transit else [])},
             "shm_per_node": {"bytes": ranks * shm_per_rank}}
    if page_cache:
        block["page_cache_per_node"] = page_cache
    return block


def verdict(design, hardware):
    host, gpu = design["host"], design["gpu"]
    checks = {"host_ram": host["per_node_peak"]["bytes"] <= hardware["host_ram"],
              "shm": host["shm_per_node"]["bytes"] <= hardware["shm"],
              "gpu": gpu["bytes"] <= hardware["gpu_memory"]}
    if hardware["gpus_per_node"] == 0:
        checks["gpu"] = False
    design["fits"] = dict(checks, all=all(checks.values()))
    return design


def max_ranks(process, hardware, page_cache=0, transit=0):
    """Ranks of this kind one node holds (host RAM and /dev/shm), at most its GPU count."""
    steady, peak = total(*process["steady"]), total(*process["peak"])
    per_rank, shm = max(steady, peak) + transit, process["shm"]["bytes"] + transit
    ranks = 0
    while ranks < hardware["gpus_per_node"]:
        if page_cache + (ranks + 1) * per_rank > hardware["host_ram"] or (ranks + 1) * shm > hardware["shm"]:
            break
        ranks += 1
    return ranks


def plan(spec, coefficients):
    """-> [design records in ORDER], each with figures and fits."""
    graph, hardware = spec["graph"], spec["hardware"]
    gpus = hardware["gpus_per_node"]
    designs = []
    data = data_bytes(graph)
    full_gpu = gpu_figures(coefficients, graph, spec["model"], graph["nodes"], graph["edges"], data["bytes"],
                           False, "full graph")
    base = process_base(coefficients)
    designs.append(verdict({"design": "full-batch", "title": "full batch on one GPU", "gpus": 1,
                            "host": host_block({"steady": [base, data], "peak": [base, data],
                                                "shm": figure(0, "formula", "formula: no loader, nothing shared")}, 1),
                            "gpu": full_gpu, "launch": "python train.py  # model(data.x, data.edge_index) on the "
                                                      "whole graph, on one GPU"}, hardware))
    sampled_one, sampled_ddp = sampled_gpu(spec, coefficients, False), sampled_gpu(spec, coefficients, True)
    transit = transit_shm(spec, sampled_one) if spec["sampling"]["workers"] else None
    private = private_process(spec, coefficients)
    designs.append(verdict({"design": "one-process-loader", "title": "one process with NeighborLoader", "gpus": 1,
                            "host": host_block(private, 1, transit=transit), "gpu": sampled_one["worst_case"],
                            "gpu_expected": sampled_one["expected"],
                            "launch": "python train.py  # %s" % loader_line(spec, False)}, hardware))
    shared = shared_process(spec, coefficients)
    cache = figure(data["bytes"], "formula", "formula: the memory-mapped file's pages, held once per node in the "
                   "page cache and shared by every rank (torch.load(path, mmap=True))")
    ranks = max(gpus, 1)
    launch_shared = ("torchrun --nproc-per-node %d train.py  # each rank: data = Data.from_dict(torch.load("
                     "'graph_sorted.pt', mmap=True)) saved once after data.sort(sort_by_row=False); %s"
                     % (ranks, loader_line(spec, True)))
    designs.append(verdict({"design": "ddp-shared-copy", "title": "DDP, one memory-mapped sorted copy per node",
                            "gpus": ranks, "host": host_block(shared, ranks, cache, transit),
                            "gpu": sampled_ddp["worst_case"], "gpu_expected": sampled_ddp["expected"],
                            "launch": launch_shared}, hardware))
    designs.append(verdict({"design": "ddp-private-copies", "title": "DDP, each rank loads its own copy",
                            "gpus": ranks, "host": host_block(private, ranks, transit=transit),
                            "gpu": sampled_ddp["worst_case"], "gpu_expected": sampled_ddp["expected"],
                            "launch": "torchrun --nproc-per-node %d train.py  # each rank: torch.load the graph; %s"
                                      % (ranks, loader_line(spec, False))}, hardware))
    per_node = max_ranks(shared, hardware, cache["bytes"], transit["bytes"] if transit else 0)
    wanted = gpus * hardware["machines"]
    nodes_needed = -(-wanted // per_node) if per_node else None
    multi = {"design": "multi-node", "title": "DDP over several nodes, one memory-mapped copy per node",
             "gpus": wanted, "ranks_per_node_that_fit": per_node, "nodes_needed": nodes_needed,
             "host": host_block(shared, per_node or ranks, cache, transit), "gpu": sampled_ddp["worst_case"],
             "gpu_expected": sampled_ddp["expected"],
             "note": "PyG's sampler holds the whole graph in every process: more nodes add GPUs, not room for "
                     "the graph; a graph one node cannot map needs the store pair",
             "launch": ("torchrun --nnodes %s --nproc-per-node %d --rdzv-backend c10d --rdzv-endpoint NODE0:29400 "
                        "train.py  # as ddp-shared-copy, the file on each node's local disk"
                        % (nodes_needed, per_node)) if per_node else None}
    full_node = host_block(shared, ranks, cache, transit)
    multi["second_node_forced_when"] = {
        "host_ram_below": full_node["per_node_peak"]["bytes"], "shm_below": full_node["shm_per_node"]["bytes"],
        "how": "formula: the %d ranks of one full node in ddp-shared-copy (its page cache once, every rank's own "
               "part and /dev/shm copy); below either, fewer ranks fit a node and the GPUs need more nodes" % ranks}
    verdict(multi, hardware)
    multi["fits"]["nodes_available"] = nodes_needed is not None and nodes_needed <= hardware["machines"]
    multi["fits"]["all"] = multi["fits"]["all"] and multi["fits"]["nodes_available"] and per_node > 0
    multi["applies"] = hardware["machines"] > 1 or (nodes_needed or 2) > 1
    if not multi["applies"]:
        multi["fits"]["all"] = False
        multi["note"] = "not needed: one node holds every rank (ddp-shared-copy); " + multi["note"]
    designs.append(multi)
    store = private_process(spec, coefficients, features_in_ram=False)
    designs.append(verdict({"design": "store-pair", "title": "DDP over a (FeatureStore, GraphStore) pair, "
                            "features remote", "gpus": ranks, "host": host_block(store, ranks, transit=transit),
                            "gpu": sampled_ddp["worst_case"], "gpu_expected": sampled_ddp["expected"],
                            "note": "the stock sampler still reads every edge into each process "
                                    "(graph_store.csc()); only features stay remote",
                            "launch": "torchrun --nproc-per-node %d train.py  # NeighborLoader((feature_store, "
                                      "graph_store), ...)" % ranks}, hardware))
    return designs


def preprocessing(spec, coefficients):
    """One-off peaks: ToUndirected (when asked), sorting by destination, saving; each on top of the graph."""
    graph = spec["graph"]
    base, data = process_base(coefficients), data_bytes(graph)
    steps = []
    if graph.get("undirected"):
        given = graph["edges_given"]
        step = measured(coefficients, "preprocess", "to_undirected", given, graph["nodes"],
                        "T.ToUndirected() peak over its input")
        given_data = figure(data["bytes"] - (graph["edges"] - given) * graph["edge_bytes"], "formula",
                            "formula: tensor bytes of the graph before ToUndirected (%d edges)" % given)
        steps.append({"step": "ToUndirected", "peak": {"bytes": base["bytes"] + given_data["bytes"] + step["bytes"],
                                                        "terms": [base, given_data, step]}})
    for name, label in (("sort", "data.sort(sort_by_row=False)"), ("save", "torch.save(data.to_dict(), path)")):
        step = measured(coefficients, "preprocess", name, graph["edges"], graph["nodes"], "%s peak" % label)
        steps.append({"step": label, "peak": {"bytes": base["bytes"] + data["bytes"] + step["bytes"],
                                              "terms": [base, data, step]}})
    for step in steps:
        step["fits_host_ram"] = step["peak"]["bytes"] <= spec["hardware"]["host_ram"]
    return steps


def verdicts(spec, coefficients):
    """-> the plan's facts: every design (ORDER), the one-off preprocessing peaks, the cheapest design that fits
    and the first that fits and uses every GPU given."""
    designs = plan(spec, coefficients)
    fitting = [d["design"] for d in designs if d["fits"]["all"]]
    gpus = spec["hardware"]["gpus_per_node"] * spec["hardware"]["machines"]
    return {"designs": designs, "preprocessing": preprocessing(spec, coefficients),
            "cheapest_fit": next((name for name in ORDER if name in fitting), None),
            "fits_all_gpus": next((d["design"] for d in designs if d["fits"]["all"] and d["gpus"] >= gpus), None)}
