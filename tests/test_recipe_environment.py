"""The DDP recipe in a hostile Python environment (issue 39), run as an agent runs it: warnings turned into
errors (PYTHONWARNINGS=error, python -W error -X dev) are named and the job still trains, its spawned ranks on
Python's default filters too (multiprocessing hands the parent's -W options on); under torchrun, where the
ranks start from the launcher's environment and die of the first warning, rank 0's one document names both;
a stray torch/ package shadowing the installed one on PYTHONPATH is refused naming it, before torch loads."""

import subprocess
import sys

import pytest

from conftest import clean_env, strict_json
from test_recipe_training import SCRIPT, free_port

ONE_EPOCH = ["--num-nodes", "402", "--num-neighbors", "5,5", "--batch-size", "30", "--epochs", "1"]


def recipe(args, env, flags=(), torchrun=False):
    launcher = ["-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(free_port())] if torchrun \
        else []
    completed = subprocess.run([sys.executable, *flags, *launcher, str(SCRIPT), *args], capture_output=True,
                               timeout=300, env=env, stdin=subprocess.DEVNULL)
    document = strict_json(completed.stdout)  # exactly one document, whatever the environment
    assert document["exit_code"] == completed.returncode, completed.stderr[-2000:]
    return completed, document


@pytest.mark.finding("environment-warnings-as-errors")
@pytest.mark.parametrize("how", ["PYTHONWARNINGS=error", "-W error -X dev"])
def test_warnings_made_errors_are_named_and_the_ranks_still_train(neighbor_backend, how):
    args = ["--nprocs", "2", *ONE_EPOCH]
    if how.startswith("PYTHONWARNINGS"):
        completed, document = recipe(args, clean_env({"PYTHONWARNINGS": "error"}))
    else:
        completed, document = recipe(args, clean_env(), flags=("-W", "error", "-X", "dev"))
    assert completed.returncode == 0, completed.stderr.decode()[-3000:]
    assert [f["id"] for f in document["findings"]] == ["environment-warnings-as-errors"]
    assert document["findings"][0]["evidence"]["as_errors"] == ["error"]
    assert document["gates"] == {"trained": {"passed": True}} and document["world_size"] == 2
    assert len(document["epochs"]) == 1 and len(document["ranks"]) == 2
    assert b"Traceback" not in completed.stderr


@pytest.mark.finding("environment-warnings-as-errors")
def test_under_torchrun_ranks_that_die_of_a_warning_are_named_with_the_cause(neighbor_backend):
    completed, document = recipe(ONE_EPOCH, clean_env({"PYTHONWARNINGS": "error"}), torchrun=True)
    assert completed.returncode == 1 and document["status"] == "gate-failed"
    ids = [f["id"] for f in document["findings"]]
    assert ids == ["ddp-rank-failed", "environment-warnings-as-errors"], ids
    assert document["findings"][0]["evidence"]["message"].startswith(("UserWarning", "DeprecationWarning"))


@pytest.mark.finding("environment-package-shadowed")
def test_a_stray_torch_on_pythonpath_is_refused_naming_it(tmp_path, temp_dir):
    stray = tmp_path / "vendor"
    (stray / "torch").mkdir(parents=True)
    (stray / "torch" / "__init__.py").write_text("raise ImportError('a stray torch, not the installed one')\n")
    temp = temp_dir
    completed, document = recipe(["--nprocs", "2"], clean_env({"PYTHONPATH": str(stray), "TMPDIR": str(temp)}))
    assert completed.returncode == 2 and document["status"] == "usage-error"
    [refused] = document["findings"]
    assert refused["id"] == "environment-package-shadowed"
    assert refused["evidence"]["shadowed"][0]["imported_from"] == str(stray / "torch" / "__init__.py")
    assert refused["fix"].startswith("unset PYTHONPATH")
    lines = completed.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "environment-package-shadowed" in lines[0]
    assert list(temp.iterdir()) == []  # refused before torch (or anything) was imported
