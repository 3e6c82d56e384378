"""scripts/check_store_contract.py, run the way an agent runs it.

Every case is a subprocess on the real torch and PyG, judged by its exit code
and the finding ids in its JSON. The store pairs live in tests/support/store_fixtures.py:
PyG's own LocalFeatureStore/LocalGraphStore as the reference, and pairs broken
on purpose. The slow part is interpreter start-up (torch + PyG), so all cases
start together in one module fixture and the tests read their results.
"""

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import ToolRun, assert_lists_ids_with_anchors, assert_usage_refusal

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "scripts", "check_store_contract.py")
FIXTURES = "tests/support/store_fixtures.py"
BACKEND_PROBE = ("import torch_geometric.typing as t; "
                 "print('pyg-lib' if t.WITH_PYG_LIB else 'torch-sparse' if t.WITH_TORCH_SPARSE else '')")


def ref(name):
    return "%s:%s" % (FIXTURES, name)


# case -> checker arguments; a case named in WRITE_MARKED records store writes to a marker file.
CASES = {
    "reference_default": ["--feature-store", ref("guarded_feature_store"), "--graph-store", ref("guarded_graph_store")],
    "reference_hetero": [ref("guarded_hetero"), "--write-check"],
    "reference_no_backend": [ref("reference_homo")],
    "wrong_dtype": [ref("wrong_dtype")],
    "lists_not_tensors": [ref("lists_not_tensors")],
    "mismatched_rows": [ref("mismatched_rows")],
    "unsorted_edges": [ref("unsorted_edges")],
    "missing_attrs": [ref("missing_attrs")],
    "hanging": [ref("hanging"), "--timeout", "1"],
    "not_a_store": [ref("not_a_store")],
    "sticky_writes": [ref("sticky_writes"), "--write-check"],
    "broken_factory": [ref("broken_factory")],
    "subtle": [ref("subtle")],
}
WRITE_MARKED = ("reference_default", "reference_hetero")


Run = ToolRun


def run_checker(args, env=None, timeout=180, cwd=None):
    started = time.time()
    process = subprocess.run([sys.executable, SCRIPT, *args], cwd=cwd or REPO, capture_output=True,
                             env=env, timeout=timeout, stdin=subprocess.DEVNULL)
    return Run(process, time.time() - started, args)


@pytest.fixture(scope="module")
def env_without_backend(tmp_path_factory):
    """An environment where torch-sparse fails to import and pyg-lib is absent."""
    shadow = tmp_path_factory.mktemp("no_backend")
    for module in ("torch_sparse", "pyg_lib"):
        (shadow / module).mkdir()
        (shadow / module / "__init__.py").write_text("raise ImportError('%s blocked for this test')\n" % module)
    return dict(os.environ, PYTHONPATH=str(shadow))


@pytest.fixture(scope="module")
def runs(tmp_path_factory, env_without_backend):
    markers = tmp_path_factory.mktemp("write_markers")
    jobs = {}
    for name, args in CASES.items():
        env = dict(os.environ, STORE_WRITE_MARKER=str(markers / name)) if name in WRITE_MARKED else None
        if name == "reference_no_backend":
            env = env_without_backend
        jobs[name] = (args, env)
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        backend = pool.submit(subprocess.run, [sys.executable, "-c", BACKEND_PROBE], capture_output=True, text=True)
        futures = {name: pool.submit(run_checker, args, env) for name, (args, env) in jobs.items()}
        results = {name: future.result() for name, future in futures.items()}
    results["backend"] = backend.result().stdout.strip()
    results["markers"] = markers
    return results


def needs_backend(runs):
    if not runs["backend"]:
        pytest.skip("no neighbour-sampling backend here (check_sampling_backends.py reports "
                    "neighbor-sampling-unavailable)")


# Command line ------------------------------------------------------------------

def test_list_findings_names_every_id_with_its_docs_anchor(runs):
    assert_lists_ids_with_anchors(SCRIPT, ("store-", "environment-"),  # the runner's shared ids too
                                  {f for name, run in runs.items() if isinstance(run, Run) for f in run.ids})


# Every refusal's reason: tests/fast/test_store_command_line.py; here, what an agent sees of one.
@pytest.mark.parametrize("args", [
    ["--timeout", "abc", ref("reference_homo")],
    [ref("reference_homo"), "--feature-store", ref("reference_feature_store")],
])
@pytest.mark.finding("store-usage-error")
def test_bad_usage_is_one_line_on_stderr_and_exit_2(args):
    run = run_checker(args, timeout=30)
    assert_usage_refusal(run.returncode, run.stderr, run.document, "store-usage-error")


