"""The designs a job can take, each sized from the model: one rank's RSS, the node's memory (at the loader's
construction and at steady state), /dev/shm per rank and per node with what lands there and when, GPU memory
per rank, and whether it fits the hardware. A node with GPUs gets the GPU designs (a rank per GPU); a node
without (--gpus-per-node 0) gets the CPU designs (gloo ranks, threads per rank, the cores as a check)."""

from diagnostics_core import command
from . import launch
from .model import (batch_sizes, batch_tensor_bytes, data_bytes, figure, gpu_figures, measured, process_base,
                    sampler_figure, total)

GPU_ORDER = ("full-batch", "one-process-loader", "ddp-shared-copy", "ddp-private-copies", "multi-node",
             "store-pair")
CPU_ORDER = ("cpu-ddp-shared-copy", "cpu-ddp-private-copies", "cpu-ddp-sampling-in-rank")
ORDER = GPU_ORDER + CPU_ORDER
SORTED_FILE = "graph_sorted.pt"


# --- launch lines: a command built from words (diagnostics_core.command), then what the script does --------

def loader_line(spec, is_sorted, workers):
    sampling = spec["sampling"]
    extra = ", is_sorted=True" if is_sorted else ""
    if sampling["disjoint"]:
        extra += ", disjoint=True"
    if sampling["subgraph_type"] != "directional":
        extra += ", subgraph_type=%r" % sampling["subgraph_type"]
    if workers:
        extra += ", persistent_workers=True"
        if sampling["prefetch_factor"] != 2:
            extra += ", prefetch_factor=%d" % sampling["prefetch_factor"]
        if sampling["start_method_asked"]:
            extra += ", multiprocessing_context=%r" % sampling["start_method_asked"]
    return "NeighborLoader(data, num_neighbors=%s, batch_size=%d, num_workers=%d%s)" % (
        sampling["fanouts"], sampling["batch_size"], workers, extra)


def rank_steps(spec, layout, workers):
    """What each rank of the design does with the graph and its loader, as the launch line's comment says it."""
    loader = loader_line(spec, layout == "mapped", workers) if layout != "full-graph" else None
    graph = {"private": "torch.load the graph",
             "mapped": "data = Data.from_dict(torch.load(%r, mmap=True)), saved once after "
                       "data.sort(sort_by_row=False)" % SORTED_FILE,
             "spawn-args": None, "store": None,
             "full-graph": "model(data.x, data.edge_index) on the whole graph"}[layout]
    if layout == "store":
        loader = loader.replace("NeighborLoader(data,", "NeighborLoader((feature_store, graph_store),")
    return [step for step in (graph, loader) if step]


def launch_line(shape, steps, threads=None, gpus=False):
    """The command that starts the ranks (threads: CPU ranks, OMP_NUM_THREADS), then what the script does, as a
    comment: how it starts the ranks (mp.spawn), and what each rank does (`steps`)."""
    ranks, how = shape["ranks"], shape["launch"]
    words = ["OMP_NUM_THREADS=%d" % threads] if threads else []
    if how == "torchrun":
        words += ["torchrun"] + ([] if gpus else ["--standalone"]) + ["--nproc-per-node", ranks, "train.py"]
    elif how == "srun":
        words += ["srun", "--ntasks-per-node", ranks] + (["--gpus-per-node", ranks] if gpus else
                                                         ["--cpus-per-task", threads]) + ["python", "train.py"]
    else:
        words += ["python", "train.py"]
    notes = []
    if how == "spawn":
        notes.append("the launcher loads the graph once and passes it: torch.multiprocessing.spawn(main, "
                     "args=(data,), nprocs=%d)" % ranks if shape["layout"] == "spawn-args" else
                     "torch.multiprocessing.spawn(main, nprocs=%d)" % ranks)
    if threads:
        steps = ["dist.init_process_group('gloo'), torch.set_num_threads(%d)" % threads] + steps
    notes.append(("each rank: " if how != "single" else "") + "; ".join(steps))
    return "%s  # %s" % (command.line(*words), "; ".join(notes))


# --- per process (one rank's RSS) and per node ----------------------------------------------------------

def private_process(spec, coefficients, features_in_ram=True):
    """One process that loads the graph (torch.load, no mmap) and builds its own NeighborLoader."""
    graph, workers = spec["graph"], spec["sampling"]["workers"]
    base, data = process_base(coefficients), data_bytes(graph)
    if not features_in_ram:
        data = figure(data["bytes"] - launch.feature_bytes(graph), "formula",
                      "formula: the graph's tensors without node features (those stay in the store)")
    name = "private_workers" if workers else "private"
    steady = sampler_figure(coefficients, graph, name + "_steady_bytes", "the sampler's CSC copy after construction")
    peak = sampler_figure(coefficients, graph, name + "_peak_bytes", "loader construction peak (sort)")
    return {"steady": [base, data, steady], "peak": [base, data, peak]}


