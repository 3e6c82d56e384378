"""The profiler measures the training loop: a real PyG graph, a real model step given with --step, the
user's settings as --current; a real run keeps its JSON contract, a step that raises is reported once.
Under CPU hogs started here, nothing is presented as faster outright (that is not timing: the load decides
the verdict). How good its recommendation is against a full grid of settings is timing, so it is a
benchmark, not a test: maintainers/benchmark_profiler_grid.py (the graph and the loop here are its own);
its decisions are replayed on recorded rounds in tests/fast/test_profiler_choice.py."""

import os
import subprocess
import sys

import pytest

from conftest import ENABLE, clean_env, invoke_tool

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "maintainers"))
from benchmark_profiler_grid import BATCH, CURRENT, TRAIN, cpu_hogs  # noqa: E402  (the benchmark's graph and loop)

QUIET_BUDGET_S = 45


@pytest.fixture(scope="module")
def sampling():
    import importlib.util
    if not (importlib.util.find_spec("pyg_lib") or importlib.util.find_spec("torch_sparse")):
        pytest.skip("loader-no-sampler-backend: NeighborLoader needs pyg-lib or torch-sparse to sample; "
                    "enable with: " + ENABLE["backend"])


@pytest.fixture(scope="module")
def project(tmp_path_factory, sampling):
    folder = tmp_path_factory.mktemp("loop")
    (folder / "train.py").write_text(TRAIN)
    subprocess.run([sys.executable, "train.py", str(folder / "graph.pt")], cwd=str(folder), check=True,
                   timeout=300, env=clean_env({"PYTHONDONTWRITEBYTECODE": "1"}))
    return folder


def profile(folder, budget, env=None, step="train:step", extra=()):
    env = clean_env(dict(env or {}, PYTHONDONTWRITEBYTECODE="1"))
    env.pop("OMP_NUM_THREADS", None)
    return invoke_tool("profile_loader.py", "--data", folder / "graph.pt", "--num-neighbors", "10,5", "--batch-size",
                       str(BATCH), "--step", step, "--current", CURRENT, "--budget", str(budget), *extra,
                       env=env, cwd=folder, timeout=budget * 4 + 60)


def test_a_real_loop_run_keeps_the_json_contract(project, temp_dir):
    """Its shape, not its speed: what the rounds, the race and the choice publish on a real run; the user's
    SAGE step leaves none of PyG's rendered templates (nor anything else) in the temp dir."""
    result = profile(project, 20, env={"TMPDIR": str(temp_dir)}, extra=("--epochs", "2"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert list(temp_dir.iterdir()) == []
    document = result.json
    assert document["gates"]["measured"]["passed"] is True
    plan = document["plan"]
    assert plan["baseline"] == "current" and plan["epochs"] == 2 and plan["candidates"][:2] == ["current", "default"]
    blocks = document["blocks"]
    rounds = sorted({b["round"] for b in blocks})
    assert rounds == list(range(len(rounds))) and len(rounds) >= 2
    for block in blocks:
        assert block["epoch_steps_per_s"] > 0 and block["steps"] >= 1 and block["batch_wait_s"] >= 0
        assert block["first_batch_s"] > 0 and block["wall_s"] > 0
    for index in rounds:  # each configuration once a round, and one that left the race never returns
        names = [b["config"] for b in blocks if b["round"] == index]
        assert len(names) == len(set(names))
        later = {b["config"] for b in blocks if b["round"] > index}
        assert later <= set(names) or index == 0
    measured = {c["name"]: c for c in document["configs"] if c["status"] == "ok"}
    assert {"current", "default"} <= set(measured)
    for config in measured.values():
        assert config["rounds"] == len([b for b in blocks if b["config"] == config["name"]])
        low, high = config["epoch_batches_per_s_range"]
        assert low <= config["epoch_batches_per_s"] <= high
    advice = document["recommendation"]
    assert advice["baseline"] == "current" and advice["epochs"] == 2
    assert advice["verdict"] in ("faster", "under-load", "baseline", "undecided")
    decided = advice["decided"]
    ids = result.ids()
    if advice["verdict"] in ("faster", "under-load"):
        assert advice["config"] in decided["tied"] and decided["leader"] in decided["contenders"]
        assert advice["speedup_range"][0] > 1.0
        # Faster outright only where the run was quiet; under load the answer names its load.
        assert ("loader-faster-settings" in ids) == (advice["verdict"] == "faster")
        assert ("loader-load-decides" in ids) or advice["verdict"] == "faster"
    else:
        assert advice["config"] == "current" and advice["speedup"] == 1.0 and "loader-faster-settings" not in ids
        assert ("loader-too-busy-to-tell" in ids) != ("loader-default-is-best" in ids)


@pytest.mark.finding("loader-step-failed")
def test_a_step_that_raises_is_reported_once_and_nothing_is_measured(project):
    result = profile(project, 30, step="train:broken")
    assert result.returncode == 1 and result.json["gates"]["measured"]["passed"] is False
    found = result.only("loader-step-failed")
    assert "shapes cannot be multiplied" in found["evidence"]["error"] and "broken" in found["evidence"]["traceback"]
    assert "--loader-only" in found["fix"] and "train:broken" not in found["fix"]
    assert result.json["configs"] == []


@pytest.mark.finding("loader-load-decides", "loader-too-busy-to-tell")
def test_under_cpu_hogs_nothing_is_presented_as_faster_outright(project):
    """A busy machine gets the too-busy finding, or the answer for its load with the quiet side named
    unmeasured and the command that measures it; never loader-faster-settings (issue 31)."""
    with cpu_hogs(len(os.sched_getaffinity(0))):  # one per core this test may use
        result = profile(project, 20, extra=("--epochs", "2"))
    assert result.returncode in (0, 1), result.stderr[-3000:]
    advice, ids = result.json["recommendation"], result.ids()
    assert advice["load"]["other_cpu_cores_median"] >= 0.5, advice["load"]  # the hogs were seen
    assert "loader-faster-settings" not in ids and advice["verdict"] in ("under-load", "undecided", "baseline")
    if advice["verdict"] == "under-load":
        decides = result.only("loader-load-decides")
        assert decides["evidence"]["under_load"]["config"] == advice["config"]
        assert decides["evidence"]["quiet"]["measured"] is False and "rerun when quiet" in decides["fix"]
    elif advice["verdict"] == "undecided":
        assert "loader-too-busy-to-tell" in ids and advice["config"] == "current"
