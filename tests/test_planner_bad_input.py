"""Bad input gets a clear finding and exit code, within a deadline: absurd sizes, a file that is not a
graph, a pickle that would run code (refused without running it), a store that raises or hangs."""

import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLANNER = ROOT / "scripts" / "plan_capacity.py"


def plan(*args, python=None, timeout=120, cwd=None):
    started = time.time()
    completed = subprocess.run([str(python or sys.executable), str(PLANNER)] + [str(a) for a in args],
                               capture_output=True, text=True, timeout=timeout, cwd=cwd)
    document = json.loads(completed.stdout)  # exactly one document
    return completed, document, time.time() - started


def ids(document):
    return [f["id"] for f in document["findings"]]


@pytest.mark.finding("plan-size-invalid")
@pytest.mark.parametrize("args, flag", [
    (("--nodes", "-5", "--edges", "10"), "--nodes"),
    (("--nodes", "100", "--edges", str(10 ** 15)), "--edges"),
    (("--nodes", "100", "--edges", "10", "--host-ram", "lots"), "--host-ram"),
    (("--nodes", "100", "--edges", "10", "--gpu-memory", "9" * 30), "--gpu-memory"),
    (("--node-type", "paper:-3:4", "--edge-type", "paper,cites,paper:10"), "--node-type"),
])
def test_absurd_sizes_are_usage_errors_naming_the_flag(args, flag):
    completed, document, _ = plan(*args)
    assert completed.returncode == 2 and len(completed.stderr.splitlines()) == 1, completed.stderr
    assert ids(document) == ["plan-size-invalid"] and document["findings"][0]["evidence"]["flag"] == flag
    assert flag in completed.stderr


@pytest.mark.finding("plan-usage-error")
def test_no_graph_and_two_graphs_are_usage_errors(tmp_path):
    for args in ((), ("--nodes", "10", "--edges", "10", "--data", str(tmp_path / "g.pt"))):
        completed, document, _ = plan(*args)
        assert completed.returncode == 2 and ids(document) == ["plan-usage-error"], completed.stderr


@pytest.mark.finding("plan-data-unreadable")
def test_a_file_that_is_not_a_graph_is_refused(tmp_path):
    import torch
    text = tmp_path / "notes.pt"
    text.write_text("not a torch file\n")
    listed = tmp_path / "list.pt"
    torch.save([1, 2, 3], str(listed))
    for path in (text, listed, tmp_path / "missing.pt"):
        completed, document, seconds = plan("--data", path, "--timeout", "30")
        assert completed.returncode == 2 and ids(document) == ["plan-data-unreadable"], (path, completed.stderr)
        assert document["findings"][0]["evidence"]["file"] == str(path) and seconds < 60


class RunsCode(object):
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, ("touch %s" % self.marker,))


@pytest.mark.finding("plan-data-unsafe-pickle")
def test_a_pickle_that_would_run_code_is_refused_without_running_it(tmp_path):
    import torch
    marker = tmp_path / "ran"
    path = tmp_path / "graph.pt"
    torch.save({"x": torch.zeros(2, 2), "hook": RunsCode(marker)}, str(path), pickle_module=pickle)
    completed, document, _ = plan("--data", path)
    assert completed.returncode == 2 and ids(document) == ["plan-data-unsafe-pickle"], completed.stderr
    assert any("system" in name for name in document["findings"][0]["evidence"]["refused"])
    assert not marker.exists()  # nothing in the file ran
    assert "to_dict()" in document["findings"][0]["fix"]