def shared_process(spec, coefficients):
    """One rank that memory-maps a pre-sorted saved graph and builds its loader with is_sorted=True; with
    workers its RSS also holds the /dev/shm copy of the mapped edges it made."""
    graph, workers = spec["graph"], spec["sampling"]["workers"]
    name = "sorted_workers" if workers else "sorted"
    base = process_base(coefficients)
    steady = sampler_figure(coefficients, graph, name + "_steady_bytes", "is_sorted=True loader, private part")
    peak = sampler_figure(coefficients, graph, name + "_peak_bytes", "is_sorted=True loader construction peak")
    if not workers:
        return {"steady": [base, steady], "peak": [base, peak]}
    copy = sampler_figure(coefficients, graph, "sorted_workers_shm_bytes", "share_memory_() copies the mapped "
                          "edges into /dev/shm")
    return {"steady": [base, steady, copy], "peak": [base, steady, copy]}


def in_flight_batch(spec):
    sampling = spec["sampling"]
    _, expected = batch_sizes(spec["graph"]["nodes"], spec["graph"]["edges"], sampling["fanouts"],
                              sampling["batch_size"], sampling["disjoint"])
    return launch.in_flight_batch(spec["graph"], expected, sampling["batch_size"])


def host_block(spec, coefficients, shape, process):
    """One rank's RSS (per_process_*), and the node's: /dev/shm per rank and per node with its terms and when
    each lands, node memory at the loader's construction and at steady state, the processes it runs."""
    steady, peak = total(*process["steady"]), total(*process["peak"])
    batch = in_flight_batch(spec)
    terms = launch.shm_terms(shape, spec["graph"], coefficients, batch)
    per_rank, per_node = launch.shm_totals(shape, terms)
    node = launch.node_memory(shape, spec["graph"], coefficients, terms, batch)
    block = {"per_process_steady": {"bytes": steady, "terms": process["steady"]},
             "per_process_peak": {"bytes": max(steady, peak), "terms": process["peak"]},
             "ranks_per_node": shape["ranks"],
             "shm_per_rank": {"bytes": per_rank, "terms": [t for t in terms if t["per"] == "rank"]},
             "shm_per_node": {"bytes": per_node, "terms": terms},
             "shm_by_stage": launch.shm_by_stage(shape, terms),
             "per_node_construction": node["construction"], "per_node_steady": node["steady"],
             "per_node_peak": node["peak"], "processes": node["processes"]}
    if shape["layout"] == "mapped":
        block["page_cache_per_node"] = [t for t in node["steady"]["terms"] if t["name"] == "mapped_file"][0]
    return block


def shape_record(shape, method_source, **extra):
    return dict(shape, worker_start_method_source=method_source if shape["workers"] else "no loader workers",
                **extra)


# --- GPU designs -------------------------------------------------------------------------------------------

def gpu_shape(spec, ranks, layout, single=False):
    sampling = spec["sampling"]
    how = "single" if single else sampling["launch"]
    method, why = launch.worker_start_method(how, sampling["start_method_asked"], sampling["python"])
    if layout == "private" and sampling["graph_in_spawn_args"] and how == "spawn":
        layout = "spawn-args"
    return launch.shape(how, ranks, sampling["workers"], sampling["prefetch_factor"], method, layout,
                        sampling["python"], loader=layout != "full-graph"), why


def gpu_verdict(design, hardware):
    host = design["host"]
    checks = {"host_ram": host["per_node_peak"]["bytes"] <= hardware["host_ram"],
              "shm": host["shm_per_node"]["bytes"] <= hardware["shm"],
              "gpu": design["gpu"]["bytes"] <= hardware["gpu_memory"]}
    design["fits"] = dict(checks, all=all(checks.values()))
    return design


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


def gpu_design(spec, coefficients, name, title, ranks, layout, process, gpu, expected, single=False):
    shape, why = gpu_shape(spec, ranks, layout, single)
    design = {"design": name, "title": title, "gpus": ranks, "launch_shape": shape_record(shape, why),
              "host": host_block(spec, coefficients, shape, process), "gpu": gpu,
              "launch": launch_line(shape, rank_steps(spec, shape["layout"], shape["workers"]), gpus=True)}
    if expected is not None:
        design["gpu_expected"] = expected
    return gpu_verdict(design, spec["hardware"])


