"""The launch shape decides memory, in process: how loader workers start (launch, --start-method, the job's
Python), which processes a node runs, what lands in /dev/shm per rank and once per node and when, and node
memory at construction and steady state. Expectations are the formulas of issue 40's measurements restated
here term by term (tests/test_planner_measure.py checks the same model against real runs)."""

import pytest

from capacity_planner import coefficients, launch, model, spec

COMMITTED, _ = coefficients.given(None, coefficients.load_committed())
NODES, EDGES, FEATURES, BATCH = 200000, 2000000, 64, 512
GRAPH = spec.make_homo(NODES, EDGES, FEATURES, 4)
DATA = NODES * (4 * FEATURES + 8) + 16 * EDGES
INPUTS = 8 * NODES
EXPECTED = model.batch_sizes(NODES, EDGES, [10, 5], BATCH)[1]
IN_FLIGHT = EXPECTED["nodes"] * (4 * FEATURES + 8 + 8) + EXPECTED["edges"] * (16 + 8) + 8 * BATCH


def linear(name):
    coefficient = COMMITTED["loader"][name]
    return round(coefficient["per_edge"] * EDGES + coefficient["per_node"] * NODES)


def shaped(how, ranks, workers, asked=None, python=(3, 11), layout="private", prefetch=2):
    method, _ = launch.worker_start_method(how, asked, python)
    return launch.shape(how, ranks, workers, prefetch, method, layout, python)


def shm(shape):
    terms = launch.shm_terms(shape, GRAPH, COMMITTED, IN_FLIGHT)
    return terms, launch.shm_totals(shape, terms)


@pytest.mark.parametrize("how, asked, python, method", [
    ("spawn", None, (3, 11), "spawn"),          # a spawned rank's start method is forced to spawn
    ("spawn", None, (3, 14), "spawn"),
    ("torchrun", None, (3, 11), "fork"),        # fresh interpreters: Python's default
    ("srun", None, (3, 13), "fork"),
    ("single", None, (3, 11), "fork"),
    ("torchrun", None, (3, 14), "forkserver"),  # 3.14: forkserver by default on Linux
    ("srun", None, (3, 15), "forkserver"),
    ("spawn", "fork", (3, 11), "fork"),         # what the script sets wins
    ("torchrun", "spawn", (3, 11), "spawn"),
    ("torchrun", "forkserver", (3, 11), "forkserver"),
])
def test_how_loader_workers_start(how, asked, python, method):
    found, why = launch.worker_start_method(how, asked, python)
    assert found == method and why


CSC = linear("private_workers_shm_bytes")
SORTED_CSC = linear("sorted_workers_shm_bytes")


@pytest.mark.parametrize("how, ranks, workers, asked, python, layout, per_rank, once", [
    ("spawn", 2, 4, None, (3, 11), "private", CSC + DATA + INPUTS + 9 * IN_FLIGHT, 0),  # the job
    ("torchrun", 2, 4, None, (3, 11), "private", CSC + 9 * IN_FLIGHT, 0),  # forked workers: nothing pickled
    ("torchrun", 2, 1, None, (3, 14), "private", CSC + DATA + INPUTS + 3 * IN_FLIGHT, 0),
    ("torchrun", 2, 1, "spawn", (3, 11), "private", CSC + DATA + INPUTS + 3 * IN_FLIGHT, 0),
    ("spawn", 2, 1, "fork", (3, 11), "private", CSC + 3 * IN_FLIGHT, 0),
    ("spawn", 2, 0, None, (3, 11), "private", 0, 0),
    ("torchrun", 2, 0, None, (3, 14), "private", 0, 0),
    ("spawn", 2, 0, None, (3, 11), "spawn-args", 0, DATA),  # pickled by mp.spawn once per node
    ("spawn", 2, 1, None, (3, 11), "spawn-args", CSC + INPUTS + 3 * IN_FLIGHT, DATA),
    ("torchrun", 2, 4, None, (3, 11), "mapped", SORTED_CSC + 9 * IN_FLIGHT, 0),
    ("spawn", 2, 1, None, (3, 11), "mapped", SORTED_CSC + DATA - 16 * EDGES + INPUTS + 3 * IN_FLIGHT, 0),
    ("srun", 4, 2, None, (3, 11), "private", CSC + 5 * IN_FLIGHT, 0),
    ("single", 1, 1, None, (3, 11), "private", CSC + 3 * IN_FLIGHT, 0),
    ("torchrun", 2, 2, None, (3, 11), "private", CSC + 5 * IN_FLIGHT, 0),
])
def test_what_reaches_shm_per_rank_and_once_per_node(how, ranks, workers, asked, python, layout, per_rank, once):
    shape = shaped(how, ranks, workers, asked, python, layout)
    terms, (rank_total, node_total) = shm(shape)
    assert rank_total == pytest.approx(per_rank, abs=2)
    assert node_total == pytest.approx(shape["ranks"] * per_rank + once, abs=4)
    for term in terms:
        assert term["per"] in ("rank", "node") and term["when"] in ("start", "construction", "first batch")
        assert term["how"] in ("measured", "formula") and term["source"].startswith(term["how"])


