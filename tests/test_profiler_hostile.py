"""Hostile conditions for scripts/profile_loader.py, run the way an agent runs it: a signal mid-run (while the
user's code runs, and while loader workers exchange batches), warnings made errors, a stray torch/ on
PYTHONPATH, a closed stderr, a refused command line. Asserted on the JSON, the exit code, the processes left
(none) and the temp dir (as it was: the run's children write only in the run's own folder, removed however
the run ends)."""

import os
import signal
import subprocess
import sys
import time

import pytest

from support import hostile_fakes as hostile
from conftest import ENABLE, clean_env, interrupted_finding, strict_json

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "scripts", "profile_loader.py")

SLOW_STORE = "import time\n\ndef slow_to_build():\n    time.sleep(3600)\n"


@pytest.fixture
def sampling():
    import importlib.util  # found, not imported: importing PyG here would cost the suite seconds
    if not (importlib.util.find_spec("pyg_lib") or importlib.util.find_spec("torch_sparse")):
        pytest.skip("loader-no-sampler-backend: NeighborLoader needs pyg-lib or torch-sparse to sample; "
                    "enable with: " + ENABLE["backend"])


def temp_files(folder):
    """Every path under `folder`, relative to it."""
    return sorted(os.path.relpath(os.path.join(root, name), folder)
                  for root, dirs, files in os.walk(folder) for name in dirs + files)


def signal_when(command, cwd, env, token, ready, signum=signal.SIGTERM):
    """Start the tool, wait (at most 90 s) until ready() is true, send `signum`; -> (the process, its stdout),
    after asserting that the signal came when ready() was true."""
    process = subprocess.Popen(command, cwd=str(cwd), env=dict(env, **{hostile.TOKEN_VARIABLE: token}),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    deadline = time.time() + 90
    while time.time() < deadline and not ready() and process.poll() is None:
        time.sleep(0.1)
    was_ready = ready()
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=30)
    time.sleep(0.5)
    assert was_ready, stderr.decode(errors="replace")[-3000:]
    return process, stdout


@pytest.mark.finding("loader-profile-interrupted")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_user_code_runs_ends_the_children_and_prints_one_document(tmp_path, temp_dir, token, signum):
    (tmp_path / "slowstores.py").write_text(SLOW_STORE)
    temp = temp_dir

    def in_user_code():  # the tool, its child, a rank in the store factory
        return len(hostile.survivors(token)) >= 3
    process, stdout = signal_when([sys.executable, SCRIPT, "--store", "slowstores:slow_to_build", "--budget", "60"],
                                  tmp_path, clean_env({"TMPDIR": str(temp)}), token, in_user_code, signum)
    assert hostile.survivors(token) == [] and temp_files(temp) == []
    document, found = interrupted_finding(process, stdout, signum, "loader-profile-interrupted")
    assert "slowstores:slow_to_build" in found["fix"] and found["evidence"]["running"]["what"] == "load the graph"
    assert found["evidence"]["configs_measured"] == 0 and found["evidence"]["blocks_measured"] == 0
    assert document["host"]["allowed_cores"]  # what was learnt before the signal is kept
    assert document["gates"] == {} and document["configs"] == []


@pytest.mark.finding("environment-warnings-as-errors")
def test_sigterm_while_workers_exchange_batches_leaves_no_process_and_nothing_in_the_temp_dir(sampling, tmp_path,
                                                                                                  temp_dir, token):
    # Loader workers hand batches over through multiprocessing's pymp-* folders, and the stand-in's convs leave
    # PyG's rendered templates: both in the run's own temp folder, which goes with the run. The run is also
    # under -W error -X dev: its interrupted document names that setting too.
    temp = temp_dir

    def workers_exchange():
        return any(name.rsplit("/", 1)[-1].startswith("pymp-") for name in temp_files(temp))
    process, stdout = signal_when([sys.executable, "-W", "error", "-X", "dev", SCRIPT, "--synthetic",
                                   "20000,200000,32", "--budget", "60"], tmp_path, clean_env({"TMPDIR": str(temp)}),
                                  token, workers_exchange)
    assert hostile.survivors(token) == []
    assert temp_files(temp) == []  # no pymp-*, no *_propagate_*.py, no torchinductor folder
    document, found = interrupted_finding(process, stdout, signal.SIGTERM, "loader-profile-interrupted")
    assert found["evidence"]["blocks_measured"] == len(document["blocks"] or [])
    [warned] = [f for f in document["findings"] if f["id"] == "environment-warnings-as-errors"]
    assert warned["evidence"]["dev_mode"] is True and warned["evidence"]["as_errors"] == ["error"]


