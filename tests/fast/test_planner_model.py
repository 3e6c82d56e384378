"""The memory model's arithmetic, in process: the expected sampled batch against a direct sum of the Poisson
law, the worst case's caps, parameter counts worked out by hand per conv, tensor bytes, and every figure
saying where it comes from. (tests/test_planner_measured.py checks the same model against real runs.)"""

import math
import time

import pytest

from capacity_planner import coefficients, model

COMMITTED, _ = coefficients.given(None, coefficients.load_committed())


def direct_expected_min(fanout, mean):
    """E[min(k, D)], D ~ Poisson(mean), summed term by term over every degree below k (small k only)."""
    below = accumulated = 0.0
    for degree in range(fanout):
        probability = math.exp(degree * math.log(mean) - mean - math.lgamma(degree + 1))
        accumulated += degree * probability
        below += probability
    return accumulated + fanout * (1.0 - below)


@pytest.mark.parametrize("fanout, mean", [(1, 0.5), (5, 3.0), (10, 14.4), (15, 28.8), (25, 28.8), (3, 200.0),
                                          (300, 200.0), (190, 200.0), (1000, 900.0), (40, 1.0)])
def test_the_expected_draws_per_node_match_the_poisson_sum(fanout, mean):
    assert model.expected_min(fanout, mean) == pytest.approx(direct_expected_min(fanout, mean), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("fanout, mean, expected", [(-1, 7.5, 7.5), (10, 0.0, 0.0), (10 ** 6, 3.0, 3.0),
                                                    (5, 10.0 ** 9, 5.0), (10 ** 6, 10.0 ** 13, 10.0 ** 6)])
def test_the_expected_draws_at_the_edges_of_the_law(fanout, mean, expected):
    assert model.expected_min(fanout, mean) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("fanout, mean", [(10 ** 6, 10.0 ** 6), (10 ** 6, 10.0 ** 13), (99999999999999999999, 5.0),
                                          (10 ** 6, 1e-9)])
def test_the_expected_draws_take_bounded_time_whatever_the_fanout(fanout, mean):
    started = time.perf_counter()
    value = model.expected_min(fanout, mean)
    assert time.perf_counter() - started < 0.1 and 0.0 <= value <= min(fanout, mean) * (1 + 1e-9) + 1e-9


@pytest.mark.parametrize("nodes, edges, fanouts, batch, disjoint, worst", [
    (10 ** 6, 10 ** 7, [15, 10], 1024, False, {"nodes": 1024 * (1 + 15 + 150), "edges": 1024 * (15 + 150)}),
    (10 ** 6, 10 ** 7, [15, 10], 1024, True, {"nodes": 1024 * (1 + 15 + 150), "edges": 1024 * (15 + 150)}),
    (100, 500, [15, 10], 1024, False, {"nodes": 100, "edges": 500}),  # the graph caps both without disjoint trees
    (100, 500, [15, 10], 64, True, {"nodes": 64 * 166, "edges": 64 * 165}),  # disjoint trees repeat nodes
    (1000, 8000, [-1], 10, False, {"nodes": 90, "edges": 80}),  # -1: the mean degree, rounded up
])
def test_the_worst_case_batch(nodes, edges, fanouts, batch, disjoint, worst):
    assert model.batch_sizes(nodes, edges, fanouts, batch, disjoint)[0] == worst


@pytest.mark.parametrize("nodes, edges, fanouts, batch", [(10 ** 6, 10 ** 7, [15, 10], 1024),
                                                          (111000000, 3200000000, [15, 10, 5], 1024),
                                                          (2000, 4000, [25, 25, 25], 512)])
def test_the_expected_batch_stays_within_the_worst_case_and_the_graph(nodes, edges, fanouts, batch):
    worst, expected = model.batch_sizes(nodes, edges, fanouts, batch)
    assert batch <= expected["nodes"] <= min(worst["nodes"], nodes) and expected["edges"] <= worst["edges"]


def test_a_sparse_graph_rarely_repeats_a_node_so_the_expected_batch_nears_the_draws():
    worst, expected = model.batch_sizes(10 ** 9, 10 ** 10, [10], 1000)
    draws = 1000 * model.expected_min(10, 10.0)
    assert expected["edges"] == round(draws) and expected["nodes"] == pytest.approx(1000 + draws, rel=1e-3)


@pytest.mark.parametrize("conv, heads, expected", [
    ("sage", 1, (2 * 32 * 64 + 64) + (2 * 64 * 64 + 64) + (2 * 64 * 10 + 10)),
    ("gcn", 1, (32 * 64 + 64) + (64 * 64 + 64) + (64 * 10 + 10)),
    ("gin", 1, (32 * 64 + 64 + 64 * 64 + 64) + (64 * 64 + 64 + 64 * 64 + 64) + (64 * 10 + 10 + 10 * 10 + 10)),
    ("gat", 4, (32 * 64 + 3 * 64) + (64 * 64 + 3 * 64) + (64 * 4 * 2 + 3 * 4 * 2)),
    ("transformer", 4, 4 * (32 * 64 + 64) + 4 * (64 * 64 + 64) + 4 * (64 * 8 + 8)),
])
def test_the_parameter_count_of_each_conv(conv, heads, expected):
    assert model.parameters({"conv": conv, "layers": 3, "hidden": 64, "heads": heads, "classes": 10}, 32) == expected


@pytest.mark.parametrize("graph, expected", [
    ({"kind": "homo", "nodes": 1000, "node_bytes": 520, "edges": 5000, "edge_bytes": 16, "describe": "d"},
     1000 * 520 + 5000 * 16),
    ({"kind": "hetero", "describe": "d", "node_types": {"a": {"nodes": 10, "node_bytes": 8},
                                                        "b": {"nodes": 20, "node_bytes": 40}},
      "edge_types": {"a,r,b": {"edges": 100, "edge_bytes": 16}}}, 10 * 8 + 20 * 40 + 100 * 16),
])
def test_the_graphs_tensor_bytes_are_exact(graph, expected):
    figure = model.data_bytes(graph)
    assert figure["bytes"] == expected and figure["how"] == "formula"


def test_a_batchs_tensors_carry_the_ids_pyg_adds():
    graph = {"node_bytes": 72, "edge_bytes": 16}
    assert model.batch_tensor_bytes(graph, {"nodes": 10, "edges": 30}) == 10 * (72 + 8) + 30 * (16 + 8)


@pytest.mark.parametrize("ddp", [False, True])
def test_every_gpu_term_says_how_it_was_obtained(ddp):
    graph = {"features": 128}
    net = {"conv": "sage", "layers": 2, "hidden": 256, "heads": 1, "classes": 10}
    gpu = model.gpu_figures(COMMITTED, graph, net, 5000, 60000, 10 ** 6, ddp, "a batch")
    names = [term["name"] for term in gpu["terms"]]
    assert ("nccl_buffers" in names) is ddp and ("ddp_gradient_buckets" in names) is ddp
    assert gpu["bytes"] == sum(term["bytes"] for term in gpu["terms"])
    for term in gpu["terms"]:
        assert term["how"] in ("measured", "formula", "cited") and term["source"].startswith(term["how"])
    parameters = model.parameters(net, 128)
    assert gpu["terms"][0]["bytes"] == parameters * 16


def test_a_measured_figure_names_its_coefficient_and_the_calibration():
    figure = model.measured(COMMITTED, "loader", "private_peak_bytes", 1000, 100, "construction")
    coefficient = COMMITTED["loader"]["private_peak_bytes"]
    assert figure["bytes"] == round(coefficient["per_edge"] * 1000 + coefficient["per_node"] * 100)
    assert "loader.private_peak_bytes" in figure["source"] and COMMITTED["provenance_label"] in figure["source"]
