"""A signal while the planner's child runs: during --calibrate (real PyG, loaders with workers) the planner ends
the child, prints one document with what the calibration had measured and the step that was cut, exits 128 +
the signal, and leaves nothing in TMPDIR or /dev/shm (the latter checked in a private /dev/shm, as root);
while a store's call hangs, the document names that call."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import types

import pytest

from conftest import ROOT, clean_env, interrupted_finding, signal_when

PLANNER = ROOT / "scripts" / "plan_capacity.py"
UNSHARE = shutil.which("unshare")
PRIVATE_SHM = os.geteuid() == 0 and UNSHARE is not None
# In a mount namespace of its own, /dev/shm is a fresh tmpfs: what is left in it after the run is the run's.
IN_PRIVATE_SHM = ('mount -t tmpfs -o size=2g tmpfs /dev/shm && "$@" & echo $! > "$PIDFILE"; wait $!; '
                  'echo $? > "$PIDFILE.rc"; ls -A /dev/shm > "$PIDFILE.shm"')


def start(tmp_path, temp, private_shm):
    """The planner calibrating with `temp` as its TMPDIR, its stderr in a file; -> (process or shell, the
    planner's pid, paths)."""
    out, err, pidfile = tmp_path / "out.json", tmp_path / "err.txt", tmp_path / "planner.pid"
    command = [sys.executable, str(PLANNER), "--nodes", "1000", "--edges", "5000", "--calibrate"]
    env = clean_env({"TMPDIR": str(temp), "PIDFILE": str(pidfile)})
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        if private_shm:
            process = subprocess.Popen([UNSHARE, "--mount", "--propagation", "private", "sh", "-c", IN_PRIVATE_SHM,
                                        "sh"] + command, stdout=stdout, stderr=stderr, env=env)
        else:
            process = subprocess.Popen(command, stdout=stdout, stderr=stderr, env=env)
    deadline = time.time() + 60
    while private_shm and not (pidfile.exists() and pidfile.read_text().strip()) and time.time() < deadline:
        time.sleep(0.05)
    pid = int(pidfile.read_text()) if private_shm else process.pid
    return process, pid, {"out": out, "err": err, "temp": temp, "rc": tmp_path / "planner.pid.rc",
                          "shm": tmp_path / "planner.pid.shm"}


def wait_for_a_measured_step(paths, process, limit=240):
    """Until the planner says one calibration step was measured (its stderr line)."""
    deadline = time.time() + limit
    while time.time() < deadline and process.poll() is None:
        if b"measured (1 of" in paths["err"].read_bytes():
            return
        time.sleep(0.1)
    pytest.fail("no calibration step measured: %s" % paths["err"].read_bytes()[-2000:])


@pytest.mark.finding("plan-interrupted")
def test_sigterm_during_calibration_prints_what_was_measured_and_leaves_nothing(tmp_path, temp_dir):
    signum, private_shm = signal.SIGTERM, PRIVATE_SHM
    process, pid, paths = start(tmp_path, temp_dir, private_shm)
    try:
        wait_for_a_measured_step(paths, process)
        assert list(temp_dir.iterdir()), "the run's scratch folder is not in its TMPDIR"
        os.kill(pid, signum)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    returncode = int(paths["rc"].read_text()) if private_shm else process.returncode  # the shell saw the planner's
    document, stopped = interrupted_finding(types.SimpleNamespace(returncode=returncode), paths["out"].read_bytes(),
                                            signum, "plan-interrupted")
    calibration = document["calibration"]
    assert calibration["state"] == "interrupted" and len(calibration["finished"]) >= 1
    assert calibration["cut"] in calibration["planned"] and calibration["cut"] not in calibration["finished"]
    assert calibration["measured"]["graphs"][0]["graph"]["nodes"] == 50000  # the first step's record
    assert "--calibrate" in stopped["fix"] and "cut at" in stopped["fix"]
    assert "designs" not in document
    assert list(paths["temp"].iterdir()) == []  # the run's scratch folder went with it, workers' files inside
    if private_shm:
        assert paths["shm"].read_text().split() == []


@pytest.mark.skipif(PRIVATE_SHM, reason="as root the test above checks the temporary folder and a private /dev/shm; "
                                        "this one stands in for it without root")
def test_without_a_private_shm_the_temporary_folder_is_still_removed(tmp_path, temp_dir):
    process, pid, paths = start(tmp_path, temp_dir, False)
    wait_for_a_measured_step(paths, process)
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)
    assert process.returncode == 143 and json.loads(paths["out"].read_text())["status"] == "interrupted"
    assert list(paths["temp"].iterdir()) == []


HANGING_STORE = """
import os, time

def hangs():
    open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "called"), "w").close()
    time.sleep(3600)
"""


@pytest.mark.finding("plan-interrupted")
def test_sigint_while_a_store_hangs_names_the_call_that_was_running(tmp_path):
    (tmp_path / "hangingstore.py").write_text(HANGING_STORE)
    process = subprocess.Popen([sys.executable, str(PLANNER), "--store", "hangingstore:hangs", "--path", str(tmp_path),
                                "--edges", "100", "--timeout", "120"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=clean_env())
    stdout, _ = signal_when(process, (tmp_path / "called").exists, signal.SIGINT)
    document, stopped = interrupted_finding(process, stdout, signal.SIGINT, "plan-interrupted")
    assert stopped["evidence"]["running"]["what"] == "hangingstore:hangs()"
    assert "--store hangingstore:hangs --path %s" % tmp_path in stopped["fix"] and "designs" not in document