@pytest.mark.finding("environment-package-shadowed")
def test_a_stray_torch_on_pythonpath_is_refused_naming_it(tmp_path):
    stray = tmp_path / "vendor"
    (stray / "torch").mkdir(parents=True)
    (stray / "torch" / "__init__.py").write_text("raise ImportError('a stray torch, not the installed one')\n")
    completed = subprocess.run([sys.executable, SCRIPT, "--synthetic", "2000,10000,8", "--budget", "8"],
                               capture_output=True, timeout=60, env=clean_env({"PYTHONPATH": str(stray)}),
                               cwd=str(tmp_path), stdin=subprocess.DEVNULL)
    document = strict_json(completed.stdout)
    assert completed.returncode == document["exit_code"] == 2 and document["status"] == "usage-error"
    [found] = document["findings"]
    assert found["id"] == "environment-package-shadowed" and found["evidence"]["shadowed"][0]["package"] == "torch"
    assert found["evidence"]["shadowed"][0]["imported_from"] == str(stray / "torch" / "__init__.py")
    assert found["fix"].startswith("unset PYTHONPATH")
    assert len(completed.stderr.decode().strip().splitlines()) == 1


@pytest.mark.finding("loader-step-failed")
def test_a_closed_stderr_changes_nothing_else(tmp_path):
    # A run whose findings do not depend on timing (a step that raises on the first batch, or no sampling
    # backend), so that the two documents can be compared whole: it writes its progress lines and ends.
    (tmp_path / "broken.py").write_text("def step(batch):\n    raise ValueError('my step')\n")

    def run(close_stderr):
        completed = subprocess.run([sys.executable, SCRIPT, "--synthetic", "2000,10000,8", "--budget", "20",
                                    "--step", "broken:step"],
                                   cwd=str(tmp_path), env=clean_env(), stdout=subprocess.PIPE,
                                   stderr=None if close_stderr else subprocess.PIPE, stdin=subprocess.DEVNULL,
                                   preexec_fn=(lambda: os.close(2)) if close_stderr else None, timeout=120)
        return completed.returncode, strict_json(completed.stdout), completed.stderr
    closed_code, closed, _ = run(True)
    open_code, opened, stderr = run(False)
    ids = [f["id"] for f in closed["findings"]]
    assert "profile-loader-internal-error" not in ids, closed["findings"]
    assert closed_code == closed["exit_code"] == open_code == opened["exit_code"]
    assert closed["status"] == opened["status"] and sorted(ids) == sorted(f["id"] for f in opened["findings"])
    assert set(ids) & {"loader-step-failed", "loader-no-sampler-backend"}
    assert closed["gates"] == opened["gates"] and closed_code == 1
    assert stderr.decode().startswith("profile_loader: ")  # open, it had its progress lines
    if "loader-step-failed" in ids:  # the step ran once, raised, and nothing else was timed
        [failed] = [f for f in opened["findings"] if f["id"] == "loader-step-failed"]
        assert "my step" in failed["evidence"]["error"] and "broken.py" in failed["evidence"]["traceback"]
        assert "--loader-only" in failed["fix"] and "broken:step" not in failed["fix"]
        assert opened["configs"] == [] and opened["breakdown"] is None


@pytest.mark.finding("profile-loader-usage-error")
def test_a_refused_command_line_is_one_stderr_line_and_one_document(tmp_path):
    # The parser's refusals one by one: tests/fast/test_profiler_cli.py; here, the channel they travel on.
    completed = subprocess.run([sys.executable, SCRIPT, "--data", str(tmp_path)], capture_output=True, timeout=60,
                               env=clean_env(), stdin=subprocess.DEVNULL)
    assert completed.returncode == 2
    line = completed.stderr.decode().strip()
    assert len(line.splitlines()) == 1 and "is a directory" in line
    document = strict_json(completed.stdout)
    assert document["exit_code"] == 2 and [f["id"] for f in document["findings"]] == ["profile-loader-usage-error"]
    assert "is a directory" in document["findings"][0]["evidence"]["message"]
