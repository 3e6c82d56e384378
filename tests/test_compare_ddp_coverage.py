"""compare_reports.py and the DDP recipe on the cases no other test reproduces: cuDNN drift, a bad flag,
a missing torch stack, a bad --data file, and each tool's own internal-error path."""

import json
import os
import subprocess
import sys

from conftest import CHECKER, ROOT, clean_env, pyenv_python

COMPARE = str(ROOT / "scripts" / "compare_reports.py")
RECIPE = str(ROOT / "scripts" / "ddp_neighbor_training.py")


def static_report(tmp_path, name, cudnn):
    """A real static report of this machine, as a node whose torch loads cuDNN `cudnn` would give it."""
    completed = subprocess.run([sys.executable, str(CHECKER), "--static-only"], capture_output=True, text=True,
                               env=clean_env(), timeout=120)
    report = json.loads(completed.stdout)
    report["cuda"] = dict(report.get("cuda") or {}, cudnn_version=cudnn)
    path = tmp_path / ("%s.json" % name)
    path.write_text(json.dumps(report))
    return path


def run(command, **kwargs):
    completed = subprocess.run(command, capture_output=True, text=True, timeout=300, **kwargs)
    return completed, json.loads(completed.stdout)


def ids(document):
    return [f["id"] for f in document["findings"]]


def test_cudnn_drift_is_a_warning_naming_both_groups(tmp_path):
    a, b = static_report(tmp_path, "node0", 91002), static_report(tmp_path, "node1", 90100)
    completed, document = run([sys.executable, COMPARE, str(a), str(b)])
    drift = [f for f in document["findings"] if f["id"] == "cluster-cudnn-drift"]
    assert drift and drift[0]["severity"] == "warning"
    assert sorted(g["value"] for g in drift[0]["evidence"]["groups"]) == [90100, 91002]
    assert completed.returncode == 0 and document["gates"]["consistent"]["passed"] is True


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


def test_compare_bad_format_is_a_usage_error(tmp_path):
    completed, document = run([sys.executable, COMPARE, "--format", "yaml", str(tmp_path)])
    assert completed.returncode == 2 and len(completed.stderr.splitlines()) == 1
    assert ids(document) == ["cluster-usage-error"] and document["gates"] == {}


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


def test_recipe_without_torch_is_ddp_stack_missing():
    python = pyenv_python("3.12")
    completed, document = run([str(python), RECIPE, "--nprocs", "2"])
    assert completed.returncode == 2 and ids(document) == ["ddp-stack-missing"]
    assert document["findings"][0]["fix"].startswith("%s -m pip install torch==2.13.0" % python)


def test_recipe_with_an_unreadable_data_file_is_ddp_usage_error(tmp_path):
    bad = tmp_path / "graph.pt"
    bad.write_bytes(b"not a torch file")
    completed, document = run([sys.executable, RECIPE, "--nprocs", "2", "--data", str(bad)],
                              env=dict(os.environ, TMPDIR=str(tmp_path)))
    assert completed.returncode == 2 and ids(document) == ["ddp-usage-error"]
    assert str(bad) in document["findings"][0]["evidence"]["message"]


def test_recipe_internal_error_in_the_launcher_is_exit_3_with_json():
    code = ("import sys; sys.argv = [%r, '--nprocs', '2']; sys.path.insert(0, %r); import ddp_neighbor_training as tool\n"
            "def broken(args):\n    raise KeyError('launcher bug')\n"
            "tool.main_spawn = broken\n"
            "sys.exit(tool.main(sys.argv[1:]))" % (RECIPE, str(ROOT / "scripts")))
    completed, document = run([sys.executable, "-c", code], env=dict(os.environ, **{
        k: "" for k in ()}))
    assert completed.returncode == 3 and document["status"] == "internal-error"
    assert ids(document) == ["ddp-internal-error"] and "launcher bug" in document["findings"][0]["evidence"]["error"]