def test_the_prefetch_factor_sets_the_batches_in_flight():
    terms, _ = shm(shaped("torchrun", 1, 3, prefetch=5))
    [batches] = [t for t in terms if t["name"] == "batches_in_flight"]
    assert batches["count"] == 3 * 5 + 1 and batches["each"] == IN_FLIGHT and batches["bytes"] == 16 * IN_FLIGHT


def test_the_sampler_copy_is_the_csc_formula():
    assert CSC == pytest.approx(16 * EDGES + 8 * (NODES + 1), rel=0.01)  # measured coefficient, PyG's to_csc


@pytest.mark.parametrize("available, fails_at, when", [
    (64 << 20, "sampler_copy", "construction"),
    (200 << 20, "graph_pickled_to_workers", "first batch"),
    (300 << 20, "batches_in_flight", "first batch"),
])
def test_a_small_shm_fails_at_the_term_that_outgrows_it(available, fails_at, when):
    # issue 40's job in mounts of 64, 200 and 300 MiB died at construction, then at the first batch
    levels = launch.shm_by_stage(shaped("spawn", 2, 4), shm(shaped("spawn", 2, 4))[0])
    assert [level["bytes"] for level in levels] == sorted(level["bytes"] for level in levels)
    first = next(level for level in levels if level["bytes"] > available)
    assert (first["term"], first["when"]) == (fails_at, when)


def test_mp_spawn_args_land_before_anything_else():
    levels = launch.shm_by_stage(shaped("spawn", 2, 1, layout="spawn-args"),
                                 shm(shaped("spawn", 2, 1, layout="spawn-args"))[0])
    assert levels[0] == {"when": "start", "term": "graph_in_spawn_args", "bytes": DATA}


@pytest.mark.parametrize("how, ranks, workers, asked, python, kinds", [
    ("spawn", 2, 4, None, (3, 11), {"launcher": 1, "resource_tracker": 1, "rank": 2, "spawn_worker": 8}),
    ("torchrun", 2, 4, None, (3, 11), {"agent": 1, "rank": 2, "fork_worker": 8}),
    ("torchrun", 2, 1, "spawn", (3, 11), {"agent": 1, "rank": 2, "spawn_worker": 2, "resource_tracker": 2}),
    ("torchrun", 2, 1, None, (3, 14), {"agent": 1, "rank": 2, "forkserver": 2, "forkserver_worker": 2,
                                        "resource_tracker": 2}),
    ("srun", 4, 0, None, (3, 11), {"rank": 4}),
    ("single", 3, 2, None, (3, 11), {"rank": 1, "fork_worker": 2}),  # one process whatever the ranks asked
    ("spawn", 2, 0, None, (3, 11), {"launcher": 1, "resource_tracker": 1, "rank": 2}),
])
def test_the_processes_a_node_runs(how, ranks, workers, asked, python, kinds):
    assert launch.processes(shaped(how, ranks, workers, asked, python)) == kinds


def node(shape):
    terms, _ = shm(shape)
    return launch.node_memory(shape, GRAPH, COMMITTED, terms, IN_FLIGHT)