def test_a_saved_data_and_a_tensor_dict_are_sized_from_their_shapes(tmp_path):
    import torch
    from torch_geometric.data import Data, HeteroData
    data = Data(x=torch.randn(3000, 8), edge_index=torch.randint(0, 3000, (2, 20000)), y=torch.zeros(3000).long())
    torch.save(data, str(tmp_path / "data.pt"))
    torch.save(data.to_dict(), str(tmp_path / "dict.pt"))
    hetero = HeteroData()
    hetero["paper"].x = torch.randn(500, 4)
    hetero["author"].x = torch.randn(200, 4)
    hetero["author", "writes", "paper"].edge_index = torch.randint(0, 200, (2, 900))
    torch.save(hetero, str(tmp_path / "hetero.pt"))
    for name in ("data.pt", "dict.pt"):
        completed, document, _ = plan("--data", tmp_path / name)
        assert completed.returncode == 0, completed.stderr
        graph = document["request"]["graph"]
        assert (graph["nodes"], graph["edges"], graph["node_bytes"], graph["edge_bytes"]) == (3000, 20000, 40, 16)
    completed, document, _ = plan("--data", tmp_path / "hetero.pt")
    assert completed.returncode == 0, completed.stderr
    graph = document["request"]["graph"]
    assert graph["kind"] == "hetero" and graph["edge_types"]["author,writes,paper"]["edges"] == 900
    assert graph["node_types"]["paper"]["nodes"] == 500


STORES = '''
import time
from torch_geometric.data import FeatureStore, GraphStore

def hangs():
    time.sleep(3600)

def raises():
    raise ConnectionRefusedError("no server on port 6390")

def wrong():
    return 42
'''


@pytest.mark.finding("plan-store-hung")
def test_a_store_that_hangs_is_ended_at_the_deadline(tmp_path):
    (tmp_path / "mystores.py").write_text(STORES)
    completed, document, seconds = plan("--store", "mystores:hangs", "--path", tmp_path, "--edges", 1000,
                                        "--timeout", "3")
    assert completed.returncode == 1 and ids(document) == ["plan-store-hung"], completed.stderr
    assert document["gates"]["planned"]["passed"] is False and seconds < 30


@pytest.mark.finding("plan-store-failed")
def test_a_store_that_raises_or_returns_no_pair_is_named(tmp_path):
    (tmp_path / "mystores.py").write_text(STORES)
    for factory, text in (("raises", "ConnectionRefusedError"), ("wrong", "not a (FeatureStore, GraphStore)")):
        completed, document, _ = plan("--store", "mystores:" + factory, "--path", tmp_path, "--edges", 1000)
        assert completed.returncode == 1 and ids(document) == ["plan-store-failed"], completed.stderr
        assert text in document["findings"][0]["evidence"]["error"]
        assert "check_store_contract.py" in document["findings"][0]["fix"]


@pytest.mark.finding("plan-stack-missing")
def test_reading_a_file_without_torch_names_what_is_missing(tmp_path):
    from conftest import pyenv_python
    python = pyenv_python("3.12")
    path = tmp_path / "g.pt"
    path.write_bytes(b"x")
    completed, document, _ = plan("--data", path, python=python)
    assert completed.returncode == 2 and ids(document) == ["plan-stack-missing"], completed.stderr
    assert "torch" in document["findings"][0]["evidence"]["missing"]
    completed, document, _ = plan("--nodes", 1000, "--edges", 5000, python=python)  # sizes need no torch
    assert completed.returncode == 0 and document["ok"] is True


@pytest.mark.finding("plan-internal-error")
def test_a_rule_that_breaks_is_exit_3_with_json():
    code = ("import sys; sys.argv[0] = %r; sys.path.insert(0, %r); import plan_capacity as tool\n"
            "import capacity_planner.rules as rules\n"
            "def broken(*args):\n    raise KeyError('rule bug')\n"
            "rules.RULES = (broken,)\n"
            "sys.exit(tool.main(['--nodes', '1000', '--edges', '5000']))" % (str(PLANNER), str(ROOT / "scripts")))
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    document = json.loads(completed.stdout)
    assert completed.returncode == 3 and document["status"] == "internal-error"
    assert ids(document)[-1] == "plan-internal-error" and "rule bug" in document["findings"][-1]["evidence"]["error"]
