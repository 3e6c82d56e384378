"""Hostile inputs (issue 14): nothing crashes, hangs, leaks, writes or lies.

Each test reproduces one class of failure the way a real misbehaving
extension, store or environment produces it, and runs the tools as
subprocesses the way an agent does.
"""

import json
import os
import uuid

import pytest

import _hostile_fakes as hostile
import fakes
from conftest import clean_env, diagnoses, invoke_checker


@pytest.fixture
def token():
    """A marker in the tool's environment; every process it (or its children) starts inherits it."""
    value = uuid.uuid4().hex
    yield value
    hostile.end_survivors(value)


def fake_env(root, token=None, **extra):
    env = clean_env({"PYTHONPATH": str(root), **extra})
    if token:
        env[hostile.TOKEN_VARIABLE] = token
    return env


@pytest.mark.parametrize("setsid", [True, False], ids=["double-fork-setsid", "fork-holding-pipes"])
def test_no_descendant_outlives_the_checker(tmp_path, token, setsid):
    hostile.daemonising_extension(tmp_path, "torch_cluster", setsid=setsid)
    result = invoke_checker("--timeout", "60", env=fake_env(tmp_path, token))
    assert hostile.survivors(token) == []
    attempts = result.json["probe"]["attempts"]
    # The grandchild holds the inherited pipes: the checker must not wait for it
    # until the deadline, and must say it ended it.
    assert result.json["probe"]["complete"] is True
    assert attempts[0]["killed_for"] is None and attempts[0]["subreaper"] is True
    assert len([p for a in attempts for p in a["descendants_ended"]]) == 1
    assert result.json["extensions"]["torch_cluster"]["status"] == "ok"


def test_undecodable_and_huge_error_text_is_strict_bounded_json(tmp_path):
    hostile.undecodable_error_extension(tmp_path, "torch_cluster")
    fakes.fake_distribution(tmp_path, "torch-cluster", "1.6.3+pt213cpu", top_level=["torch_cluster"])
    result = invoke_checker(env=fake_env(tmp_path))  # invoke_checker parses stdout strictly
    error = result.json["extensions"]["torch_cluster"]["error"]
    assert "\ufffd" in error["message"] and "characters cut" in error["message"]
    assert len(error["message"]) <= 2100
    assert len(result.stdout.encode()) < 200000


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


@pytest.mark.parametrize("temp_state", ["present", "missing", "read-only"])
def test_main_checker_is_read_only_under_strace(tmp_path, temp_state):
    import sys
    from conftest import CHECKER, strict_json, traced_run
    home, work, temp = read_only_dirs(tmp_path, temp_state)
    # An extension imported from the cwd (PYTHONPATH=.) must not leave __pycache__ there.
    fakes.make_package(work, "torch_cluster", "import os\n")
    env = clean_env({"HOME": str(home), "TMPDIR": str(temp), "XDG_CACHE_HOME": str(home / ".cache"),
                     "PYTHONPATH": "."})
    completed, problems = traced_run([sys.executable, CHECKER], env, work, [home, work, tmp_path])
    document = strict_json(completed.stdout)
    assert document["probe"]["complete"] is True
    assert document["extensions"]["torch_cluster"]["status"] == "ok"
    assert problems == []
