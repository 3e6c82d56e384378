"""The recipe is a file a user copies (issue 38): scripts/ddp_neighbor_training.py alone in an empty folder, with
no skill beside it, trains and prints its own plain JSON report, refuses plainly, keeps its temporary files
(PyG's templates) in a folder of its own and removes it, and writes nothing beside itself. (Loader workers'
pymp-* in that folder: the torchrun runs of test_recipe_training.py, whose ranks make the same folder.)"""

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

from conftest import clean_env
from test_recipe_training import CHANCE, RUN_TIMEOUT, SCRIPT, free_port

TWO_EPOCHS = ["--num-nodes", "402", "--num-neighbors", "5,5", "--batch-size", "30", "--epochs", "2", "--lr", "0.03"]


def copied_alone(tmp_path, temp_dir):
    folder = tmp_path / "my-project"
    folder.mkdir()
    shutil.copy(SCRIPT, folder)
    return folder, temp_dir


def run_copy(folder, temp, args, **variables):
    """The copy run as a user runs it, in a session of its own: a run past RUN_TIMEOUT ends with its ranks."""
    env = clean_env(dict(variables, TMPDIR=str(temp)), drop=("TORCHINDUCTOR_CACHE_DIR", "TMP", "TEMP"))
    process = subprocess.Popen([sys.executable, "ddp_neighbor_training.py", *args], cwd=folder, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail("the copy did not finish within %ds; stderr tail:\n%s" % (RUN_TIMEOUT, stderr[-3000:]))
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def test_copied_alone_it_trains_and_prints_its_own_report(neighbor_backend, tmp_path, temp_dir):
    folder, temp = copied_alone(tmp_path, temp_dir)
    completed = run_copy(folder, temp, ["--nprocs", "2", "--master-port", str(free_port()), *TWO_EPOCHS])
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(completed.stdout)  # one document: the job's keys, no envelope
    assert report["ok"] is True and "schema_version" not in report and "findings" not in report
    assert report["launcher"] == "spawn" and report["world_size"] == 2
    assert [rank["rank"] for rank in report["ranks"]] == [0, 1] and len({r["pid"] for r in report["ranks"]}) == 2
    assert [r["num_train_seeds"] for r in report["ranks"]] == [121, 120]
    epochs = report["epochs"]
    assert len(epochs) == 2 and epochs[-1]["train_loss"] < epochs[0]["train_loss"], epochs
    assert report["val_acc"] > CHANCE + 0.25, epochs
    assert sorted(os.listdir(folder)) == ["ddp_neighbor_training.py"]  # no __pycache__, nothing else
    assert sorted(os.listdir(temp)) == []  # PyG's templates and its own folder: gone


def test_copied_alone_it_refuses_plainly(tmp_path, temp_dir):
    folder, temp = copied_alone(tmp_path, temp_dir)
    refused = run_copy(folder, temp, ["--num-neighbors", "10,x"])
    assert refused.returncode == 2 and len(refused.stderr.splitlines()) == 1 and "--num-neighbors" in refused.stderr
    assert json.loads(refused.stdout) == {"ok": False, "launcher": "spawn", "world_size": None,
                                          "refused": refused.stderr.split(": error: ", 1)[1].strip()}
    half = run_copy(folder, temp, [], RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="29500")
    assert half.returncode == 2 and "RANK=0 is set but WORLD_SIZE is not" in json.loads(half.stdout)["refused"]
    helped = run_copy(folder, temp, ["--help"])
    assert helped.returncode == 0 and "--load-per-rank" in helped.stdout and "--list-findings" not in helped.stdout
    assert sorted(os.listdir(folder)) == ["ddp_neighbor_training.py"] and sorted(os.listdir(temp)) == []
