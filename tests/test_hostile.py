"""Hostile inputs (issue 14): nothing crashes, hangs, leaks, writes or lies.

Each test reproduces one class of failure the way a real misbehaving
extension, store or environment produces it, and runs the tools as
subprocesses the way an agent does.
"""

import json
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


def installed_pyg_version():
    import importlib.metadata
    return importlib.metadata.version("torch_geometric")


def stray_pyg(root, version="2.3.0"):
    """An old PyG checkout or vendored copy: a real-looking package with no working backend flags."""
    fakes.make_package(root, "torch_geometric", "__version__ = %r\n" % version, files={
        "typing.py": "WITH_PYG_LIB = False\nWITH_TORCH_SPARSE = False\nWITH_PT20 = True\n"})


@diagnoses("pyg-shadowed")
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


@diagnoses("launch-slurm-rank-out-of-range")
def test_slurm_ranks_outside_their_counts():
    env = clean_env({"SLURM_PROCID": "5", "SLURM_NTASKS": "4", "SLURM_LOCALID": "4",
                     "SLURM_NTASKS_PER_NODE": "4(x2)", "SLURM_NODEID": "2", "SLURM_NNODES": "2",
                     "SLURM_JOB_ID": "7"})
    result = invoke_checker("--static-only", env=env)
    found = result.only("launch-slurm-rank-out-of-range")
    assert found["severity"] == "error"
    assert found["evidence"] == {
        "SLURM_PROCID": {"SLURM_PROCID": 5, "SLURM_NTASKS": 4},
        "SLURM_LOCALID": {"SLURM_LOCALID": 4, "SLURM_NTASKS_PER_NODE": 4, "SLURM_NTASKS_PER_NODE_raw": "4(x2)"},
        "SLURM_NODEID": {"SLURM_NODEID": 2, "SLURM_NNODES": 2}}
    assert "launch-env-invalid" not in result.ids()  # "4(x2)" is SLURM's own notation, not an error
    assert found["fix"].startswith("do not export SLURM_* by hand")


def test_slurm_ranks_inside_uneven_node_counts_are_fine():
    # "3,2": node 1 runs two tasks, so local id 1 is valid there.
    env = clean_env({"SLURM_PROCID": "4", "SLURM_NTASKS": "5", "SLURM_LOCALID": "1",
                     "SLURM_NTASKS_PER_NODE": "3,2", "SLURM_NODEID": "1", "SLURM_NNODES": "2"})
    result = invoke_checker("--static-only", env=env)
    assert not {"launch-slurm-rank-out-of-range", "launch-env-invalid"} & set(result.ids())
    env["SLURM_LOCALID"] = "2"
    assert invoke_checker("--static-only", env=env).only("launch-slurm-rank-out-of-range")["evidence"] == {
        "SLURM_LOCALID": {"SLURM_LOCALID": 2, "SLURM_NTASKS_PER_NODE": 2, "SLURM_NTASKS_PER_NODE_raw": "3,2"}}


