"""compare_reports.py on the cases no other test reproduces: cuDNN drift, a node's launch error, a bad
flag and the internal-error path.
"""

import json
import subprocess
import sys

import pytest

from conftest import CHECKER, ROOT, clean_env
from support.helpers import ids, run


COMPARE = str(ROOT / "scripts" / "compare_reports.py")


def static_report(tmp_path, name, cudnn):
    """A real static report of this machine, as a node whose torch loads cuDNN `cudnn` would give it."""
    completed = subprocess.run([sys.executable, str(CHECKER), "--static-only"], capture_output=True, text=True,
                               env=clean_env(), timeout=120)
    report = json.loads(completed.stdout)
    report["cuda"] = dict(report.get("cuda") or {}, cudnn_version=cudnn)
    path = tmp_path / ("%s.json" % name)
    path.write_text(json.dumps(report))
    return path


@pytest.mark.finding("cluster-cudnn-drift")
def test_cudnn_drift_is_a_warning_naming_both_groups(tmp_path):
    a, b = static_report(tmp_path, "node0", 91002), static_report(tmp_path, "node1", 90100)
    completed, document = run([sys.executable, COMPARE, str(a), str(b)])
    drift = [f for f in document["findings"] if f["id"] == "cluster-cudnn-drift"]
    assert drift and drift[0]["severity"] == "warning"
    assert sorted(g["value"] for g in drift[0]["evidence"]["groups"]) == [90100, 91002]
    assert completed.returncode == 0 and document["gates"]["consistent"]["passed"] is True


@pytest.mark.finding("cluster-node-launch-error")
def test_a_launch_error_in_a_node_report_fails_the_comparison(tmp_path):
    """A node whose own report says launch-master-incomplete makes the job fail: repeated, with its fix."""
    reports = []
    for rank, extra in ((0, {"MASTER_ADDR": "192.0.2.1", "MASTER_PORT": "29500"}), (1, {"MASTER_ADDR": "192.0.2.1"})):
        env = clean_env(dict(extra, RANK=str(rank), WORLD_SIZE="2"))
        completed = subprocess.run([sys.executable, str(CHECKER), "--static-only"], capture_output=True, text=True,
                                   env=env, timeout=120)
        path = tmp_path / ("node%d.json" % rank)
        path.write_text(completed.stdout)
        reports.append(path)
    completed, document = run([sys.executable, COMPARE] + [str(p) for p in reports])
    found = [f for f in document["findings"] if f["id"] == "cluster-node-launch-error"]
    assert completed.returncode == 1 and found
    labels = [r["label"] for r in document["reports"]]
    assert found[0]["evidence"]["hosts"] == {"launch-master-incomplete": [labels[1]]}
    assert "MASTER_PORT" in found[0]["evidence"]["fixes"]["launch-master-incomplete"][labels[1]]


@pytest.mark.finding("cluster-usage-error")
def test_compare_bad_format_is_a_usage_error(tmp_path):
    completed, document = run([sys.executable, COMPARE, "--format", "yaml", str(tmp_path)])
    assert completed.returncode == 2 and len(completed.stderr.splitlines()) == 1
    assert ids(document) == ["cluster-usage-error"] and document["gates"] == {}


@pytest.mark.finding("cluster-compare-internal-error")
def test_compare_internal_error_still_prints_json(tmp_path):
    a, b = static_report(tmp_path, "node0", None), static_report(tmp_path, "node1", None)
    code = ("import sys; sys.argv[0] = %r; sys.path.insert(0, %r); import compare_reports as tool\n"
            "import cluster_compare.rules as rules\n"
            "def broken(*args):\n    raise KeyError('rule bug')\n"
            "rules.rule_ranks = broken\n"
            "sys.exit(tool.main([%r, %r]))" % (COMPARE, str(ROOT / "scripts"), str(a), str(b)))
    completed, document = run([sys.executable, "-c", code])
    assert completed.returncode == 3 and document["status"] == "internal-error"
    assert ids(document)[-1] == "cluster-compare-internal-error"
