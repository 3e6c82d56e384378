"""The checker under hostile inputs: nothing crashes, hangs, leaks, writes or lies.

Each test reproduces one class of failure the way a real misbehaving extension, metadata file or
launcher produces it (support/hostile_fakes.py, support/fakes.py), then asserts on the JSON.
"""


import pytest

from support import fakes, hostile_fakes as hostile
from conftest import clean_env, invoke_checker


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


def installed_pyg_version():
    import importlib.metadata
    return importlib.metadata.version("torch_geometric")


def stray_pyg(root, version="2.3.0"):
    """An old PyG checkout or vendored copy: a real-looking package with no working backend flags."""
    fakes.make_package(root, "torch_geometric", "__version__ = %r\n" % version, files={
        "typing.py": "WITH_PYG_LIB = False\nWITH_TORCH_SPARSE = False\nWITH_PT20 = True\n"})


@pytest.mark.finding("pyg-shadowed")
def test_stray_pyg_on_pythonpath_is_named_not_mistaken_for_a_missing_backend(tmp_path):
    stray = tmp_path / "vendor"
    stray_pyg(stray)
    env = clean_env({"PYTHONPATH": str(stray)})
    result = invoke_checker(env=env)
    found = result.only("pyg-shadowed")
    assert found["severity"] == "error"
    assert found["evidence"]["imported_version"] == "2.3.0"
    assert found["evidence"]["shadowing_path"] == str(stray)
    assert found["evidence"]["origin"] == "PYTHONPATH"
    assert [r["version"] for r in found["evidence"]["installed"]] == [installed_pyg_version()]
    assert found["fix"] == "unset PYTHONPATH"
    # the stray copy's flags must not turn into "install pyg-lib"
    assert "neighbor-sampling-unavailable" not in result.ids()
    assert not any("pyg_lib" in (f["fix"] or "") for f in result.json["findings"])
    # The fix, run: without the stray path PyG is the installed one again.
    fixed = invoke_checker("--static-only", env=clean_env())
    assert "pyg-shadowed" not in fixed.ids()
    full = invoke_checker(env=clean_env())
    assert "pyg-shadowed" not in full.ids() and full.json["pyg"]["version"] == installed_pyg_version()


@pytest.mark.finding("torch-shadowed")
@pytest.mark.parametrize("mode", [["--static-only"], []], ids=["static-only", "full-probe"])
def test_a_stray_torch_on_pythonpath_is_named_before_anything_imports_it(tmp_path, mode):
    stray = tmp_path / "vendor"
    fakes.make_package(stray, "torch", "raise ImportError('a stray torch, not the installed one')\n")
    result = invoke_checker(*mode, env=clean_env({"PYTHONPATH": str(stray)}))
    found = result.only("torch-shadowed")
    assert found["evidence"]["imported_from"] == str(stray / "torch") and found["evidence"]["origin"] == "PYTHONPATH"
    assert found["evidence"]["installed"] and found["fix"] == "unset PYTHONPATH"
    assert "torch-shadowed" not in invoke_checker("--static-only", env=clean_env()).ids()


def test_stray_pyg_among_other_pythonpath_entries_keeps_the_others(tmp_path):
    stray, other = tmp_path / "vendor", tmp_path / "mine"
    stray_pyg(stray)
    other.mkdir()
    result = invoke_checker("--timeout", "60", env=clean_env({"PYTHONPATH": "%s:%s" % (stray, other)}))
    assert result.only("pyg-shadowed")["fix"] == "export PYTHONPATH=%s" % other


def test_duplicate_metadata_quotes_the_imported_version(tmp_path):
    # A stale dist-info left earlier on the path, the installed PyG still imported.
    fakes.fake_distribution(tmp_path, "torch-geometric", "2.3.0", wheel_tag="py3-none-any",
                            top_level=["torch_geometric"])
    result = invoke_checker(env=clean_env({"PYTHONPATH": str(tmp_path)}))
    assert "pyg-shadowed" not in result.ids()
    assert result.findings("duplicate-distribution")
    assert result.only("pyg-distributed-deprecated")["evidence"]["pyg_version"] == installed_pyg_version()


def test_extension_blocking_in_c_with_the_gil_is_declared_hung(tmp_path, token):
    fakes.make_package(tmp_path, "torch_cluster", hostile.gil_sleeping_call_source() + "\n")
    result = invoke_checker("--timeout", "30", env=fake_env(tmp_path, token))
    assert result.json["extensions"]["torch_cluster"]["status"] == "hung"
    assert result.json["pyg"]["status"] == "ok"  # probed again with it blocked
    assert hostile.survivors(token) == []


def test_forged_records_from_a_forked_copy_are_ignored(tmp_path):
    hostile.forging_extension(tmp_path, "torch_cluster")
    result = invoke_checker("--timeout", "60", env=fake_env(tmp_path))
    assert result.json["pyg"]["version"] == installed_pyg_version()


def test_exception_whose_str_raises_is_still_described(tmp_path):
    hostile.unprintable_error_extension(tmp_path, "torch_cluster")
    result = invoke_checker(env=fake_env(tmp_path))
    entry = result.json["extensions"]["torch_cluster"]
    assert entry["status"] == "import-error"
    assert entry["error"]["type"] == "HostileError" and "str() raised RuntimeError" in entry["error"]["message"]


@pytest.mark.finding("checker-interrupted")
def test_sigterm_to_the_checker_ends_its_probe_child_and_descendants(tmp_path, token):
    import signal
    import subprocess
    import sys
    import time
    from conftest import CHECKER, interrupted_finding
    hostile.daemonising_extension(tmp_path, "pyg_lib", setsid=True)
    fakes.fake_hang(tmp_path, "torch_cluster")
    process = subprocess.Popen([sys.executable, str(CHECKER), "--timeout", "120"], env=fake_env(tmp_path, token),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    # Wait, within the checker's own deadline, until the probe child and the daemon both exist.
    limit = time.time() + 120
    while len(hostile.survivors(token)) < 3 and time.time() < limit and process.poll() is None:
        time.sleep(0.1)
    assert len(hostile.survivors(token)) >= 3  # checker, probe child, daemon
    # Between two steps the checker knows no current step; on a loaded machine (two test workers) the signal
    # could land there. A second later the child is inside torch_cluster's import, which hangs.
    time.sleep(1.0)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=60)
    assert hostile.survivors(token) == []
    # One document: interrupted, exit 143, naming the probe step the child was in and the probed interpreter.
    document, stopped = interrupted_finding(process, stdout, signal.SIGTERM, "checker-interrupted")
    # (the daemon starts with pyg_lib's import; the signal comes during one of the extensions' imports after it)
    running = stopped["evidence"]["running"]
    assert running["probe_step"].startswith("ext:") and running["interpreter"] == sys.executable
    assert document["interpreter"]["probed"] == sys.executable and document["torch"] is None
    assert stopped["fix"].startswith("python3 %s --timeout 120  # " % CHECKER)
    assert b"interrupted (exit 143)" in stderr