@diagnoses("launch-mpi-rank-out-of-range")
def test_mpi_ranks_outside_their_sizes():
    env = clean_env({"PMI_RANK": "2", "PMI_SIZE": "2", "OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2",
                     "OMPI_COMM_WORLD_LOCAL_RANK": "3", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"})
    found = invoke_checker("--static-only", env=env).only("launch-mpi-rank-out-of-range")
    assert found["severity"] == "error"
    assert found["evidence"] == {
        "PMI_RANK": {"PMI_RANK": 2, "PMI_SIZE": 2},
        "OMPI_COMM_WORLD_LOCAL_RANK": {"OMPI_COMM_WORLD_LOCAL_RANK": 3, "OMPI_COMM_WORLD_LOCAL_SIZE": 2}}
    assert "mpirun -np N" in found["fix"]


# ---------------------------------------------------------------------------
# Contract checkers: user stores run in the sandboxed child
# ---------------------------------------------------------------------------

STORE = "check_store_contract.py"


def store_run(*args, cwd, token=None, env=None, **options):
    from conftest import invoke_tool
    env = dict(env or clean_env())
    if token:
        env[hostile.TOKEN_VARIABLE] = token
    return invoke_tool(STORE, *args, env=env, cwd=cwd, **options)


def test_store_call_that_segfaults_gives_json_naming_the_call(tmp_path):
    hostile.write_hostile_stores(tmp_path)
    result = store_run("hostile_stores:crashing_read", "--skip-sampling", cwd=tmp_path)
    assert result.returncode == 1
    found = result.only("store-call-crashed")
    assert found["evidence"]["signal"] == "SIGSEGV"
    assert found["evidence"]["call"].startswith("feature_store.get_tensor")
    assert result.json["gates"] == {"contract": {"passed": False}}
    # what was gathered before the crash is kept
    assert result.json["tensor_attrs"]["count"] == 1 and result.json["edge_attrs"]["count"] == 1


@pytest.mark.parametrize("store, gil_spin", [("gil_sleeping", False), ("gil_spinning", True)],
                         ids=["ctypes-libc-sleep", "gcc-extension-spin"])
def test_store_call_blocking_in_c_with_the_gil_is_ended_at_the_timeout(tmp_path, token, store, gil_spin):
    hostile.write_hostile_stores(tmp_path, gil_spin=gil_spin)
    result = store_run("hostile_stores:" + store, "--timeout", "3", cwd=tmp_path, token=token)
    assert result.returncode == 1
    found = result.only("store-call-timeout")
    assert found["evidence"]["call"] == "feature_store.get_all_tensor_attrs()"
    assert found["evidence"]["timeout_s"] == 3.0
    # libc's sleep returns early when the alarm's signal arrives; a spin in C ignores it and is killed
    assert ("alarm" if store == "gil_sleeping" else "killing the child") in found["evidence"]["ended_by"]
    # bounded by the tool's own deadlines: the call's 3 s plus the kill grace, not the store's 600 s
    assert result.json["checker"]["child"]["seconds"] < result.json["checker"]["setup_timeout_s"] + 3 + 2 + 5
    assert hostile.survivors(token) == []


def test_store_that_daemonises_leaves_nothing_running(tmp_path, token):
    hostile.write_hostile_stores(tmp_path)
    result = store_run("hostile_stores:daemonising", "--skip-sampling", cwd=tmp_path, token=token)
    assert result.returncode == 0, result.json["findings"]
    assert hostile.survivors(token) == []
    assert len(result.json["checker"]["child"]["descendants_ended"]) == 1


def test_store_that_exits_is_reported_not_taken_for_success(tmp_path):
    hostile.write_hostile_stores(tmp_path)
    result = store_run("hostile_stores:exits", cwd=tmp_path)
    assert result.returncode == 1
    found = result.only("store-call-crashed")
    assert found["evidence"]["returncode"] == 0 and found["evidence"]["call"] == "hostile_stores:exits()"


def test_edge_ids_past_num_nodes_give_json_not_a_segfault(tmp_path, neighbor_backend):
    hostile.write_hostile_stores(tmp_path)
    result = store_run("hostile_stores:edge_ids_past_num_nodes", cwd=tmp_path)
    assert result.returncode == 1
    assert result.only("store-edge-index-out-of-range")["evidence"]["problems"][0]["index"] == "row"
    crashed = result.only("store-sampling-failed")["evidence"]["crashed"]
    assert crashed["signal"] in ("SIGSEGV", "SIGABRT", "SIGBUS")  # the native sampler read past its arrays
    assert crashed["call"] == "NeighborLoader((feature_store, graph_store)) first batch"
    assert result.json["sampling"]["status"] == "crashed"


@pytest.mark.parametrize("reference, message", [
    ("no_such_module:make", "module 'no_such_module' not found"),
    ("hostile_stores:no_such_callable", "has no attribute 'no_such_callable'"),
    ("hostile_stores:good.missing", "has no attribute 'missing'"),
])
def test_reference_that_does_not_exist_is_a_usage_error(tmp_path, reference, message):
    hostile.write_hostile_stores(tmp_path)
    result = store_run(reference, cwd=tmp_path)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr
    assert result.ids() == ["store-reference-not-found"]
    assert result.json["ok"] is False and result.json["gates"] == {}


def test_missing_import_inside_the_users_module_is_the_stores_failure(tmp_path):
    hostile.write_hostile_stores(tmp_path)
    result = store_run("hostile_stores:needs_missing_dependency", cwd=tmp_path)
    assert result.returncode == 1
    assert "no_such_store_client_library" in result.only("store-factory-failed")["evidence"]["error"]


def test_module_found_through_path_when_run_from_the_skill_root(tmp_path):
    from conftest import ROOT
    project = hostile.write_hostile_stores(tmp_path / "project")
    # As SKILL.md says: from the skill's folder. The module is not there...
    missing = store_run("hostile_stores:good", "--skip-sampling", cwd=ROOT)
    assert missing.returncode == 2 and missing.ids() == ["store-reference-not-found"]
    assert "--path" in missing.only("store-reference-not-found")["fix"]
    # ...and --path names the user's project.
    found = store_run("hostile_stores:good", "--skip-sampling", "--path", project, cwd=ROOT)
    assert found.returncode == 0, found.json["findings"]
    assert found.json["setup"]["feature_store"]["class"] == "torch_geometric.distributed.local_feature_store." \
                                                           "LocalFeatureStore"


def test_without_torch_the_store_checker_names_the_remedy(tmp_path):
    from conftest import pyenv_python
    python = pyenv_python("3.12")
    hostile.write_hostile_stores(tmp_path)
    result = store_run("hostile_stores:good", cwd=tmp_path, python=python)
    assert result.returncode == 2
    assert result.ids() == ["store-stack-missing"]
    found = result.only("store-stack-missing")
    assert found["evidence"]["missing"] == ["torch", "torch_geometric"]
    assert found["fix"].startswith("%s -m pip install torch torch_geometric" % python)
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_partition_file_that_would_segfault_is_never_unpickled(tmp_path):
    """A map whose unpickling calls into ctypes and crashes: named as code, loaded by nothing, even
    with --allow-pickle (only a file the scan proves free of code is ever unpickled)."""
    from conftest import invoke_tool
    root = hostile.write_crashing_partition(tmp_path / "parts")
    for flags in ((), ("--allow-pickle",)):
        result = invoke_tool("check_partition.py", root, *flags)
        assert result.returncode == 1 and "partition-load-crashed" not in result.ids()
        found = result.only("partition-pickle-holds-code")
        files = {entry["path"]: entry for entry in found["evidence"]["files"]}
        assert "node_map.pt" in files and files["node_map.pt"]["scan"]["refused"], files
        assert result.json["meta"] is not None and result.json["gates"] == {"contract": {"passed": False}}
        assert result.json["checker"]["child"]["signal"] is None  # the child never crashed


def test_without_torch_the_partition_checker_names_the_remedy(tmp_path):
    from conftest import invoke_tool, pyenv_python
    python = pyenv_python("3.12")
    result = invoke_tool("check_partition.py", tmp_path, python=python)
    assert result.returncode == 2 and result.ids() == ["partition-stack-missing"]
    assert result.only("partition-stack-missing")["fix"].startswith("%s -m pip install torch" % python)
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("temp_state", ["present", "missing", "read-only"])
def test_contract_checkers_are_read_only_under_strace(tmp_path, temp_state):
    import sys
    from conftest import ROOT, strict_json, traced_run
    home, work, temp = read_only_dirs(tmp_path, temp_state)
    hostile.write_hostile_stores(work)  # the user's module, imported as a dotted name from the cwd
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "META.json").write_text(json.dumps({"num_parts": 1, "node_types": None, "edge_types": None,
                                                 "node_offset": None, "is_hetero": False, "is_sorted": False}))
    env = clean_env({"HOME": str(home), "TMPDIR": str(temp), "XDG_CACHE_HOME": str(home / ".cache")})
    for command in ([sys.executable, ROOT / "scripts" / STORE, "hostile_stores:good"],
                    [sys.executable, ROOT / "scripts" / "check_partition.py", parts]):
        completed, problems = traced_run(command, env, work, [home, work, tmp_path, ROOT / "scripts"])
        document = strict_json(completed.stdout)
        assert document["exit_code"] == completed.returncode in (0, 1), completed.stderr[-2000:]
        assert problems == [], command


# ---------------------------------------------------------------------------
# Further hostile cases (beyond issue 14's list)
# ---------------------------------------------------------------------------

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


def test_sigterm_to_the_checker_ends_its_probe_child_and_descendants(tmp_path, token):
    import signal
    import subprocess
    import sys
    import time
    from conftest import CHECKER
    hostile.daemonising_extension(tmp_path, "pyg_lib", setsid=True)
    fakes.fake_hang(tmp_path, "torch_cluster")
    process = subprocess.Popen([sys.executable, str(CHECKER), "--timeout", "120"], env=fake_env(tmp_path, token),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    # Wait, within the checker's own deadline, until the probe child and the daemon both exist.
    limit = time.time() + 120
    while len(hostile.survivors(token)) < 3 and time.time() < limit and process.poll() is None:
        time.sleep(0.1)
    assert len(hostile.survivors(token)) >= 3  # checker, probe child, daemon
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM
    assert hostile.survivors(token) == []
