"""The profiler measures the training loop: a real PyG graph, a real model step given with --step, the
user's settings as --current; a step that raises is reported once. How good its recommendation is (against
a full grid of settings, and again under two CPU hogs) is timing, so it is a benchmark, not a test:
maintainers/benchmark_profiler_grid.py (the graph and the loop here are its own)."""

import os
import subprocess
import sys

import pytest

from conftest import clean_env, invoke_tool

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "maintainers"))
from benchmark_profiler_grid import BATCH, CURRENT, TRAIN  # noqa: E402  (the benchmark's graph and loop)

ENABLE_SAMPLING = ("~/.venvs/scalable-distributed/bin/python -m pip install --no-build-isolation "
                   "torch-scatter==2.1.2 torch-sparse==0.6.18")
QUIET_BUDGET_S = 45


@pytest.fixture(scope="module")
def sampling():
    import importlib.util
    if not (importlib.util.find_spec("pyg_lib") or importlib.util.find_spec("torch_sparse")):
        pytest.skip("loader-no-sampler-backend: NeighborLoader needs pyg-lib or torch-sparse to sample; "
                    "enable with: " + ENABLE_SAMPLING)


@pytest.fixture(scope="module")
def project(tmp_path_factory, sampling):
    folder = tmp_path_factory.mktemp("loop")
    (folder / "train.py").write_text(TRAIN)
    subprocess.run([sys.executable, "train.py", str(folder / "graph.pt")], cwd=str(folder), check=True,
                   timeout=300, env=clean_env({"PYTHONDONTWRITEBYTECODE": "1"}))
    return folder


def profile(folder, budget, env=None, step="train:step"):
    env = clean_env(dict(env or {}, PYTHONDONTWRITEBYTECODE="1"))
    env.pop("OMP_NUM_THREADS", None)
    return invoke_tool("profile_loader.py", "--data", folder / "graph.pt", "--num-neighbors", "10,5", "--batch-size",
                       str(BATCH), "--step", step, "--current", CURRENT, "--budget", str(budget),
                       env=env, cwd=folder, timeout=budget * 4 + 60)


@pytest.mark.finding("loader-step-failed")
def test_a_step_that_raises_is_reported_once_and_nothing_is_measured(project):
    result = profile(project, 30, step="train:broken")
    assert result.returncode == 1 and result.json["gates"]["measured"]["passed"] is False
    found = result.only("loader-step-failed")
    assert "shapes cannot be multiplied" in found["evidence"]["error"] and "broken" in found["evidence"]["traceback"]
    assert "--loader-only" in found["fix"] and "train:broken" not in found["fix"]
    assert result.json["configs"] == []
