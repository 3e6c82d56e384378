"""The benchmark script works and refuses to report a misbehaving command (timings are not asserted)."""

import json
import statistics
import subprocess
import sys

import pytest

from conftest import ROOT, clean_env, pyenv_python

BENCHMARK = ROOT / "maintainers" / "benchmark_checker.py"


def run_benchmark(*args, python=sys.executable):
    return subprocess.run([str(python), str(BENCHMARK)] + list(args), capture_output=True, text=True,
                          timeout=300, env=clean_env())


def test_quick_run_reports_medians_and_ratios_of_alternated_pairs():
    done = run_benchmark("--quick", "--only", "help", "static")
    assert done.returncode in (0, 1), done.stderr  # 1 only means a target was missed
    report = json.loads(done.stdout)
    assert report["quick"] is True and report["runs"] == 2
    assert [p["name"] for p in report["pairs"]] == ["help", "static"]
    for pair in report["pairs"]:
        assert len(pair["a"]["samples_s"]) == len(pair["b"]["samples_s"]) == 2
        assert abs(pair["a"]["median_s"] - statistics.median(pair["a"]["samples_s"])) < 2e-4  # rounded
        assert pair["ratio"] == pytest.approx(pair["a"]["median_s"] / pair["b"]["median_s"], rel=0.01)
        assert pair["b"]["command"][1:] == ["-c", "pass"]
    help_pair = report["pairs"][0]
    assert help_pair["target"]["limit"] == 5.0 and help_pair["met"] == (help_pair["ratio"] <= 5.0)
    assert report["all_met"] == (help_pair["met"] is True)
    assert "verdict" in done.stderr  # the table


def test_fewer_than_five_runs_is_a_usage_error():
    done = run_benchmark("--runs", "3")
    assert done.returncode == 2
    assert done.stdout == ""


def test_a_floor_that_fails_is_reported_not_timed():
    without_torch = pyenv_python("3.12")
    done = run_benchmark("--quick", "--only", "probe", "--python", str(without_torch))
    assert done.returncode == 3
    assert "import torch, torch_geometric" in done.stderr and "misbehaved" in done.stderr
    assert done.stdout == ""
