"""Bad input gets a clear finding and exit code, within a deadline, as an agent runs the planner: absurd sizes
(from flags, a saved graph or a store, each naming its field), a file that is not a graph, a pickle that would
run code (refused without running it), a store that raises or hangs (its fix inert when its folder's name is
shell syntax), a malformed --coefficients file. The same refusals on edited records: tests/fast."""

import json
import os
import pickle
import shutil
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
    (("--nodes", "100", "--edges", "10", "--num-neighbors", "9" * 20), "--num-neighbors"),  # looped forever once
    (("--nodes", "100", "--edges", "10", "--host-ram", "9" * 500), "--host-ram"),  # inf as a float: exit 3 once
])
def test_absurd_sizes_are_usage_errors_naming_the_flag(args, flag):
    completed, document, seconds = plan(*args, timeout=30)
    assert completed.returncode == 2 and len(completed.stderr.splitlines()) == 1, completed.stderr
    assert ids(document) == ["plan-size-invalid"] and document["findings"][0]["evidence"]["flag"] == flag
    assert flag in completed.stderr and seconds < 20


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


@pytest.mark.finding("plan-size-invalid")
def test_a_saved_graph_with_a_negative_node_count_is_refused_naming_the_field(tmp_path):
    # Planned as ok once. Other absurd fields (a negative or 20-digit dimension, a tensor larger than any
    # machine) are refused the same way: tests/fast/test_planner_probed_sizes.py, on the records a probe reads.
    import torch
    from torch_geometric.data import Data
    negative = Data(edge_index=torch.randint(0, 30, (2, 100)))
    negative.num_nodes = -5
    path = tmp_path / "negative.pt"
    torch.save(negative, str(path))
    completed, document, _ = plan("--data", path)
    assert completed.returncode == 2 and ids(document) == ["plan-size-invalid"], completed.stderr
    evidence = document["findings"][0]["evidence"]
    assert evidence["field"] == "num_nodes" and evidence["value"] == -5 and evidence["file"] == str(path)
    assert "num_nodes" in completed.stderr


STORES = """
import time

def hangs():
    time.sleep(3600)

def raises():
    raise ConnectionRefusedError("no server on port 6390")

def wrong():
    return 42
"""
SIZED_STORES = """
import torch
from torch_geometric.testing import MyFeatureStore, MyGraphStore

class NegativeSize(MyFeatureStore):
    def _get_tensor_size(self, attr):
        return (-5, 4)

def negative():
    features = NegativeSize()
    features.put_tensor(torch.randn(10, 4), group_name=None, attr_name="x", index=None)
    return features, MyGraphStore()
"""
# A project folder whose name is shell syntax: the store fixes carry it, and pasted they must run nothing.
HOSTILE_FOLDER = "proj $(:>MARKER);`:>MARKER` x"


def hostile_project(tmp_path):
    folder = tmp_path / HOSTILE_FOLDER
    folder.mkdir()
    (folder / "mystores.py").write_text(STORES)  # imports nothing: a hang is the factory's, not an import's
    (folder / "sizedstores.py").write_text(SIZED_STORES)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    return folder, elsewhere


def pasted_runs_nothing(fix, elsewhere):
    """The fix, pasted in bash from another folder with PATH empty: the folder's name stays a word."""
    subprocess.run([shutil.which("bash"), "-c", fix], cwd=str(elsewhere), env={"PATH": str(elsewhere / "none")},
                   capture_output=True, timeout=20)
    return not any(elsewhere.parent.rglob("MARKER"))


@pytest.mark.finding("plan-store-hung")
def test_a_store_that_hangs_is_ended_at_the_deadline(tmp_path):
    folder, _ = hostile_project(tmp_path)
    completed, document, seconds = plan("--store", "mystores:hangs", "--path", folder, "--edges", 1000,
                                        "--timeout", "3")
    assert completed.returncode == 1 and ids(document) == ["plan-store-hung"], completed.stderr
    assert document["gates"]["planned"]["passed"] is False and seconds < 30
    assert document["findings"][0]["evidence"]["call"] == "mystores:hangs()"


@pytest.mark.finding("plan-store-failed")
def test_a_store_that_raises_or_returns_no_pair_is_named_and_its_fix_runs_nothing(tmp_path):
    folder, elsewhere = hostile_project(tmp_path)
    for factory, text in (("raises", "ConnectionRefusedError"), ("wrong", "not a (FeatureStore, GraphStore)")):
        completed, document, _ = plan("--store", "mystores:" + factory, "--path", folder, "--edges", 1000)
        assert completed.returncode == 1 and ids(document) == ["plan-store-failed"], completed.stderr
        found = document["findings"][0]
        assert text in found["evidence"]["error"] and "check_store_contract.py" in found["fix"]
        assert pasted_runs_nothing(found["fix"], elsewhere), found["fix"]


@pytest.mark.finding("plan-size-invalid")
def test_a_store_reporting_a_negative_size_is_refused_naming_the_call(tmp_path):
    folder, elsewhere = hostile_project(tmp_path)
    completed, document, _ = plan("--store", "sizedstores:negative", "--path", folder, "--edges", 1000)
    assert completed.returncode == 2 and ids(document) == ["plan-size-invalid"], completed.stderr
    found = document["findings"][0]
    assert found["evidence"]["field"] == "get_tensor_size(None, x)[0]" and found["evidence"]["value"] == -5
    assert pasted_runs_nothing(found["fix"], elsewhere), found["fix"]


@pytest.mark.finding("plan-coefficients-invalid")
@pytest.mark.parametrize("kind", ["not JSON", "wrong type", "missing key", "NaN"])
def test_a_malformed_coefficients_file_is_a_usage_error_naming_the_key(kind, tmp_path):
    committed = json.loads((ROOT / "scripts" / "capacity_planner" / "coefficients.json").read_text())
    key = {"not JSON": None, "wrong type": "loader", "missing key": "preprocess.sort",
           "NaN": "conv.sage.saved_per_channel.per_node"}[kind]
    if kind == "wrong type":
        committed["loader"] = "fast"
    elif kind == "missing key":
        del committed["preprocess"]["sort"]
    else:
        committed["conv"]["sage"]["saved_per_channel"]["per_node"] = float("nan")
    path = tmp_path / "coefficients.json"
    path.write_text("{not json" if kind == "not JSON" else json.dumps(committed))
    completed, document, _ = plan("--nodes", 1000, "--edges", 5000, "--coefficients", path)
    assert completed.returncode == 2 and ids(document) == ["plan-coefficients-invalid"], completed.stderr
    evidence = document["findings"][0]["evidence"]
    assert evidence["file"] == str(path) and evidence["key"] == key and str(path) in completed.stderr


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
            "import capacity_planner.cli as cli\n"
            "def broken(*args):\n    raise KeyError('rule bug')\n"
            "cli.SPEC.rules = (broken,)\n"
            "sys.exit(tool.main(['--nodes', '1000', '--edges', '5000']))" % (str(PLANNER), str(ROOT / "scripts")))
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    document = json.loads(completed.stdout)
    assert completed.returncode == 3 and document["status"] == "internal-error"
    assert ids(document)[-1] == "plan-internal-error" and "rule bug" in json.dumps(document["findings"][-1]["evidence"])
