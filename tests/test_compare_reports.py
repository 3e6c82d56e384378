"""scripts/compare_reports.py on real checker reports gathered under different launch settings.

The reports come from the checker itself (--static-only: milliseconds), run
with the environment a node of a misconfigured job would have. Version drift
between hosts is tested on the network-namespace hosts in test_recipe_multihost.py.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CHECKER, ROOT, clean_env

COMPARE = ROOT / "scripts" / "compare_reports.py"


def gather(tmp_path, name, env=None, prefix=()):
    """One checker report, written by the test as the gathering step's shell would."""
    completed = subprocess.run(list(prefix) + [sys.executable, str(CHECKER), "--static-only"],
                               capture_output=True, text=True, env=clean_env(env), timeout=120)
    assert completed.returncode == 0, completed.stderr
    path = tmp_path / ("%s.json" % name)
    path.write_text(completed.stdout)
    return path


def compare(*args):
    completed = subprocess.run([sys.executable, str(COMPARE)] + [str(a) for a in args],
                               capture_output=True, text=True, timeout=120)
    document = json.loads(completed.stdout) if "--format" not in args else None
    if document is not None:
        assert document["exit_code"] == completed.returncode
        # One contract in every tool: a refused command line applies no gate.
        assert list(document["gates"]) == ([] if document["status"] == "usage-error" else ["consistent"])
    return completed, document


def ids(document):
    return [f["id"] for f in document["findings"]]


def launch(rank, world=2, **extra):
    # One rank per node of a multi-node job. GLOO_SOCKET_IFNAME names an interface every host has, so a
    # host name that resolves to loopback (as on this machine) is no launch error the compare repeats.
    env = {"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
           "MASTER_ADDR": "192.0.2.1", "MASTER_PORT": "29500", "GLOO_SOCKET_IFNAME": "lo"}
    env.update(extra)
    return env


@pytest.mark.finding("cluster-report-incomplete")
def test_agreeing_reports_pass_and_name_the_groups(tmp_path):
    a, b = gather(tmp_path, "node0", launch(0)), gather(tmp_path, "node1", launch(1))
    completed, document = compare(a, b)
    assert completed.returncode == 0, completed.stdout
    assert document["ok"] and document["gates"]["consistent"]["passed"]
    assert [r["rank"] for r in document["reports"]] == [0, 1]
    # Same host here, so labels carry the rank; each fact has one group holding both.
    labels = [r["label"] for r in document["reports"]]
    assert len(set(labels)) == 2
    assert document["groups"]["MASTER_ADDR"] == [{"value": "192.0.2.1", "count": 2, "hosts": labels}]
    assert document["counts"] == {"given": 2, "read": 2, "too_large": 0, "listed": 2}
    # Static-only reports lack torch facts: said, not silently passed.
    incomplete = [f for f in document["findings"] if f["id"] == "cluster-report-incomplete"]
    assert incomplete and "torch" in incomplete[0]["evidence"]["missing"]


@pytest.mark.finding("cluster-launch-disagrees")
def test_launch_variables_that_disagree(tmp_path):
    a = gather(tmp_path, "node0", launch(0))
    b = gather(tmp_path, "node1", launch(1, MASTER_ADDR="node0.cluster", MASTER_PORT="29501"))
    completed, document = compare(a, b)
    assert completed.returncode == 1
    facts = {f["evidence"]["fact"]: f for f in document["findings"] if f["id"] == "cluster-launch-disagrees"}
    assert sorted(facts) == ["MASTER_ADDR", "MASTER_PORT"]
    values = sorted(g["value"] for g in facts["MASTER_PORT"]["evidence"]["groups"])
    assert values == ["29500", "29501"]
    assert facts["MASTER_PORT"]["fix"].startswith("export MASTER_PORT=")


@pytest.mark.finding("cluster-rank-duplicate", "cluster-rank-missing")
def test_duplicate_and_missing_ranks(tmp_path):
    # Two processes got RANK=0 (exported in the job script); rank 1 and 2 never report.
    a = gather(tmp_path, "node0", launch(0, world=3))
    b = gather(tmp_path, "node1", launch(0, world=3))
    completed, document = compare(a, b)
    assert completed.returncode == 1
    duplicate = [f for f in document["findings"] if f["id"] == "cluster-rank-duplicate"][0]
    assert list(duplicate["evidence"]["duplicates"]) == ["RANK=0"]
    assert duplicate["evidence"]["duplicates"]["RANK=0"]["count"] == 2
    missing = [f for f in document["findings"] if f["id"] == "cluster-rank-missing"][0]
    assert missing["evidence"]["missing"] == [1, 2] and missing["evidence"]["world_size"] == 3


