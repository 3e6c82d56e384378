"""scripts/check_partition.py, run the way an agent runs it.

Partition folders are written by PyG's real Partitioner (only METIS, which is
not available here, is replaced; see tests/support/partition_writer.py), homogeneous
and heterogeneous, with and without edge features, plus copies damaged on
purpose. The checker's verdict is compared with what PyG's own
LocalGraphStore/LocalFeatureStore.from_partition do with each part on this
torch. Interpreter start-up dominates, so the checker runs start together in
one module fixture and the tests read their results.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from support.helpers import torch_loads_defaultdict_edge_feats
from conftest import (ToolRun, assert_lists_ids_with_anchors, assert_usage_refusal,
                      tree_state)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "scripts", "check_partition.py")
WRITER = os.path.join(REPO, "tests", "support", "partition_writer.py")
REAL_CASES = ("homo", "homo_edge_attr", "hetero", "hetero_edge_attr")
STORES = ("LocalGraphStore", "LocalFeatureStore")


Run = ToolRun


def run_checker(*args):
    started = time.time()
    process = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, timeout=180,
                             stdin=subprocess.DEVNULL)
    return Run(process, time.time() - started)


def run_writer(*args):
    process = subprocess.run([sys.executable, WRITER, *args], capture_output=True, text=True, timeout=180)
    assert process.returncode == 0, process.stderr[-3000:]
    return json.loads(process.stdout)


def snapshot(folder):
    return tree_state(folder)


@pytest.fixture(scope="module")
def written(partition_folders):
    return dict(partition_folders, stalled=os.path.join(partition_folders["out"], "stalled_file"))


@pytest.fixture(scope="module")
def runs(written):
    before = snapshot(written["out"])
    jobs = {name: (root,) for name, root in written["cases"].items()}
    jobs["stalled_file"] = (written["stalled"], "--timeout", "1")
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        futures = {name: pool.submit(run_checker, *args) for name, args in jobs.items()}
        results = {name: future.result() for name, future in futures.items()}
    results["snapshots"] = (before, snapshot(written["out"]))
    return results


def truth(written, case):
    """PyG's own from_partition outcome for every part: {part: {store: loads}}."""
    verdicts = written["verdicts"][written["cases"][case]]
    return {pid: {store: verdicts[pid][store] for store in STORES} for pid in verdicts}


def checker_verdict(run):
    return {str(part["index"]): {store: part["from_partition"][store]["loads"] for store in STORES}
            for part in run.document["parts"]}


# Command line ------------------------------------------------------------------

def test_list_findings_names_every_id_with_its_docs_anchor(runs):
    assert_lists_ids_with_anchors(SCRIPT, ("partition-", "environment-"),  # the runner's shared ids too
                                  {f for run in runs.values() if isinstance(run, Run) for f in run.ids})


# Every refusal's reason: tests/fast/test_partition_command_line.py; here, what an agent sees of one.
@pytest.mark.parametrize("args", [
    ["/no/such/partition/folder"],
    [".", "--timeout", "soon"],
])
@pytest.mark.finding("partition-usage-error")
def test_bad_usage_is_one_line_on_stderr_and_exit_2(args):
    run = run_checker(*args)
    assert_usage_refusal(run.returncode, run.stderr, run.document, "partition-usage-error")


def test_the_folder_is_never_modified(runs):
    before, after = runs["snapshots"]
    assert before == after


# Folders written by PyG's Partitioner ---------------------------------------------

@pytest.mark.parametrize("case", REAL_CASES)
def test_verdict_matches_from_partition_on_this_torch(written, runs, case):
    run, expected = runs[case], truth(written, case)
    assert checker_verdict(run) == expected
    all_load = all(all(stores.values()) for stores in expected.values())
    assert (run.returncode == 0) == all_load, run.document["findings"]
    failing = sorted(int(pid) for pid, stores in expected.items() if not all(stores.values()))
    assert run.document["verdict"]["from_partition_fails"] == failing


@pytest.mark.parametrize("case", ["homo_edge_attr", "hetero_edge_attr"])
@pytest.mark.finding("partition-edge-feats-unloadable", "partition-from-partition-fails")
def test_edge_features_unloadable_under_weights_only_is_named(written, runs, case):
    verdicts = written["verdicts"][written["cases"][case]]
    if all(verdicts[pid]["LocalFeatureStore"] for pid in verdicts):
        pytest.skip("this torch loads PyG's defaultdict edge_feats.pt; nothing to report")
    assert "defaultdict" in verdicts["0"]["LocalFeatureStore_error"]
    found = runs[case].finding("partition-edge-feats-unloadable")
    assert sorted(f["path"] for f in found["evidence"]["files"]) == ["part_0/edge_feats.pt",
                                                                     "part_1/edge_feats.pt"]
    assert runs[case].finding("partition-from-partition-fails")["evidence"]["parts"].keys() == {"0", "1"}


