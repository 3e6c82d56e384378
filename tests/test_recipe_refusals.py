"""The DDP recipe's refusals, run as an agent runs it: exit 2, one stderr line and one usage document, no rank
started and nothing left in TMPDIR (importing PyG makes $TMPDIR/torchinductor_<user>; a refused run must leave
the folder as it was): bad flags, unusable --data files, half a launch, torch or PyG missing."""

import json
import os
import subprocess
import sys
import time

import pytest

from conftest import pyenv_python
from test_recipe_training import RUN_TIMEOUT, SCRIPT


def run_in_fresh_tmpdir(tmp_path, temp, command, **variables):
    """Run `command` in `tmp_path` with TMPDIR set to `temp`, a new empty folder; -> (CompletedProcess, what the
    folder holds)."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                          "TORCHINDUCTOR_CACHE_DIR", "TMP", "TEMP", "PYTHONPATH")}
    env.update(variables, TMPDIR=str(temp))
    completed = subprocess.run([str(word) for word in command], capture_output=True, text=True, timeout=RUN_TIMEOUT,
                               env=env, cwd=tmp_path, stdin=subprocess.DEVNULL)
    return completed, sorted(os.listdir(temp))


def assert_refused_cleanly(completed, left, finding_id):
    assert completed.returncode == 2, completed.stderr[-2000:]
    assert len(completed.stderr.strip().splitlines()) == 1, completed.stderr[-2000:]
    document = json.loads(completed.stdout)
    assert [f["id"] for f in document["findings"]] == [finding_id] and document["status"] == "usage-error"
    assert left == [], left
    return document


def torch_saved_dict(path):
    """A torch.save file that loads fine but is no Data object: only torch can tell."""
    import torch
    torch.save({"x": torch.zeros(3)}, path)
    return path


@pytest.mark.finding("ddp-usage-error")
@pytest.mark.parametrize("case, named", [
    ("bad-flag", "--num-neighbors"),
    ("data-missing", "no-such-graph.pt: no such file"),
    ("data-not-torch", "cannot load a torch_geometric Data object"),
    ("data-not-a-Data", "Data has no 'y'"),  # a dict of tensors is read as a Data's to_dict()
], ids=["bad-flag", "data-missing", "data-not-torch", "data-not-a-Data"])
def test_usage_errors_leave_nothing_in_tmpdir(tmp_path, temp_dir, case, named):
    args = {"bad-flag": ["--num-neighbors", "10,x"],
            "data-missing": ["--data", tmp_path / "no-such-graph.pt"],
            "data-not-torch": ["--data", tmp_path / "graph.txt"],
            "data-not-a-Data": ["--data", tmp_path / "dict.pt"]}[case]
    (tmp_path / "graph.txt").write_text("srun: error: not a graph\n")
    if case == "data-not-a-Data":
        torch_saved_dict(tmp_path / "dict.pt")
    completed, left = run_in_fresh_tmpdir(tmp_path, temp_dir, [sys.executable, SCRIPT, "--nprocs", "2", *args])
    document = assert_refused_cleanly(completed, left, "ddp-usage-error")
    finding = document["findings"][0]
    assert named in completed.stderr and named in finding["evidence"]["message"]
    if case.startswith("data"):
        assert str(args[1]) in finding["evidence"]["message"]
    assert finding["fix"] == "python3 %s --help" % SCRIPT and "spawning" not in completed.stderr


@pytest.mark.finding("ddp-usage-error")
@pytest.mark.parametrize("half, absent", [({"RANK": "0"}, "WORLD_SIZE"), ({"WORLD_SIZE": "2"}, "RANK")])
def test_half_a_launch_is_refused_not_ignored(tmp_path, temp_dir, half, absent):
    """A stray RANK (or WORLD_SIZE) without the other: refused before torch, naming both ways out, instead of
    self-spawning in silence (every task that had it would start ranks of its own)."""
    started = time.monotonic()
    completed, left = run_in_fresh_tmpdir(tmp_path, temp_dir, [sys.executable, SCRIPT, "--nprocs", "2"],
                                          MASTER_ADDR="127.0.0.1", MASTER_PORT="29500", **half)
    document = assert_refused_cleanly(completed, left, "ddp-usage-error")
    message = document["findings"][0]["evidence"]["message"]
    [present] = half
    assert message.startswith("%s=%s is set but %s is not" % (present, half[present], absent)), message
    assert "Refused rather than ignored" in message and "unset %s to self-spawn" % present in message
    assert time.monotonic() - started < 30


def test_missing_torch_geometric_leaves_nothing_in_tmpdir(tmp_path, temp_dir):
    # torch importable, torch_geometric not: what an install of torch alone looks like to the recipe.
    command = [sys.executable, "-c",
               "import runpy, sys; sys.modules['torch_geometric'] = None; "
               f"sys.argv = [{str(SCRIPT)!r}]; runpy.run_path(sys.argv[0], run_name='__main__')"]
    completed, left = run_in_fresh_tmpdir(tmp_path, temp_dir, command)
    document = assert_refused_cleanly(completed, left, "ddp-stack-missing")
    assert "No module named 'torch_geometric'" in document["findings"][0]["evidence"]["error"]


@pytest.mark.finding("ddp-stack-missing")
def test_interpreter_without_torch_leaves_nothing_in_tmpdir(tmp_path, temp_dir):
    python = pyenv_python("3.11", with_torch=False)
    completed, left = run_in_fresh_tmpdir(tmp_path, temp_dir, [python, SCRIPT])
    assert_refused_cleanly(completed, left, "ddp-stack-missing")
    # torch pinned to its CPU build (an unpinned or untagged pin pulls PyPI's CUDA build on Linux)
    fix = json.loads(completed.stdout)["findings"][0]["fix"]
    assert fix.startswith("%s -m pip install torch==2.13.0+cpu --index-url https://download.pytorch.org/whl/cpu && "
                          "%s -m pip install torch_geometric  # " % (python, python)), fix
    assert fix.endswith("check_sampling_backends.py --require-neighbor-backend")
