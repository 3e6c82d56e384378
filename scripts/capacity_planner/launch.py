"""The launch shape decides memory: which processes a node runs, how the loader's workers start, what reaches
/dev/shm per rank, per worker and per batch and when, and the node's memory. Plain functions from sizes to
figures ({"bytes", "how", "source"} with a name); no torch. tests/test_planner_measure.py checks them
against real runs (--measure).

Where the bytes go (torch 2.13, PyG 2.8.1, CPython 3.11 source):
  start          mp.spawn(args=...) pickles its args with torch's reducers (multiprocessing/popen_spawn_posix.py):
                 a graph passed there moves into /dev/shm once per node, with or without loader workers.
  construction   NeighborLoader(num_workers > 0) shares the sampler's CSC copy (colptr, row, perm;
                 torch_geometric/sampler/utils.py to_csc(share_memory=True)) once per rank; with is_sorted=True
                 row is a view of edge_index, so edge_index itself is shared: copied from a mapped file.
  first batch    iter() starts the workers. Spawned and forkserver workers receive the loader pickled (its
                 collate_fn is a bound method): torch's reducers (torch/multiprocessing/reductions.py
                 reduce_storage) move every storage it reaches into /dev/shm in place, once per rank: the
                 graph's tensors and NodeLoader's input nodes, arange(N). Forked workers inherit them: nothing
                 moves. Then (workers x prefetch_factor + 1) batches per rank sit in /dev/shm: those the workers
                 queued (torch/utils/data/dataloader.py _try_put_index) and the one the training loop holds.
How workers start: a rank started by torch.multiprocessing.spawn defaults to spawn whatever the launcher set
(multiprocessing/process.py _bootstrap forces a spawned child's start method); fresh interpreters (one
process, torchrun, srun) default to fork up to Python 3.13 and forkserver from 3.14 (Linux); the loader's
multiprocessing_context, or set_start_method in each rank, wins over both.
Node memory: the processes' anonymous pages (each counted once), the libraries' file pages (once per node:
every process maps the same files), a memory-mapped graph's pages (once per node) and /dev/shm, at the
loader's construction and at steady state; the larger is the peak.
"""

from .model import batch_tensor_bytes, data_bytes, figure, sampler_figure, sampler_terms, total

LAUNCHES = ("torchrun", "spawn", "srun")
START_METHODS = ("fork", "spawn", "forkserver")
PICKLING = ("spawn", "forkserver")  # start methods whose workers receive the loader pickled
LAYOUTS = ("private", "mapped", "spawn-args", "store", "full-graph")
WORKER_HEAP_BATCHES = 1  # a forked worker keeps the last batch it built (malloc) after sending it
PROCESS_KINDS = (  # kind -> the processes coefficient of its anonymous memory, and what it is
    ("launcher", "interpreter_anon_bytes", "the script that calls mp.spawn (torch and PyG imported)"),
    ("agent", "agent_anon_bytes", "torchrun's elastic agent"),
    ("resource_tracker", "resource_tracker_anon_bytes", "multiprocessing's resource tracker"),
    ("rank", "rank_anon_bytes", "a rank (torch, PyG, its process group, the loader's objects)"),
)


def shape(launch, ranks, workers, prefetch, method, layout, python, loader=True):
    """One design's launch shape as plain data. launch: single (one process), torchrun, spawn or srun."""
    return {"launch": launch, "ranks": 1 if launch == "single" else ranks, "workers": workers if loader else 0,
            "prefetch_factor": prefetch, "worker_start_method": method if loader and workers else "main",
            "layout": layout, "python": list(python), "loader": loader}


def worker_start_method(launch, asked, python):
    """-> (how the loader's workers start, why)."""
    if asked:
        return asked, "given: --start-method (the loader's multiprocessing_context, or set_start_method in each rank)"
    if launch == "spawn":
        return "spawn", ("mp.spawn ranks start their workers with spawn, whatever the launcher set "
                         "(multiprocessing/process.py: a spawned child's start method is forced to spawn)")
    if tuple(python) >= (3, 14):
        return "forkserver", "Python %d.%d: forkserver is Linux's default start method from 3.14" % tuple(python)
    return "fork", "Python %d.%d: fork is Linux's default start method up to 3.13" % tuple(python)


def forkserver_preloads_torch(python):
    """A forkserver preloads __main__ (a training script imports torch at its top) only from CPython 3.14:
    before, that preload never ran (forkserver.main looks for a main_path spawn stopped providing; gh-126631,
    fixed by GH-135295), so every forkserver worker imports torch itself, like a spawned one."""
    return tuple(python) >= (3, 14)


