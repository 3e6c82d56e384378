"""The DDP recipe under hostile launch variables, signals, a closed stdout and a broken launcher (issue 32,
classes 1, 2 and 5), run as torchrun or a user's shell runs it. (A closed stderr: the store run of
test_recipe_training.py runs with it.)"""

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from conftest import ROOT, clean_env, interrupted_finding, strict_json
from test_recipe_training import TINY, job_processes

RECIPE = ROOT / "scripts" / "ddp_neighbor_training.py"
TORCHRUN = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29555"}


@pytest.mark.finding("ddp-usage-error")
@pytest.mark.parametrize("variables, named", [
    ({"RANK": "abc", "WORLD_SIZE": "2"}, "RANK='abc' is not a whole number"),
    ({"RANK": "\uff10", "WORLD_SIZE": "2"}, "RANK='\uff10' is not a whole number"),  # full-width zero
    ({"RANK": "5", "WORLD_SIZE": "2"}, "RANK=5 is outside 0..1"),
    ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "2"}, "LOCAL_RANK=3 is outside 0..1"),
    ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "3"}, "LOCAL_RANK=3 is outside 0..1"),
    ({"RANK": "0", "WORLD_SIZE": "0"}, "WORLD_SIZE=0 is outside 1.."),
    ({"RANK": "0", "WORLD_SIZE": str(2 ** 66)}, "WORLD_SIZE=%d is outside 1.." % 2 ** 66),
    ({"RANK": "0", "WORLD_SIZE": "9" * 5000}, "characters cut"),  # int() refuses 4,300+ digits
    ({"RANK": "0", "WORLD_SIZE": "1", "MASTER_PORT": "70000"}, "MASTER_PORT=70000 is outside 1..65535"),
    ({"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": ""}, "MASTER_ADDR is not"),
], ids=["rank-abc", "rank-fullwidth", "rank-past-world", "local-rank-past-local-world", "local-rank-past-world",
        "world-0", "world-2**66", "world-5000-digits", "port-70000", "no-master-addr"])
def test_bad_launch_variables_are_a_usage_error_before_any_store_opens(variables, named):
    env = clean_env(dict(TORCHRUN, **variables))
    started = time.monotonic()
    completed = subprocess.run([sys.executable, str(RECIPE)], capture_output=True, timeout=60, env=env,
                               stdin=subprocess.DEVNULL)
    seconds = time.monotonic() - started
    assert completed.returncode == 2, completed.stderr[-2000:]
    document = strict_json(completed.stdout)
    assert document["status"] == "usage-error" and [f["id"] for f in document["findings"]] == ["ddp-usage-error"]
    [line] = completed.stderr.decode().splitlines()
    assert named in line and len(line) < 1000 and "Traceback" not in line
    assert named in document["findings"][0]["evidence"]["message"]
    # Refused before torch is imported, so before a TCPStore could be waited on (that took 34-50 s).
    assert seconds < 30, seconds


def start_spawn(extra_env=None, stderr=subprocess.PIPE):
    marker = uuid.uuid4().hex
    env = clean_env(dict(extra_env or {}, DDP_RECIPE_TEST_RUN=marker))
    args = list(TINY)
    args[args.index("--epochs") + 1] = "200"  # it must still be training when it is stopped
    process = subprocess.Popen([sys.executable, str(RECIPE), "--nprocs", "2", *args], stdout=subprocess.PIPE,
                               stderr=stderr, stdin=subprocess.DEVNULL, env=env)
    return process, marker


@pytest.mark.finding("ddp-interrupted")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_to_the_spawning_parent_ends_every_rank_and_prints_one_document(neighbor_backend, signum):
    process, marker = start_spawn()
    try:
        seen = []
        for line in iter(process.stderr.readline, b""):
            seen.append(line)
            if b"epoch 1:" in line:  # rank 0 finished an epoch
                break
        ranks = [p.pid for p in job_processes(marker) if p.pid != process.pid]
        assert ranks, b"".join(seen)[-2000:]
        process.send_signal(signum)
        stdout, _ = process.communicate(timeout=60)
    finally:
        process.kill()
    document, stopped = interrupted_finding(process, stdout, signum, "ddp-interrupted")
    assert document["epochs"] and document["epochs"][0]["epoch"] == 1 and document["world_size"] == 2
    assert len(document["workers_ended"]) >= 2  # both ranks, and what they started
    deadline = time.monotonic() + 10
    while job_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not job_processes(marker), "ranks outlived the recipe"


def test_a_closed_stdout_exits_3_before_training():
    """Nothing the job measures could be delivered: it says so at once instead of training for nothing."""
    words = " ".join("'%s'" % w for w in [sys.executable, str(RECIPE), "--nprocs", "2"])
    started = time.monotonic()
    completed = subprocess.run(["bash", "-c", words + " >&-"], capture_output=True, timeout=60, env=clean_env())
    assert completed.returncode == 3 and time.monotonic() - started < 30
    [line] = completed.stderr.decode().splitlines()
    assert "stdout is closed" in line
    assert os.path.basename(str(RECIPE)) in line


@pytest.mark.finding("ddp-internal-error")
def test_a_broken_launcher_is_exit_3_with_one_document():
    """A bug in the spawning parent (here: self_spawn raising, before any import of torch) is the tool's own
    internal error, one document saying what broke, not a traceback alone."""
    code = ("import sys; sys.argv = [%r, '--nprocs', '2']; sys.path.insert(0, %r)\n"
            "import ddp_neighbor_training as tool\n"
            "def broken(args, job, end=None):\n    raise KeyError('launcher bug')\n"
            "tool.import_stack = lambda: None\ntool.self_spawn = broken\n"
            "sys.exit(tool.main(sys.argv[1:]))" % (str(RECIPE), str(ROOT / "scripts")))
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, env=clean_env(),
                               stdin=subprocess.DEVNULL)
    document = strict_json(completed.stdout)
    assert completed.returncode == 3 and document["status"] == "internal-error"
    assert [f["id"] for f in document["findings"]] == ["ddp-internal-error"]
    assert "launcher bug" in json.dumps(document["findings"][0]["evidence"]["error"])
