"""The planner as an agent runs it: its verdicts through the real entry (JSON or markdown on stdout, the exit
code of each gate), the calibration's deadline on a real child, coefficients measured on other versions, and
the parameter formula against PyG's own modules. The arithmetic and rules behind each verdict are checked in
process in tests/fast/test_planner_plans.py."""

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


@pytest.mark.finding("plan-cheapest-fit", "plan-nothing-fits", "plan-shm-too-small", "plan-second-node-needed")
@pytest.mark.parametrize("args, code, expected", [
    (PAPERS, 0, "plan-cheapest-fit"),
    (PAPERS + ("--host-ram", "16GB", "--gpu-memory", "4GB"), 1, "plan-nothing-fits"),
    (("--nodes", 2000000, "--edges", 20000000, "--features", 64, "--num-workers", 2, "--shm", "64MB", "--host-ram",
      "64GB", "--gpus-per-node", 2), 0, "plan-shm-too-small"),
    (PAPERS + ("--num-workers", 4, "--host-ram", "256GB", "--machines", 2), 0, "plan-second-node-needed"),
])
def test_each_verdict_arrives_as_one_document_with_its_exit_code(args, code, expected):
    completed, document = plan(*args)
    assert completed.returncode == document["exit_code"] == code and expected in ids(document)
    assert document["gates"]["fits"]["passed"] is (code == 0) and document["tool"]["name"] == "plan_capacity.py"


def test_the_markdown_report_is_the_same_plan_for_people():
    completed = subprocess.run([sys.executable, str(PLANNER)] + [str(a) for a in PAPERS] + ["--format", "markdown"],
                               capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0 and completed.stdout.startswith("# Capacity plan: ok (exit 0)")
    assert "| ddp-shared-copy | 4 |" in completed.stdout
    assert "Cheapest that fits: `one-process-loader`" in completed.stdout


@pytest.mark.finding("plan-coefficients-other-versions")
def test_coefficients_from_other_versions_are_flagged(tmp_path):
    committed = json.loads((ROOT / "scripts" / "capacity_planner" / "coefficients.json").read_text())
    committed["provenance"]["torch_geometric"] = "2.5.0"
    path = tmp_path / "old.json"
    path.write_text(json.dumps(committed))
    _, document = plan("--nodes", 1000, "--edges", 5000, "--coefficients", path)
    found = [f for f in document["findings"] if f["id"] == "plan-coefficients-other-versions"][0]
    assert found["evidence"]["measured_on"]["torch_geometric"] == "2.5.0" and "--calibrate" in found["fix"]
    assert "--coefficients" not in found["fix"]  # the two exclude each other: the fix swaps one for the other
    _, document = plan("--nodes", 1000, "--edges", 5000)
    assert document["coefficients"]["used"] == "committed"
    assert "plan-coefficients-other-versions" not in ids(document)  # the committed file matches this venv


@pytest.mark.finding("plan-calibration-failed")
def test_a_calibration_out_of_time_falls_back_to_the_committed_coefficients():
    completed, document = plan("--nodes", 1000, "--edges", 5000, "--calibrate", "--timeout", "1")
    assert completed.returncode == 0 and document["coefficients"]["used"] == "committed"
    found = [f for f in document["findings"] if f["id"] == "plan-calibration-failed"][0]
    assert found["evidence"]["problems"] and "--calibrate" in found["fix"]
    assert document["calibration"]["state"] == "failed" and found["evidence"]["finished"] == 0


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