def processes(launch_shape):
    """{kind: count} of the job's processes on one node."""
    ranks, workers, method = launch_shape["ranks"], launch_shape["workers"], launch_shape["worker_start_method"]
    kinds = {"rank": ranks}
    if launch_shape["launch"] == "spawn":
        kinds.update(launcher=1, resource_tracker=1)
    elif launch_shape["launch"] == "torchrun":
        kinds["agent"] = 1
    if workers:
        if method == "fork":
            kinds["fork_worker"] = ranks * workers
        elif method == "spawn":
            kinds["spawn_worker"] = ranks * workers
            if launch_shape["launch"] != "spawn":  # a rank with no inherited tracker starts its own
                kinds["resource_tracker"] = kinds.get("resource_tracker", 0) + ranks
        else:
            kinds["forkserver"] = ranks
            kinds["forkserver_worker"] = ranks * workers
            kinds["resource_tracker"] = kinds.get("resource_tracker", 0) + ranks
    return kinds


def edge_index_bytes(graph):
    return sum(16 * edges for edges, _ in sampler_terms(graph))


def input_nodes_bytes(graph):
    """NodeLoader's input nodes when none are given: torch.arange(N), int64 (loader/utils.py get_input_nodes)."""
    return 8 * graph["nodes"]


def feature_bytes(graph):
    if graph["kind"] == "hetero":
        return sum(t["nodes"] * t["feature_bytes"] for t in graph["node_types"].values())
    return graph["nodes"] * graph["feature_bytes"]


def in_flight_batch(graph, expected_sizes, batch_size):
    """One batch as it passes through /dev/shm: its tensors, the ids PyG adds and input_id per seed."""
    return batch_tensor_bytes(graph, expected_sizes) + 8 * min(batch_size, graph["nodes"])


def resident_graph(graph, layout):
    """Bytes of the graph a rank holds in its own memory before the loader: every tensor, none when it is
    mapped from a file or arrives through /dev/shm, all but the node features with a store pair."""
    if layout in ("mapped", "spawn-args"):
        return 0
    data = data_bytes(graph)["bytes"]
    return data - feature_bytes(graph) if layout == "store" else data


# --- /dev/shm ----------------------------------------------------------------------------------------

def shm_terms(launch_shape, graph, coefficients, batch):
    """What lands in /dev/shm, each a figure with its name, `per` (node or rank) and `when` (start,
    construction, first batch). `batch`: bytes of one batch in flight."""
    workers, method, layout = launch_shape["workers"], launch_shape["worker_start_method"], launch_shape["layout"]
    terms = []
    if layout == "spawn-args":
        terms.append(figure(data_bytes(graph)["bytes"], "formula", "formula: the graph's tensors, pickled to the "
                            "ranks by mp.spawn(args=...) once per node, workers or not (%s)" % graph["describe"],
                            name="graph_in_spawn_args", per="node", when="start"))
    if not workers:
        return terms
    name = "sorted_workers_shm_bytes" if layout == "mapped" else "private_workers_shm_bytes"
    what = ("share_memory_() of the sampler's CSC copy, at the loader's construction" if layout != "mapped" else
            "share_memory_() copies the mapped edge_index and colptr, at the loader's construction")
    terms.append(dict(sampler_figure(coefficients, graph, name, what), name="sampler_copy", per="rank",
                      when="construction"))
    if method in PICKLING:
        moved = 0 if layout == "spawn-args" else resident_graph(graph, "private" if layout == "mapped" else layout)
        if layout == "mapped":
            moved -= edge_index_bytes(graph)  # already in /dev/shm with the sampler's copy; x, y are copied
        terms.append(figure(moved, "formula", "formula: the graph's tensors the loader holds (%s), pickled to its "
                            "%s workers at iter(): moved into /dev/shm once per rank, the first worker's start; "
                            "workers 2.. reuse them%s" % (graph["describe"], method, "; passed in mp.spawn's args "
                                                          "they are there already" if layout == "spawn-args" else ""),
                            name="graph_pickled_to_workers", per="rank", when="first batch"))
        terms.append(figure(input_nodes_bytes(graph), "formula", "formula: the loader's input nodes, arange(N) "
                            "int64, pickled with it", name="input_nodes_pickled", per="rank", when="first batch"))
    count = workers * launch_shape["prefetch_factor"] + 1
    terms.append(figure(count * batch, "formula", "formula: (%d workers x prefetch_factor %d + 1) batches of %d B: "
                        "those the workers queued and the one the training loop holds" % (
                            workers, launch_shape["prefetch_factor"], batch),
                        name="batches_in_flight", per="rank", when="first batch", count=count, each=batch))
    return terms


