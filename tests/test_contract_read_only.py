"""Read-only means proven: every tool run under strace opens no file, folder or socket for writing.
"""

import json
import re

import pytest

from support import fakes, hostile_fakes as hostile
from conftest import clean_env
from diagnostics_core.runner import SCRATCH_PREFIX  # the run's scratch folder, under the temp dir
STORE = "check_store_contract.py"


def read_only_dirs(tmp_path, temp_state):
    home, work = tmp_path / "home", tmp_path / "cwd"
    for folder in (home, work):
        folder.mkdir()
    (home / "existing").write_text("x")
    temp = tmp_path / "tmp"
    if temp_state != "missing":
        temp.mkdir()
        if temp_state == "read-only":
            temp.chmod(0o555)
    return home, work, temp


TEMP_STATES = ["present", "missing", "read-only"]


def trace_main_checker(tmp_path, temp_state):
    import sys
    from conftest import CHECKER, traced_run
    home, work, temp = read_only_dirs(tmp_path, temp_state)
    # An extension imported from the cwd (PYTHONPATH=.) must not leave __pycache__ there.
    fakes.make_package(work, "torch_cluster", "import os\n")
    env = clean_env({"HOME": str(home), "TMPDIR": str(temp), "XDG_CACHE_HOME": str(home / ".cache"),
                     "PYTHONPATH": "."})
    return [traced_run([sys.executable, CHECKER], env, work, [home, work, tmp_path]) + (temp,)]


def trace_contract_checkers(tmp_path, temp_state):
    import sys
    from conftest import ROOT, traced_run
    home, work, temp = read_only_dirs(tmp_path, temp_state)
    hostile.write_hostile_stores(work)  # the user's module, imported as a dotted name from the cwd
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "META.json").write_text(json.dumps({"num_parts": 1, "node_types": None, "edge_types": None,
                                                 "node_offset": None, "is_hetero": False, "is_sorted": False}))
    env = clean_env({"HOME": str(home), "TMPDIR": str(temp), "XDG_CACHE_HOME": str(home / ".cache")})
    return [traced_run(command, env, work, [home, work, tmp_path, ROOT / "scripts"]) + (temp,)
            for command in ([sys.executable, ROOT / "scripts" / STORE, "hostile_stores:good"],
                            [sys.executable, ROOT / "scripts" / "check_partition.py", parts])]


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """Every traced run below, two at a time (strace makes each one CPU-bound on one core); each in folders
    of its own. -> {(which, temp_state): [(completed, problems, temp), ...]}"""
    from concurrent.futures import ThreadPoolExecutor
    cases = [(which, state) for which in ("main", "contract") for state in TEMP_STATES]
    trace = {"main": trace_main_checker, "contract": trace_contract_checkers}

    def run(case):
        which, state = case
        return trace[which](tmp_path_factory.mktemp("%s-%s" % case), state)
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(cases, pool.map(run, cases)))


@pytest.mark.parametrize("temp_state", TEMP_STATES)
def test_main_checker_is_read_only_under_strace(traces, temp_state):
    from conftest import strict_json
    [(completed, problems, _)] = traces[("main", temp_state)]
    document = strict_json(completed.stdout)
    assert document["probe"]["complete"] is True
    assert document["extensions"]["torch_cluster"]["status"] == "ok"
    assert problems == []


# The store checker's own folder under the temp dir (the runner's scratch: what the stores and the loader
# worker write to the temp dir goes there and is removed with it), made and removed by the checker itself.
SCRATCH = re.compile(r'\b(mkdir|rmdir)\("[^"]*/%s[A-Za-z0-9_]+"[,)]' % SCRATCH_PREFIX)


def beside_the_scratch(problems, temp):
    """The problems but the scratch folder's own mkdir and rmdir, and the temp dir's changed time that they
    leave (a file or folder left inside it is still a problem)."""
    return [line for line in problems if not SCRATCH.search(line)
            and not line.startswith("changed: %s ('dir', " % temp)]


@pytest.mark.parametrize("temp_state", TEMP_STATES)
def test_contract_checkers_are_read_only_under_strace(traces, temp_state):
    from conftest import strict_json
    for completed, problems, temp in traces[("contract", temp_state)]:
        document = strict_json(completed.stdout)
        assert document["exit_code"] == completed.returncode in (0, 1), completed.stderr[-2000:]
        assert beside_the_scratch(problems, temp) == [], completed.args


def test_planner_and_compare_are_read_only_under_strace(tmp_path):
    """A plan from sizes (its probe child included) and a comparison of two reports write nothing."""
    import sys
    from conftest import ROOT, strict_json, traced_run
    home, work, temp = read_only_dirs(tmp_path, "present")
    env = clean_env({"HOME": str(home), "TMPDIR": str(temp), "XDG_CACHE_HOME": str(home / ".cache")})
    report = tmp_path / "node.json"
    report.write_text(json.dumps(strict_json(traced_run([sys.executable, ROOT / "scripts" / "check_sampling_backends.py",
                                                         "--static-only"], env, work, [home, work])[0].stdout)))
    for command in ([sys.executable, ROOT / "scripts" / "plan_capacity.py", "--nodes", "100000", "--edges", "2000000",
                     "--features", "64"],
                    [sys.executable, ROOT / "scripts" / "compare_reports.py", report, report]):
        completed, problems = traced_run(command, env, work, [home, work, ROOT / "scripts"])
        document = strict_json(completed.stdout)
        assert document["exit_code"] == completed.returncode in (0, 1), completed.stderr[-2000:]
        assert problems == [], command
