"""The user's environment around the planner, run as an agent runs it: warnings made errors (PYTHONWARNINGS=error,
python -W error -X dev) and a stray torch/ on PYTHONPATH. A plan from sizes imports no torch, so a stray copy is
only named; a plan whose children import torch (--data, --store, --calibrate) is refused before one starts.
Either way one document names the cause."""

import json
import subprocess
import sys

import pytest

from conftest import ROOT, clean_env, strict_json

PLANNER = ROOT / "scripts" / "plan_capacity.py"


def plan(args, env, flags=()):
    completed = subprocess.run([sys.executable] + list(flags) + [str(PLANNER)] + [str(a) for a in args],
                               capture_output=True, timeout=180, env=env, stdin=subprocess.DEVNULL)
    document = strict_json(completed.stdout)  # exactly one document, whatever the environment
    assert document["exit_code"] == completed.returncode and b"Traceback" not in completed.stderr, completed.stderr
    return document


def ids(document):
    return [f["id"] for f in document["findings"]]


@pytest.fixture(scope="module")
def saved_graph(tmp_path_factory):
    import torch
    from torch_geometric.data import Data
    path = tmp_path_factory.mktemp("graph") / "graph.pt"
    torch.save(Data(x=torch.randn(300, 4), edge_index=torch.randint(0, 300, (2, 2000))).to_dict(), str(path))
    return path


@pytest.mark.finding("environment-warnings-as-errors")
def test_warnings_made_errors_are_named_and_the_file_is_still_read(saved_graph):
    document = plan(["--data", saved_graph], clean_env({"PYTHONWARNINGS": "error"}), flags=("-W", "error", "-X", "dev"))
    assert "environment-warnings-as-errors" in ids(document) and "plan-cheapest-fit" in ids(document)
    assert document["read_sizes"]["attrs"]["x"]["shape"] == [300, 4]  # the child ran on Python's defaults


@pytest.mark.finding("environment-warnings-as-errors")
@pytest.mark.parametrize("how", ["PYTHONWARNINGS=error", "-W error -X dev"])
def test_warnings_made_errors_are_named_in_a_plan_from_sizes(how):
    flags = ("-W", "error", "-X", "dev") if how.startswith("-W") else ()
    document = plan(["--nodes", "1000", "--edges", "5000", "--format", "json"],
                    clean_env({"PYTHONWARNINGS": "error"} if not flags else {}), flags=flags)
    [named] = [f for f in document["findings"] if f["id"] == "environment-warnings-as-errors"]
    assert named["evidence"]["as_errors"] and document["status"] == "warning" and document["designs"]


@pytest.fixture
def stray_torch(tmp_path):
    stray = tmp_path / "vendor"
    (stray / "torch").mkdir(parents=True)
    (stray / "torch" / "__init__.py").write_text("raise ImportError('a stray torch, not the installed one')\n")
    return stray


@pytest.mark.finding("environment-package-shadowed")
@pytest.mark.parametrize("args", [["--data", "graph.pt"], ["--store", "mystores:make", "--edges", "10"],
                                  ["--nodes", "10", "--edges", "10", "--calibrate"]])
def test_a_stray_torch_is_refused_before_a_child_would_import_it(args, stray_torch):
    document = plan(args, clean_env({"PYTHONPATH": str(stray_torch)}))
    assert document["exit_code"] == 2 and ids(document) == ["environment-package-shadowed"]
    found = document["findings"][0]
    assert found["evidence"]["shadowed"][0]["imported_from"].startswith(str(stray_torch))
    assert found["fix"].startswith("unset PYTHONPATH") and "designs" not in document


def test_a_stray_torch_is_only_named_when_the_plan_needs_none(stray_torch):
    document = plan(["--nodes", "1000", "--edges", "5000"], clean_env({"PYTHONPATH": str(stray_torch)}))
    assert document["exit_code"] == 0 and "plan-cheapest-fit" in ids(document)
    [found] = [f for f in document["findings"] if f["id"] == "environment-package-shadowed"]
    assert found["severity"] == "warning" and str(stray_torch) in json.dumps(found["evidence"])