def shm_totals(launch_shape, terms):
    """-> (per rank, per node) bytes."""
    per_rank = sum(t["bytes"] for t in terms if t["per"] == "rank")
    once = sum(t["bytes"] for t in terms if t["per"] == "node")
    return per_rank, launch_shape["ranks"] * per_rank + once


def shm_by_stage(launch_shape, terms):
    """[{"when", "term", "bytes"}]: /dev/shm per node after each term lands, in order. A /dev/shm smaller than
    a level fails there (a Bus error or 'No space left on device')."""
    ranks, level, levels = launch_shape["ranks"], 0, []
    for term in terms:
        level += term["bytes"] * (ranks if term["per"] == "rank" else 1)
        levels.append({"when": term["when"], "term": term["name"], "bytes": level})
    return levels


# --- node memory --------------------------------------------------------------------------------------

def processes_figure(coefficients, kind, key, count, what):
    value = coefficients["processes"][key]
    return figure(count * value, "measured", "measured: %d x %d B of anonymous memory, %s (processes.%s, %s)" % (
        count, value, what, key, coefficients["processes_label"]), name=kind + "s")


def fixed_terms(launch_shape, coefficients, kinds):
    """The anonymous memory of the launcher, agent, trackers and ranks, and the libraries' pages once."""
    terms = [processes_figure(coefficients, kind, key, kinds[kind], what) for kind, key, what in PROCESS_KINDS
             if kinds.get(kind)]
    library = coefficients["processes"]["library_file_bytes"]
    terms.append(figure(library, "measured", "measured: the libraries' file pages (torch, PyG), once per node: "
                        "every process maps the same files (processes.library_file_bytes, %s)"
                        % coefficients["processes_label"], name="libraries"))
    return terms


def worker_terms(launch_shape, coefficients, kinds, batch):
    """The loader workers' own memory: a forked worker adds its copied pages and the batch it last built; a
    spawned worker (and a forkserver's before 3.14) imports torch itself."""
    values, label = coefficients["processes"], coefficients["processes_label"]
    preloaded = forkserver_preloads_torch(launch_shape["python"])
    terms = []
    light = values["fork_worker_anon_bytes"] + WORKER_HEAP_BATCHES * batch
    heavy = values["interpreter_anon_bytes"] + values["spawn_worker_extra_anon_bytes"]
    for kind, each, how in (
            ("fork_worker", light, "a forked worker's own pages (processes.fork_worker_anon_bytes) and the batch "
                                   "it last built (%d B)" % batch),
            ("spawn_worker", heavy, "a spawned worker imports torch itself (processes.interpreter_anon_bytes + "
                                    "spawn_worker_extra_anon_bytes)"),
            ("forkserver", values["interpreter_anon_bytes"] if preloaded else values["bare_forkserver_anon_bytes"],
             "a forkserver that preloaded the script's torch (Python 3.14+)" if preloaded else
             "a forkserver without torch: before Python 3.14 its __main__ preload never runs"),
            ("forkserver_worker", light if preloaded else heavy,
             "forked from a forkserver holding torch (Python 3.14+: predicted, not measured)" if preloaded else
             "before Python 3.14 each forkserver worker imports torch itself, like a spawned one")):
        if kinds.get(kind):
            terms.append(figure(kinds[kind] * each, "measured", "measured: %d x %d B: %s (%s)" % (
                kinds[kind], each, how, label), name=kind + "s"))
    return terms


def sort_transient(coefficients, graph):
    """The sampler's sort (to_csc on an unsorted graph) above its result: measured, construction peak minus
    steady state of a loader without workers."""
    peak = sampler_figure(coefficients, graph, "private_peak_bytes", "construction peak")
    steady = sampler_figure(coefficients, graph, "private_steady_bytes", "steady")
    return figure(peak["bytes"] - steady["bytes"], "measured", "measured: the sampler's sort above its result: "
                  "loader.private_peak_bytes - loader.private_steady_bytes (%s)" % coefficients["provenance_label"],
                  name="sort_transient")


def csc_bytes(graph, is_sorted):
    """The sampler's CSC copy (to_csc): colptr per destination node type, plus row and perm (8 B per edge
    each) unless the graph is sorted (row is then a view of edge_index and there is no perm)."""
    return sum(8 * (nodes + 1) + (0 if is_sorted else 16 * edges) for edges, nodes in sampler_terms(graph))