def test_edge_features_fix_makes_from_partition_load(written, tmp_path):
    """Run the fix exactly as the checker printed it for copies of the two folders, then ask PyG itself.

    Copies: the fix rewrites its folder, and other test files (perhaps on another worker) read the
    session's partition folders."""
    if torch_loads_defaultdict_edge_feats():
        pytest.skip("this torch loads PyG's defaultdict edge_feats.pt; no fix to test")
    roots = []
    for case in ("homo_edge_attr", "hetero_edge_attr"):
        roots.append(str(tmp_path / case))
        shutil.copytree(written["cases"][case], roots[-1])
    with ThreadPoolExecutor(max_workers=len(roots)) as pool:
        checked = list(pool.map(run_checker, roots))
        fixes = [run.finding("partition-edge-feats-unloadable")["fix"] for run in checked]
        done = list(pool.map(lambda fix: subprocess.run(["bash", "-c", fix], capture_output=True, text=True,
                                                        timeout=120), fixes))
    assert [process.returncode for process in done] == [0] * len(done), [p.stderr[-1000:] for p in done]
    verdicts = run_writer("verdicts", *roots)["verdicts"]
    for root in roots:
        assert os.path.isdir(root + ".bak")  # the fix keeps a backup first
        assert all(all(verdicts[root][pid][store] for store in STORES) for pid in ("0", "1")), verdicts[root]


@pytest.mark.finding("partition-labels-missing")
def test_recipe_labels_and_seeds_are_found_and_checked(runs):
    labels = runs["hetero"].document["labels"]
    assert [(entry["node_type"], entry["shape"]) for entry in labels["labels"]] == [("paper", [10])]
    assert labels["seeds"]["hetero-train-partitions"]["id_upper_bound"] == 10
    assert "partition-labels-missing" not in runs["hetero"].ids
    assert "partition-labels-missing" in runs["homo_edge_attr"].ids  # plain folder: Partitioner writes no labels


# Folders damaged on purpose -------------------------------------------------------------

@pytest.mark.parametrize("case, finding_id, evidence_check", [
    ("incomplete_copy", "partition-part-missing", lambda e: e["missing"] == [1]),
    ("incomplete_copy", "partition-file-unloadable", lambda e: e["files"][0]["path"] == "part_0/graph.pt"),
    ("truncated_map", "partition-map-size-mismatch", lambda e: e["problems"][0]["node_map_lengths"] == [10, 10]),
    ("truncated_map", "partition-node-coverage", lambda e: e["problems"][0]["ids_out_of_range"] >= 1),
    ("wrong_meta", "partition-meta-invalid", lambda e: any("is_hetero" in p for p in e["problems"])),
    ("empty_part", "partition-empty-part", lambda e: e["parts"] == [{"part": 1, "node_type": None}]),
    ("empty_part", "partition-labels-invalid", lambda e: e["problems"][0]["rows"] == 11),
    ("empty_part", "partition-seeds-invalid", lambda e: e["problems"][0]["out_of_range"] == 1),
])
@pytest.mark.finding(
    "partition-empty-part",
    "partition-file-unloadable",
    "partition-labels-invalid",
    "partition-map-size-mismatch",
    "partition-node-coverage",
    "partition-seeds-invalid")
def test_damaged_folder_gives_expected_finding(runs, case, finding_id, evidence_check):
    found = runs[case].error_finding(finding_id)
    assert evidence_check(found["evidence"]), found["evidence"]


@pytest.mark.parametrize("case", ["incomplete_copy", "truncated_map", "wrong_meta", "empty_part"])
def test_damaged_folder_verdict_matches_from_partition(written, runs, case):
    assert checker_verdict(runs[case]) == truth(written, case)


@pytest.mark.finding("partition-load-timeout")
def test_stalled_file_gives_a_timeout_finding_and_exits_promptly(runs):
    run = runs["stalled_file"]
    assert run.returncode == 1
    evidence = run.finding("partition-load-timeout")["evidence"]
    assert evidence["call"].endswith(os.path.join("part_0", "graph.pt") + ")")
    assert run.elapsed < 45


# Recorded facts ---------------------------------------------------------------------

@pytest.mark.parametrize("case", ["homo", "hetero"])
def test_the_fast_tiers_recorded_facts_have_the_shape_of_a_real_run(written, runs, case):
    """tests/fast/partition_facts.json, which the fast tier edits to replay every rule, has the sections a real
    run over the same folders prints today (RECORD_FACTS=1 gathers and rewrites it)."""
    from support import recorded_facts
    if recorded_facts.recording_asked():
        cases = dict((name, [written["cases"][name]]) for name in ("homo", "hetero"))
        recorded_facts.record("partition_checker", cases, written["out"])
    compared, differing = recorded_facts.differing_sections("partition_checker", case, runs[case].document)
    assert len(compared) == 9 and differing == []
