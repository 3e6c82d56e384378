"""The store checker against user stores that misbehave: segfaults, GIL-holding hangs, daemons,
exits and bad references, each in the sandboxed child, each named in the JSON.
"""


import pytest

from support import hostile_fakes as hostile
from conftest import clean_env
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


@pytest.mark.finding("store-call-crashed")
def test_store_that_exits_is_reported_not_taken_for_success(tmp_path):
    hostile.write_hostile_stores(tmp_path)
    result = store_run("hostile_stores:exits", cwd=tmp_path)
    assert result.returncode == 1
    found = result.only("store-call-crashed")
    assert found["evidence"]["returncode"] == 0 and found["evidence"]["call"] == "hostile_stores:exits()"


@pytest.mark.finding("store-edge-index-out-of-range")
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
@pytest.mark.finding("store-reference-not-found")
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


@pytest.mark.finding("store-stack-missing")
def test_without_torch_the_store_checker_names_the_remedy(tmp_path):
    from conftest import pyenv_python
    python = pyenv_python("3.12")
    hostile.write_hostile_stores(tmp_path)
    result = store_run("hostile_stores:good", cwd=tmp_path, python=python)
    assert result.returncode == 2
    assert result.ids() == ["store-stack-missing"]
    found = result.only("store-stack-missing")
    assert found["evidence"]["missing"] == ["torch", "torch_geometric"]
    # torch pinned to its CPU build: an unpinned `pip install torch` on Linux pulls PyPI's CUDA build
    assert found["fix"].startswith("%s -m pip install torch==2.13.0+cpu --index-url https://download.pytorch.org/"
                                   "whl/cpu && %s -m pip install torch_geometric  # " % (python, python))
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