def test_every_run_prints_one_json_document_with_the_common_keys(runs):
    for name in CASES:
        run = runs[name]
        assert run.document is not None, (name, run.stderr[-2000:])
        assert list(run.document)[:5] == ["schema_version", "ok", "status", "exit_code", "findings"]
        assert run.document["exit_code"] == run.returncode
        assert run.document["ok"] == (run.returncode == 0)


# Reference implementation -------------------------------------------------------

def assert_clean_but_for_missing_backend(runs, run):
    """No error or warning, except store-sampling-unavailable exactly when this machine has no backend."""
    problems = [f["id"] for f in run.document["findings"] if f["severity"] in ("error", "warning")]
    expected = [] if runs["backend"] else ["store-sampling-unavailable"]
    assert problems == expected, run.document["findings"]


def test_pyg_local_stores_from_data_pass(runs):
    run = runs["reference_default"]
    assert run.returncode == 0, run.document["findings"]
    assert_clean_but_for_missing_backend(runs, run)
    assert [t["attr"] for t in run.document["tensors"]] == ["x", "y"]
    assert all(t["indexed"]["get_tensor"]["matches"] for t in run.document["tensors"])


def test_pyg_local_stores_from_hetero_data_pass(runs):
    run = runs["reference_hetero"]
    assert run.returncode == 0, run.document["findings"]
    assert_clean_but_for_missing_backend(runs, run)
    assert {json.dumps(e["edge_type"]) for e in run.document["edges"]} == {
        json.dumps(["author", "writes", "paper"]), json.dumps(["paper", "rev_writes", "author"])}


@pytest.mark.parametrize("case", ["reference_default", "reference_hetero"])
def test_reference_sampling_batch_has_the_right_shapes(runs, case):
    needs_backend(runs)
    sampling = runs[case].document["sampling"]
    assert sampling["status"] == "ok", sampling
    assert sampling["backend"] == runs["backend"]
    assert sampling["problems"] == []
    node_counts = [n["num_nodes"] for n in sampling["batch"].values() if "num_nodes" in n]
    assert node_counts and min(node_counts) >= 1


@pytest.mark.finding("store-sampling-unavailable")
def test_missing_backend_gives_a_warning_naming_the_main_checker(runs):
    run = runs["reference_no_backend"]
    assert run.returncode == 0
    found = run.finding("store-sampling-unavailable")
    assert found["severity"] == "warning"
    assert found["evidence"]["main_checker_finding"] == "neighbor-sampling-unavailable"
    assert "check_sampling_backends.py --require-neighbor-backend" in found["fix"]
    assert run.document["sampling"]["status"] == "unavailable"


# Writes only on request ---------------------------------------------------------

def test_default_run_never_writes(runs):
    run = runs["reference_default"]
    assert run.document["write_check"] == {"performed": False}
    assert not (runs["markers"] / "reference_default").exists()


def test_write_check_round_trips_and_leaves_the_store_as_found(runs):
    run = runs["reference_hetero"]
    assert run.returncode == 0, run.document["findings"]
    write = run.document["write_check"]
    assert write["performed"] is True
    for store in ("feature_store", "graph_store"):
        assert all(step["ok"] for step in write[store]["steps"]), write[store]
        assert write[store]["cleanup"]["ok"] is True
    # The recording store proves the writes really happened (and only here).
    recorded = (runs["markers"] / "reference_hetero").read_text().split()
    assert {"put_tensor", "remove_tensor", "put_edge_index", "remove_edge_index"} <= set(recorded)


@pytest.mark.finding("store-write-cleanup-failed", "store-write-roundtrip-failed")
def test_write_check_catches_a_remove_that_keeps_the_tensor(runs):
    run = runs["sticky_writes"]
    assert run.returncode == 1
    failed = [s["step"] for s in run.finding("store-write-roundtrip-failed")["evidence"]["failed_steps"]]
    assert "get after remove is None" in failed
    assert run.finding("store-write-cleanup-failed")["evidence"]["store"] == "feature_store"


# Stores broken on purpose ---------------------------------------------------------

