"""scripts/check_partition.py on the partition faults no other test reproduces, one damaged copy of
PyG's own Partitioner output each (tests/support/partition_damage.py), run the way an agent runs it; and the
internal-error path."""

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import ROOT, strict_json
from support import recorded_facts
from support.helpers import first, ids

SCRIPT = str(ROOT / "scripts" / "check_partition.py")

# case -> (finding id, severity, a key its evidence must have)
CASES = {
    "no_meta": ("partition-meta-missing", "error", "root"),
    "stale_part": ("partition-part-unexpected", "warning", "unexpected"),
    "graph_missing": ("partition-file-missing", "error", "files"),
    "pickled_feats": ("partition-pickle-fallback", None, "files"),
    "bad_map": ("partition-map-invalid", "error", "maps"),
    "extra_type_map": ("partition-types-mismatch", "error", "map_files_for_unlisted_types"),
    "graph_without_size": ("partition-graph-invalid", "error", "problems"),
    "unsorted_graph": ("partition-graph-not-sorted", None, "parts"),
    "wrong_offsets": ("partition-offset-mismatch", "error", "problems"),
    "edge_moved": ("partition-edge-coverage", "error", "problems"),
    "short_features": ("partition-feature-mismatch", "error", "problems"),
}


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    out = tmp_path_factory.mktemp("partitions")
    completed = subprocess.run([sys.executable, str(ROOT / "tests" / "support" / "partition_damage.py"), str(out)],
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def check(root):
    completed = subprocess.run([sys.executable, SCRIPT, root], capture_output=True, timeout=300,
                               stdin=subprocess.DEVNULL)
    document = strict_json(completed.stdout)
    assert document["exit_code"] == completed.returncode
    return document


@pytest.fixture(scope="module")
def documents(roots):
    """Every case's run, started together (interpreter start-up dominates each)."""
    names = sorted(CASES) + ["homo", "hetero"]
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return dict(zip(names, pool.map(lambda name: check(roots[name]), names)))


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.finding("partition-edge-coverage", "partition-feature-mismatch", "partition-file-missing",
                     "partition-graph-invalid", "partition-graph-not-sorted", "partition-map-invalid",
                     "partition-meta-missing", "partition-offset-mismatch", "partition-part-unexpected",
                     "partition-pickle-fallback", "partition-types-mismatch")
def test_each_partition_fault_gets_its_finding(documents, case):
    finding_id, severity, key = CASES[case]
    document = documents[case]
    found = first(document, finding_id, case)
    assert key in found["evidence"] and found["fix"]
    if severity:
        assert found["severity"] == severity
    if any(f["severity"] == "error" for f in document["findings"]):
        assert document["exit_code"] == 1 and document["gates"]["contract"]["passed"] is False


def test_the_undamaged_partitions_have_none_of_these_findings(documents):
    for case in ("homo", "hetero"):
        document = documents[case]
        assert not set(ids(document)) & {c[0] for c in CASES.values()}, (case, ids(document))


@pytest.mark.finding("partition-checker-internal-error")
def test_a_rule_that_breaks_is_an_internal_error_with_json():
    """A rule raising: exit 3, and what was gathered (an undamaged folder's recorded facts) still shown."""
    document = recorded_facts.broken_rule_run("partition_checker", ["."])
    assert ids(document)[-1] == "partition-checker-internal-error" and document["verdict"]["parts_checked"] == 2
