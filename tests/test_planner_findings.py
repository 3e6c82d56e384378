"""The planner's answers as an agent gets them: the papers100M-sized plan, each finding on the spec that
produces it, every figure's provenance, and the parameter formula against PyG's own modules."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLANNER = ROOT / "scripts" / "plan_capacity.py"
PAPERS = ("--nodes", 111000000, "--edges", 1600000000, "--undirected", "--features", 128, "--conv", "sage",
          "--layers", 3, "--hidden", 256, "--num-neighbors", "15,10,5", "--batch-size", 1024, "--gpus-per-node", 4,
          "--gpu-memory", "80GB", "--host-ram", "512GB", "--cores", 64)


def plan(*args, timeout=120):
    completed = subprocess.run([sys.executable, str(PLANNER)] + [str(a) for a in args], capture_output=True,
                               text=True, timeout=timeout)
    assert completed.returncode in (0, 1), completed.stderr[-2000:]
    return completed, json.loads(completed.stdout)


def ids(document):
    return [f["id"] for f in document["findings"]]


def design(document, name):
    return [d for d in document["designs"] if d["design"] == name][0]


def figures(value):
    """Every figure (a dict with bytes, how, source) anywhere in the document."""
    if isinstance(value, dict):
        if "how" in value and "source" in value and "bytes" in value:
            yield value
        for item in value.values():
            yield from figures(item)
    elif isinstance(value, list):
        for item in value:
            yield from figures(item)


@pytest.mark.finding("plan-cheapest-fit")
def test_the_papers100m_plan_names_what_fits_and_why_with_every_figure_sourced():
    completed, document = plan(*PAPERS)
    assert completed.returncode == 0 and document["gates"]["fits"]["passed"]
    nodes, edges = 111000000, 3200000000
    graph = document["request"]["graph"]
    assert graph["edges"] == edges and graph["node_bytes"] == 128 * 4 + 8 and graph["edge_bytes"] == 16
    assert design(document, "full-batch")["fits"]["gpu"] is False
    private, shared = design(document, "ddp-private-copies"), design(document, "ddp-shared-copy")
    assert private["fits"]["host_ram"] is False and shared["fits"]["all"] is True
    # one mapped copy per node: the page cache holds the graph once, each rank only its colptr and itself
    assert shared["host"]["page_cache_per_node"]["bytes"] == nodes * 520 + edges * 16
    assert document["cheapest_fit"] == "one-process-loader" and document["fits_all_gpus"] == "ddp-shared-copy"
    found = [f for f in document["findings"] if f["id"] == "plan-cheapest-fit"][0]
    assert found["evidence"]["design"] == "one-process-loader" and "NeighborLoader(" in found["fix"]
    # It uses one GPU of four: the design that uses them all comes with its own launch line.
    assert found["evidence"]["gpus_used"] == 1 and found["evidence"]["all_gpus"]["gpus"] == 4
    assert found["evidence"]["all_gpus"]["launch"] == shared["launch"] and shared["launch"] in found["fix"]
    assert "to use all 4, ddp-shared-copy:" in found["fix"]
    everything = list(figures(document))
    assert len(everything) > 40
    for item in everything:
        assert item["how"] in ("measured", "formula", "cited") and item["source"].startswith(item["how"])
    cited = [f for f in everything if f["how"] == "cited"]
    assert cited and all("docs" in f["source"] or "discuss.pytorch.org" in f["source"] for f in cited)
    steps = dict((s["step"], s) for s in document["preprocessing"])
    assert "ToUndirected" in steps and steps["ToUndirected"]["peak"]["terms"][2]["how"] == "measured"


@pytest.mark.finding("plan-shared-copy-not-shared", "plan-second-node-needed")
def test_workers_copy_the_mapped_graph_per_rank_and_can_force_more_nodes():
    _, document = plan(*PAPERS + ("--num-workers", 4))
    shared = design(document, "ddp-shared-copy")
    per_rank = shared["host"]["shm_per_rank"]["terms"][0]["bytes"]
    assert abs(per_rank - (16 * 3200000000 + 8 * 111000000)) < 0.02 * per_rank  # 16 B/edge + 8 B/node, measured
    found = [f for f in document["findings"] if f["id"] == "plan-shared-copy-not-shared"][0]
    assert found["evidence"]["ranks_per_node"] == 4
    _, document = plan(*PAPERS + ("--num-workers", 4, "--host-ram", "256GB", "--machines", 2))
    found = [f for f in document["findings"] if f["id"] == "plan-second-node-needed"][0]
    assert found["evidence"]["ranks_per_node_that_fit"] < 4 and found["evidence"]["nodes_needed"] > 2
    assert found["fix"].startswith("torchrun --nnodes %d" % found["evidence"]["nodes_needed"])


@pytest.mark.finding("plan-shm-too-small")
def test_a_docker_sized_shm_fails_the_worker_designs_at_construction():
    completed, document = plan("--nodes", 2000000, "--edges", 20000000, "--features", 64, "--num-workers", 2,
                               "--shm", "64MB", "--host-ram", "64GB", "--gpus-per-node", 2)
    found = [f for f in document["findings"] if f["id"] == "plan-shm-too-small"]
    assert found and all(f["evidence"]["shm_available"] == 64 * 10 ** 6 for f in found)
    assert "--shm-size" in found[0]["fix"]
    _, document = plan("--nodes", 2000000, "--edges", 20000000, "--features", 64, "--num-workers", 0,
                       "--shm", "64MB", "--host-ram", "64GB")
    assert "plan-shm-too-small" not in ids(document)  # without workers nothing goes through /dev/shm


@pytest.mark.finding("plan-nothing-fits")
def test_nothing_fits_is_a_failed_gate_naming_each_design():
    completed, document = plan(*PAPERS + ("--host-ram", "16GB", "--gpu-memory", "4GB"))
    assert completed.returncode == 1 and document["gates"]["fits"]["passed"] is False
    found = [f for f in document["findings"] if f["id"] == "plan-nothing-fits"][0]
    assert "host_ram" in found["evidence"]["ddp-shared-copy"] and "gpu" in found["evidence"]["full-batch"]


@pytest.mark.finding("plan-coefficients-other-versions")
def test_coefficients_from_other_versions_are_flagged(tmp_path):
    committed = json.loads((ROOT / "scripts" / "capacity_planner" / "coefficients.json").read_text())
    committed["provenance"]["torch_geometric"] = "2.5.0"
    path = tmp_path / "old.json"
    path.write_text(json.dumps(committed))
    _, document = plan("--nodes", 1000, "--edges", 5000, "--coefficients", path)
    found = [f for f in document["findings"] if f["id"] == "plan-coefficients-other-versions"][0]
    assert found["evidence"]["measured_on"]["torch_geometric"] == "2.5.0" and "--calibrate" in found["fix"]
    _, document = plan("--nodes", 1000, "--edges", 5000)
    assert document["coefficients"]["used"] == "committed"
    assert "plan-coefficients-other-versions" not in ids(document)  # the committed file matches this venv


@pytest.mark.finding("plan-calibration-failed")
def test_a_calibration_out_of_time_falls_back_to_the_committed_coefficients():
    completed, document = plan("--nodes", 1000, "--edges", 5000, "--calibrate", "--timeout", "1")
    assert completed.returncode == 0 and document["coefficients"]["used"] == "committed"
    found = [f for f in document["findings"] if f["id"] == "plan-calibration-failed"][0]
    assert found["evidence"]["problems"] and "--calibrate" in found["fix"]


@pytest.mark.parametrize("conv", ["sage", "gcn", "gat", "gin", "transformer"])
def test_the_parameter_formula_counts_what_pyg_builds(conv):
    import torch
    from torch_geometric import nn
    sys.path.insert(0, str(ROOT / "scripts"))
    from capacity_planner.model import parameters
    model = {"conv": conv, "layers": 3, "hidden": 64, "heads": 4, "classes": 10}
    layers = []
    for fan_in, out in ((32, 64), (64, 64), (64, 10)):
        if conv == "sage":
            layers.append(nn.SAGEConv(fan_in, out))
        elif conv == "gcn":
            layers.append(nn.GCNConv(fan_in, out))
        elif conv == "gat":
            layers.append(nn.GATConv(fan_in, max(out // 4, 1), heads=4))
        elif conv == "gin":
            layers.append(nn.GINConv(torch.nn.Sequential(torch.nn.Linear(fan_in, out), torch.nn.ReLU(),
                                                         torch.nn.Linear(out, out))))
        else:
            layers.append(nn.TransformerConv(fan_in, max(out // 4, 1), heads=4))
    assert parameters(model, 32) == sum(p.numel() for layer in layers for p in layer.parameters())


def test_the_markdown_report_shows_every_design_and_the_whole_provenance():
    completed = subprocess.run([sys.executable, str(PLANNER)] + [str(a) for a in PAPERS] + ["--format", "markdown"],
                               capture_output=True, text=True, timeout=120)
    _, document = plan(*PAPERS)
    assert completed.returncode == document["exit_code"] == 0
    report = completed.stdout
    for item in document["designs"]:
        assert "| %s |" % item["design"] in report
    # the calibration's description is ours and short: shown whole, not cut inside a list
    how = document["coefficients"]["provenance"]["how"].replace("[", "\\[").replace("]", "\\]")
    assert how in report
    assert "Cheapest that fits: `%s`; the first that uses every GPU: `%s`." % (
        document["cheapest_fit"], document["fits_all_gpus"]) in report