@pytest.mark.parametrize("case, finding_id, evidence", [
    ("wrong_dtype", "store-dtype-inconsistent", {"attr": "x", "dtype": "float64", "expected_dtype": "float32"}),
    ("lists_not_tensors", "store-tensor-not-tensor", {"attr": "x"}),
    ("mismatched_rows", "store-row-count-mismatch", {"rows_by_attr": {"x": 12, "y": 11}}),
    ("unsorted_edges", "store-edge-pointer-invalid", {"edge_type": ["author", "writes", "paper"], "layout": "csc"}),
    ("unsorted_edges", "store-edge-sorted-claim-false", {"edge_type": ["paper", "rev_writes", "author"]}),
    ("unsorted_edges", "store-edge-index-dtype", {"edge_type": ["paper", "cites", "paper"]}),
    ("missing_attrs", "store-listed-attr-missing", {"attr": "train_mask"}),
    ("not_a_store", "store-wrong-base-class", {"store": "feature_store", "class": "dict"}),
    ("unsorted_edges", "store-edge-type-unknown-node-type", {"unknown_node_types": ["venue"]}),
    ("broken_factory", "store-factory-failed", {}),
    ("subtle", "store-indexed-read-wrong", {"attr": "x", "index": [11, 0, 6, 0], "misread": "rows in id order"}),
    ("subtle", "store-tensor-size-mismatch", {"attr": "y", "get_tensor_size": [13], "tensor_shape": [12]}),
    ("subtle", "store-missing-key-behaviour", {"call": "get_tensor(<missing attr>)"}),
    ("subtle", "store-graph-meta-invalid", {"meta_type": "NoneType"}),
])
@pytest.mark.finding(
    "store-dtype-inconsistent",
    "store-edge-index-dtype",
    "store-edge-pointer-invalid",
    "store-edge-sorted-claim-false",
    "store-edge-type-unknown-node-type",
    "store-graph-meta-invalid",
    "store-listed-attr-missing",
    "store-missing-key-behaviour",
    "store-row-count-mismatch",
    "store-wrong-base-class")
def test_broken_store_gives_expected_finding(runs, case, finding_id, evidence):
    runs[case].error_finding(finding_id, **evidence)


@pytest.mark.finding("store-tensor-not-tensor")
def test_lists_and_arrays_are_both_rejected(runs):
    returned = {f["evidence"]["attr"]: f["evidence"]["returned"]["type"]
                for f in runs["lists_not_tensors"].document["findings"] if f["id"] == "store-tensor-not-tensor"}
    assert returned == {"x": "list", "y": "numpy.ndarray"}


@pytest.mark.finding("store-factory-failed")
def test_factory_error_is_reported_with_its_message(runs):
    evidence = runs["broken_factory"].finding("store-factory-failed")["evidence"]
    assert "ConnectionError: cannot reach feature service" in evidence["error"]


@pytest.mark.finding("store-call-timeout")
def test_hanging_store_gives_a_timeout_finding_and_exits_promptly(runs):
    run = runs["hanging"]
    assert run.returncode == 1
    evidence = run.finding("store-call-timeout")["evidence"]
    assert evidence["call"] == "feature_store.get_all_tensor_attrs()"
    assert evidence["timeout_s"] == 1.0
    assert run.elapsed < 45  # interpreter start-up plus the 1 s bound, not the store's hour


@pytest.mark.parametrize("case, error_fragment", [
    ("mismatched_rows", "IndexError"),
    ("subtle", "'NoneType' object has no attribute 'get'"),
])
@pytest.mark.finding("store-sampling-failed")
def test_real_loader_batch_fails_where_the_contract_is_broken(runs, case, error_fragment):
    needs_backend(runs)
    found = runs[case].finding("store-sampling-failed")
    assert error_fragment in found["evidence"]["error"]


# Recorded facts ---------------------------------------------------------------------

@pytest.mark.parametrize("case, run_name", [("homo", "reference_default"), ("hetero", "reference_hetero")])
def test_the_fast_tiers_recorded_facts_have_the_shape_of_a_real_run(runs, case, run_name, tmp_path, neighbor_backend):
    """tests/fast/store_facts.json, which the fast tier edits to replay every rule, has the sections a real run
    over the same stores prints today (RECORD_FACTS=1 gathers and rewrites it)."""
    from support import recorded_facts
    if recorded_facts.recording_asked():
        recorded = {"homo": "reference_default", "hetero": "reference_hetero"}
        cases = dict((name, [os.path.join(REPO, word) if word.startswith(FIXTURES) else word for word in CASES[run]])
                     for name, run in recorded.items())
        recorded_facts.record("store_checker", cases, tmp_path)
    compared, differing = recorded_facts.differing_sections("store_checker", case, runs[run_name].document)
    assert len(compared) == 11 and differing == []