def max_ranks(spec, coefficients, shared):
    """Ranks of ddp-shared-copy one node holds (host RAM and /dev/shm), at most its GPU count."""
    hardware = spec["hardware"]
    for ranks in range(hardware["gpus_per_node"], 0, -1):
        host = host_block(spec, coefficients, gpu_shape(spec, ranks, "mapped")[0], shared)
        if host["per_node_peak"]["bytes"] <= hardware["host_ram"] and host["shm_per_node"]["bytes"] <= hardware["shm"]:
            return ranks
    return 0


def gpu_designs(spec, coefficients):
    """-> [the GPU design records in GPU_ORDER], each with figures and fits."""
    graph, hardware = spec["graph"], spec["hardware"]
    gpus = hardware["gpus_per_node"]
    data = data_bytes(graph)
    base = process_base(coefficients)
    full_gpu = gpu_figures(coefficients, graph, spec["model"], graph["nodes"], graph["edges"], data["bytes"],
                           False, "full graph")
    one, ddp = sampled_gpu(spec, coefficients, False), sampled_gpu(spec, coefficients, True)
    private, shared = private_process(spec, coefficients), shared_process(spec, coefficients)
    designs = [
        gpu_design(spec, coefficients, "full-batch", "full batch on one GPU", 1, "full-graph",
                   {"steady": [base, data], "peak": [base, data]}, full_gpu, None, single=True),
        gpu_design(spec, coefficients, "one-process-loader", "one process with NeighborLoader", 1, "private",
                   private, one["worst_case"], one["expected"], single=True),
        gpu_design(spec, coefficients, "ddp-shared-copy", "DDP, one memory-mapped sorted copy per node", gpus,
                   "mapped", shared, ddp["worst_case"], ddp["expected"]),
        gpu_design(spec, coefficients, "ddp-private-copies", "DDP, each rank loads its own copy" if not (
            spec["sampling"]["graph_in_spawn_args"] and spec["sampling"]["launch"] == "spawn") else
            "DDP, the launcher passes the graph to the ranks (mp.spawn args)", gpus, "private", private,
            ddp["worst_case"], ddp["expected"])]
    designs.append(multi_node(spec, coefficients, shared, ddp, designs[2]))
    store = private_process(spec, coefficients, features_in_ram=False)
    designs.append(dict(gpu_design(spec, coefficients, "store-pair", "DDP over a (FeatureStore, GraphStore) pair, "
                                   "features remote", gpus, "store", store, ddp["worst_case"], ddp["expected"]),
                        note="the stock sampler still reads every edge into each process (graph_store.csc()); only "
                             "features stay remote"))
    return designs