@pytest.mark.finding("cluster-socket-ifname-missing")
def test_interface_variable_naming_a_missing_interface(tmp_path):
    real = sorted(p.name for p in Path("/sys/class/net").iterdir())[0]
    a = gather(tmp_path, "node0", launch(0, GLOO_SOCKET_IFNAME=real))
    b = gather(tmp_path, "node1", launch(1, GLOO_SOCKET_IFNAME="ib0-missing"))
    completed, document = compare(a, b)
    assert completed.returncode == 1
    found = [f for f in document["findings"] if f["id"] == "cluster-socket-ifname-missing"][0]
    (label, host), = found["evidence"]["hosts"].items()
    assert label.endswith("rank 1") and found["evidence"]["count"] == 1
    assert host["variables"]["GLOO_SOCKET_IFNAME"]["absent"] == ["ib0-missing"] and real in host["interfaces"]


@pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset is not installed (enable: apt-get install util-linux)")
@pytest.mark.finding("cluster-cpu-count-differs")
def test_core_counts_that_differ_are_info(tmp_path):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 usable cores to restrict one report to 1")
    a = gather(tmp_path, "node0", launch(0))
    b = gather(tmp_path, "node1", launch(1), prefix=("taskset", "-c", "0"))
    completed, document = compare(a, b)
    assert completed.returncode == 0
    found = [f for f in document["findings"] if f["id"] == "cluster-cpu-count-differs"][0]
    assert found["severity"] == "info"
    per_process = [(p["hosts"], p["cores_per_process"]) for p in found["evidence"]["per_process"]]
    assert per_process[0] == ([document["reports"][1]["label"]], 1)
    assert "OMP_NUM_THREADS=1 " in found["fix"]


def test_unreadable_report_is_a_usage_error(tmp_path):
    a = gather(tmp_path, "node0", launch(0))
    broken = tmp_path / "node1.json"
    broken.write_text("srun: error: node1: task 1: Exited with exit code 1\n")
    completed, document = compare(a, broken)
    assert completed.returncode == 2
    assert completed.stderr.count("\n") == 1 and "node1.json" in completed.stderr
    assert ids(document) == ["cluster-report-unreadable"]
    assert document["findings"][0]["evidence"]["file"] == str(broken)


@pytest.mark.finding("cluster-report-unreadable")
def test_no_report_is_a_usage_error(tmp_path):
    completed, document = compare(tmp_path)  # an empty folder
    assert completed.returncode == 2 and ids(document) == ["cluster-report-unreadable"]


def test_folder_of_reports_and_markdown(tmp_path):
    folder = tmp_path / "reports"
    folder.mkdir()
    gather(folder, "node0", launch(0))
    gather(folder, "node1", launch(1, MASTER_PORT="29501"))
    completed, _ = compare(folder, "--format", "markdown")
    assert completed.returncode == 1
    assert "| MASTER_PORT **(differs)** |" in completed.stdout
    assert "## error `cluster-launch-disagrees`: MASTER_PORT differs" in completed.stdout


@pytest.mark.finding("cluster-node-launch-error")
def test_a_launch_error_in_a_node_report_fails_the_comparison(tmp_path):
    """A node whose own report says launch-master-incomplete makes the job fail: repeated, with its fix."""
    a = gather(tmp_path, "node0", {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "192.0.2.1", "MASTER_PORT": "29500"})
    b = gather(tmp_path, "node1", {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "192.0.2.1"})
    completed, document = compare(a, b)
    found = [f for f in document["findings"] if f["id"] == "cluster-node-launch-error"]
    assert completed.returncode == 1 and found
    labels = [r["label"] for r in document["reports"]]
    assert found[0]["evidence"]["hosts"] == {"launch-master-incomplete": {"count": 1, "hosts": [labels[1]]}}
    assert "MASTER_PORT" in found[0]["evidence"]["fixes"]["launch-master-incomplete"][labels[1]]