def named(stage, name):
    found = [t for t in stage["terms"] if t["name"] == name]
    return found[0]["bytes"] if found else 0


PROCESSES = COMMITTED["processes"]


def test_without_workers_the_sort_at_construction_is_the_peak():
    memory = node(shaped("torchrun", 2, 0))
    assert memory["peak"]["stage"] == "construction" and named(memory["construction"], "sort_transients") == 0
    assert named(memory["construction"], "sort_transient") > 2 * 12 * EDGES  # measured: about 14 B per edge
    assert named(memory["steady"], "graph_in_rank") == 2 * DATA and named(memory["steady"], "shm") == 0
    assert named(memory["steady"], "agents") == PROCESSES["agent_anon_bytes"]
    assert named(memory["construction"], "libraries") == PROCESSES["library_file_bytes"]  # once per node


def test_spawned_workers_each_import_torch_and_take_the_graph_out_of_the_rank():
    memory = node(shaped("spawn", 2, 4))
    steady = memory["steady"]
    assert memory["peak"]["stage"] == "steady"
    assert named(steady, "spawn_workers") == 8 * (PROCESSES["interpreter_anon_bytes"] +
                                                  PROCESSES["spawn_worker_extra_anon_bytes"])
    assert named(steady, "graph_in_rank") == 0 and named(steady, "input_nodes") == 0  # moved into /dev/shm
    assert named(steady, "launchers") == PROCESSES["interpreter_anon_bytes"]
    assert named(steady, "shm") == shm(shaped("spawn", 2, 4))[1][1]


def test_forked_workers_cost_their_own_pages_and_the_batch_they_built():
    steady = node(shaped("torchrun", 2, 4))["steady"]
    assert named(steady, "fork_workers") == 8 * (PROCESSES["fork_worker_anon_bytes"] + IN_FLIGHT)
    assert named(steady, "graph_in_rank") == 2 * DATA  # inherited, not moved


@pytest.mark.parametrize("asked, python, server, worker", [
    ("forkserver", (3, 11), "bare_forkserver_anon_bytes", None),  # the preload never runs: workers import torch
    (None, (3, 14), "interpreter_anon_bytes", "fork_worker_anon_bytes"),
])
def test_a_forkserver_preloads_the_scripts_torch_only_from_python_3_14(asked, python, server, worker):
    steady = node(shaped("torchrun", 1, 2, asked, python))["steady"]
    assert named(steady, "forkservers") == PROCESSES[server]
    each = (PROCESSES[worker] + IN_FLIGHT if worker else
            PROCESSES["interpreter_anon_bytes"] + PROCESSES["spawn_worker_extra_anon_bytes"])
    assert named(steady, "forkserver_workers") == 2 * each


@pytest.mark.parametrize("workers, asked, file_steady", [(0, None, DATA), (4, None, DATA), (1, "spawn", 0)])
def test_a_mapped_file_is_counted_once_per_node_until_pickling_lets_it_go(workers, asked, file_steady):
    memory = node(shaped("torchrun", 2, workers, asked, layout="mapped"))
    assert named(memory["steady"], "mapped_file") == file_steady
    assert named(memory["steady"], "graph_in_rank") == 0 and named(memory["construction"], "sort_transient") == 0


@pytest.mark.parametrize("shape", [shaped("spawn", 2, 4), shaped("torchrun", 3, 0, layout="mapped"),
                                   shaped("spawn", 2, 1, layout="spawn-args"), shaped("srun", 2, 2, python=(3, 14))])
def test_every_stage_is_the_sum_of_its_sourced_terms(shape):
    memory = node(shape)
    for stage in ("construction", "steady"):
        terms = memory[stage]["terms"]
        assert memory[stage]["bytes"] == sum(t["bytes"] for t in terms) and terms
        for term in terms:
            assert term["name"] and term["how"] in ("measured", "formula")
            assert term["source"].startswith(term["how"])
    assert memory["peak"]["bytes"] == max(memory["construction"]["bytes"], memory["steady"]["bytes"])