def multi_node(spec, coefficients, shared, ddp, full_node):
    hardware = spec["hardware"]
    gpus = hardware["gpus_per_node"]
    per_node = max_ranks(spec, coefficients, shared)
    wanted = gpus * hardware["machines"]
    nodes_needed = -(-wanted // per_node) if per_node else None
    shape, why = gpu_shape(spec, per_node or gpus, "mapped")
    multi = {"design": "multi-node", "title": "DDP over several nodes, one memory-mapped copy per node",
             "gpus": wanted, "ranks_per_node_that_fit": per_node, "nodes_needed": nodes_needed,
             "launch_shape": shape_record(shape, why), "host": host_block(spec, coefficients, shape, shared),
             "gpu": ddp["worst_case"], "gpu_expected": ddp["expected"],
             "note": "PyG's sampler holds the whole graph in every process: more nodes add GPUs, not room for "
                     "the graph; a graph one node cannot map needs the store pair",
             "launch": multi_node_line(spec, shape, nodes_needed) if per_node else None}
    multi["second_node_forced_when"] = {
        "host_ram_below": full_node["host"]["per_node_peak"]["bytes"],
        "shm_below": full_node["host"]["shm_per_node"]["bytes"],
        "how": "formula: the %d ranks of one full node in ddp-shared-copy (the mapped file's pages once, every "
               "rank's own memory and /dev/shm); below either, fewer ranks fit a node and the GPUs need more nodes"
               % gpus}
    gpu_verdict(multi, hardware)
    multi["fits"]["nodes_available"] = nodes_needed is not None and nodes_needed <= hardware["machines"]
    multi["fits"]["all"] = multi["fits"]["all"] and multi["fits"]["nodes_available"] and per_node > 0
    multi["applies"] = hardware["machines"] > 1 or (nodes_needed or 2) > 1
    if not multi["applies"]:
        multi["fits"]["all"] = False
        multi["note"] = "not needed: one node holds every rank (ddp-shared-copy); " + multi["note"]
    return multi


def multi_node_line(spec, shape, nodes_needed):
    note = "as ddp-shared-copy, the file on each node's local disk; each rank: %s" % loader_line(
        spec, True, spec["sampling"]["workers"])
    if shape["launch"] == "torchrun":
        return "%s  # %s" % (command.line("torchrun", "--nnodes", nodes_needed, "--nproc-per-node", shape["ranks"],
                                          "--rdzv-backend", "c10d", "--rdzv-endpoint", "NODE0:29400", "train.py"), note)
    if shape["launch"] == "srun":
        return "%s  # %s" % (command.line("srun", "--nodes", nodes_needed, "--ntasks-per-node", shape["ranks"],
                                          "--gpus-per-node", shape["ranks"], "python", "train.py"), note)
    return "%s  # on each of %d nodes: torch.multiprocessing.spawn(main, nprocs=%d), MASTER_ADDR=NODE0; %s" % (
        command.line("python", "train.py"), nodes_needed, shape["ranks"], note)


# --- CPU designs (--gpus-per-node 0) ---------------------------------------------------------------------

def cpu_ranks(hardware, workers):
    """-> (ranks per node, why): --ranks-per-node, else one rank per core, each with its loader workers."""
    if hardware["ranks_per_node"]:
        return hardware["ranks_per_node"], "--ranks-per-node"
    ranks = max(1, hardware["cores"] // (1 + workers))
    return ranks, "what fits %d cores: %d ranks of 1 + %d loader workers each" % (hardware["cores"], ranks, workers)


def cpu_design(spec, coefficients, name, title, layout, workers, process):
    sampling, hardware = spec["sampling"], spec["hardware"]
    ranks, ranks_source = cpu_ranks(hardware, workers)
    if layout == "private" and sampling["graph_in_spawn_args"] and sampling["launch"] == "spawn":
        layout = "spawn-args"
    method, why = launch.worker_start_method(sampling["launch"], sampling["start_method_asked"], sampling["python"])
    shape = launch.shape(sampling["launch"], ranks, workers, sampling["prefetch_factor"], method, layout,
                         sampling["python"])
    busy = ranks * (1 + workers)
    threads = max(1, (hardware["cores"] - ranks * workers) // ranks)
    host = host_block(spec, coefficients, shape, process)
    checks = {"host_ram": host["per_node_peak"]["bytes"] <= hardware["host_ram"],
              "shm": host["shm_per_node"]["bytes"] <= hardware["shm"], "cores": busy <= hardware["cores"]}
    return {"design": name, "title": title, "gpus": 0,
            "launch_shape": shape_record(shape, why, ranks_source=ranks_source, threads_per_rank=threads,
                                         busy_processes=busy),
            "host": host, "gpu": None, "launch": launch_line(shape, rank_steps(spec, layout, workers), threads=threads),
            "fits": dict(checks, all=all(checks.values()))}


def cpu_designs(spec, coefficients):
    """-> [the CPU design records in CPU_ORDER]: the loader asked for over one mapped copy per node and over
    a copy per rank, and, when it has workers, the same ranks sampling in the rank (num_workers=0: no
    /dev/shm, no worker processes)."""
    workers = spec["sampling"]["workers"]
    designs = [cpu_design(spec, coefficients, "cpu-ddp-shared-copy", "CPU DDP (gloo), one memory-mapped sorted "
                          "copy per node", "mapped", workers, shared_process(spec, coefficients)),
               cpu_design(spec, coefficients, "cpu-ddp-private-copies", "CPU DDP (gloo), each rank loads its own "
                          "copy", "private", workers, private_process(spec, coefficients))]
    if workers:
        no_workers = dict(spec, sampling=dict(spec["sampling"], workers=0))
        designs.append(cpu_design(no_workers, coefficients, "cpu-ddp-sampling-in-rank", "CPU DDP (gloo), each "
                                  "rank samples its own batches (num_workers=0)", "private", 0,
                                  private_process(no_workers, coefficients)))
    return designs


# --- the plan --------------------------------------------------------------------------------------------

def plan(spec, coefficients):
    """-> [design records in ORDER], each with figures and fits."""
    if spec["hardware"]["gpus_per_node"] == 0:
        return cpu_designs(spec, coefficients)
    return gpu_designs(spec, coefficients)


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


def by_name(designs, name):
    found = [d for d in designs if d["design"] == name]
    return found[0] if found else None


def verdicts(spec, coefficients):
    """-> the plan's facts: every design (ORDER), the one-off preprocessing peaks, the cheapest design that fits
    and the first that fits and uses every GPU given."""
    designs = plan(spec, coefficients)
    fitting = [d["design"] for d in designs if d["fits"]["all"]]
    gpus = spec["hardware"]["gpus_per_node"] * spec["hardware"]["machines"]
    return {"designs": designs, "preprocessing": preprocessing(spec, coefficients),
            "cheapest_fit": next((name for name in ORDER if name in fitting), None),
            "fits_all_gpus": next((d["design"] for d in designs if d["fits"]["all"] and d["gpus"] >= gpus), None)
            if gpus else None}