def per_rank(ranks, value, how, source, name):
    return figure(ranks * value, how, "%s; x %d ranks" % (source, ranks) if ranks > 1 else source, name=name)


def node_memory(launch_shape, graph, coefficients, terms, batch):
    """-> {"construction": {"bytes", "terms"}, "steady": {...}, "peak": {"bytes", "stage"}, "processes"}."""
    ranks, workers, layout = launch_shape["ranks"], launch_shape["workers"], launch_shape["layout"]
    loader, mapped = launch_shape["loader"], layout == "mapped"
    kinds = processes(launch_shape)
    fixed = fixed_terms(launch_shape, coefficients, kinds)
    shm = dict((t["name"], t["bytes"]) for t in terms)
    own = resident_graph(graph, layout)
    graph_term = per_rank(ranks, own, "formula", "formula: the graph's tensors in the rank's own memory (%s)" % (
        "all but the node features: the store serves them" if layout == "store" else graph["describe"]),
        "graph_in_rank")
    inputs = input_nodes_bytes(graph) if loader else 0
    csc = csc_bytes(graph, mapped) if loader and not workers else 0
    csc_term = per_rank(ranks, csc, "formula", "formula: the sampler's CSC copy in the rank (num_workers=0: not "
                        "shared)", "sampler_copy_in_rank")
    construction = fixed + [graph_term, csc_term,
                            per_rank(ranks, inputs, "formula", "formula: the loader's input nodes, arange(N) int64",
                                     "input_nodes")]
    if loader and not mapped:
        sort = sort_transient(coefficients, graph)
        construction.append(per_rank(ranks, sort["bytes"], "measured", sort["source"], "sort_transient"))
    edge_index = edge_index_bytes(graph)
    if mapped:  # the file's pages, once per node: the destination row is read to build colptr, or edge_index
        # is copied whole into /dev/shm; sampling then touches the rest
        construction.append(figure(edge_index if workers else edge_index // 2, "formula", "formula: the mapped "
                                   "file's pages the loader's construction reads, once per node", name="mapped_file"))
    construction.append(figure(sum(v for t, v in shm.items() if t in ("graph_in_spawn_args",))
                               + ranks * shm.get("sampler_copy", 0), "formula",
                               "formula: /dev/shm at the loader's construction (shm_by_stage)", name="shm"))
    pickled = launch_shape["worker_start_method"] in PICKLING
    moved = shm.get("graph_pickled_to_workers", 0) if layout in ("private", "store") else 0
    steady = fixed + [figure(graph_term["bytes"] - ranks * moved, "formula", graph_term["source"] + (
        "; minus what the workers' pickling moved into /dev/shm" if moved else ""), name="graph_in_rank"), csc_term,
        per_rank(ranks, inputs - shm.get("input_nodes_pickled", 0), "formula", "formula: the loader's input nodes "
                 "the rank keeps (moved into /dev/shm when pickled to workers)", "input_nodes")]
    steady += worker_terms(launch_shape, coefficients, kinds, batch)
    if loader and not workers:
        held = coefficients["processes"]["main_batch_heap_batches"]
        steady.append(per_rank(ranks, held * batch, "measured", "measured: %.2f batches of %d B the training loop and "
                               "malloc hold (processes.main_batch_heap_batches, %s)" % (
                                   held, batch, coefficients["processes_label"]), "batches_in_rank"))
    if mapped:
        steady.append(figure(0 if workers and pickled else data_bytes(graph)["bytes"], "formula",
                             "formula: the mapped file's pages once per node%s" % (
                                 " (none: pickled to the workers, every tensor moved into /dev/shm and the mapping "
                                 "was let go)" if workers and pickled else ""), name="mapped_file"))
    steady.append(figure(shm_totals(launch_shape, terms)[1], "formula", "formula: /dev/shm per node (shm_per_node)",
                         name="shm"))
    construction = [t for t in construction if t["bytes"] or t["name"] == "shm"]  # what a stage holds
    steady = [t for t in steady if t["bytes"] or t["name"] in ("shm", "mapped_file")]
    stages = {"construction": {"bytes": total(*construction), "terms": construction},
              "steady": {"bytes": total(*steady), "terms": steady}}
    peak = max(stages, key=lambda name: stages[name]["bytes"])
    return dict(stages, peak={"bytes": stages[peak]["bytes"], "stage": peak}, processes=kinds)
