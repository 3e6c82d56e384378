"""Hostile inputs to scripts/profile_loader.py (issue 32): a signal mid-run, a closed stderr, a
directory for --data, a fan-out beyond int64. Run the way an agent runs it, asserting on its JSON
and exit codes; nothing here needs a sampling backend."""

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from support import hostile_fakes as hostile
from conftest import clean_env, interrupted_finding, strict_json

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "scripts", "profile_loader.py")

SLOW_STORE = "import time\n\ndef slow_to_build():\n    time.sleep(3600)\n"


@pytest.fixture
def token():
    value = uuid.uuid4().hex
    yield value
    hostile.end_survivors(value)


@pytest.mark.finding("loader-profile-interrupted")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_mid_run_ends_the_children_and_prints_one_document(tmp_path, token, signum):
    (tmp_path / "slowstores.py").write_text(SLOW_STORE)
    process = subprocess.Popen([sys.executable, SCRIPT, "--store", "slowstores:slow_to_build", "--budget", "60"],
                               cwd=str(tmp_path), env=clean_env({hostile.TOKEN_VARIABLE: token}),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    deadline = time.time() + 90
    while time.time() < deadline and len(hostile.survivors(token)) < 3:  # the tool, its child, a rank in user code
        time.sleep(0.1)
    assert len(hostile.survivors(token)) >= 3
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=30)
    time.sleep(0.5)
    assert hostile.survivors(token) == []
    document, found = interrupted_finding(process, stdout, signum, "loader-profile-interrupted")
    assert "slowstores:slow_to_build" in found["fix"]
    assert document["host"]["allowed_cores"]  # what was learnt before the signal is kept
    assert document["gates"]["measured"]["passed"] is False


def test_a_closed_stderr_changes_nothing_else(tmp_path):
    # A run whose findings do not depend on timing (a step that raises on the first batch, or no sampling
    # backend), so that the two documents can be compared whole: it writes its progress lines and ends.
    (tmp_path / "broken.py").write_text("def step(batch):\n    raise ValueError('my step')\n")

    def run(close_stderr):
        completed = subprocess.run([sys.executable, SCRIPT, "--synthetic", "2000,10000,8", "--budget", "20",
                                    "--step", "broken:step"],
                                   cwd=str(tmp_path), env=clean_env(), stdout=subprocess.PIPE,
                                   stderr=None if close_stderr else subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                   preexec_fn=(lambda: os.close(2)) if close_stderr else None, timeout=120)
        return completed.returncode, strict_json(completed.stdout)
    closed_code, closed = run(True)
    open_code, opened = run(False)
    ids = [f["id"] for f in closed["findings"]]
    assert "profile-loader-internal-error" not in ids, closed["findings"]
    assert closed_code == closed["exit_code"] == open_code == opened["exit_code"]
    assert closed["status"] == opened["status"] and sorted(ids) == sorted(f["id"] for f in opened["findings"])
    assert set(ids) & {"loader-step-failed", "loader-no-sampler-backend"}
    assert closed["gates"] == opened["gates"] and closed_code == 1


@pytest.mark.parametrize("args, says", [
    (["--data", "{tmp}"], "is a directory"),
    (["--synthetic", "2000,10000,8", "--num-neighbors", "%d,5" % 2 ** 63], "int64"),
    (["--synthetic", "2000,10000,8", "--current", "num_workers=-1"], "num_workers"),
    (["--synthetic", "2000,10000,8", "--current", "workers=2"], "KEY=VALUE"),
    (["--synthetic", "2000,10000,8", "--step", "nocolon"], "MODULE:CALLABLE"),
])
def test_hostile_command_lines_are_usage_errors(tmp_path, args, says):
    args = [a.format(tmp=tmp_path) for a in args]
    completed = subprocess.run([sys.executable, SCRIPT] + args, capture_output=True, timeout=60, env=clean_env(),
                               stdin=subprocess.DEVNULL)
    assert completed.returncode == 2
    line = completed.stderr.decode().strip()
    assert len(line.splitlines()) == 1 and says in line
    document = strict_json(completed.stdout)
    assert document["exit_code"] == 2 and [f["id"] for f in document["findings"]] == ["profile-loader-usage-error"]
    assert says in json.dumps(document["findings"][0]["evidence"])
