"""scripts/check_store_contract.py on the store faults no other test reproduces, one pair each
(tests/support/store_faults.py), run the way an agent runs it; and the internal-error path."""

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import ROOT, strict_json
from support import recorded_facts
from support.helpers import first, ids

SCRIPT = str(ROOT / "scripts" / "check_store_contract.py")
FIXTURES = "tests/support/store_faults.py"

# fixture -> (the finding it must raise, its severity, evidence keys that must be there)
CASES = {
    "listing_raises": ("store-call-failed", "error", {"call": "get_all_tensor_attrs()"}),
    "tensor_attrs_as_names": ("store-tensor-attrs-malformed", "error", {"call": "get_all_tensor_attrs()"}),
    "edge_attrs_as_tuples": ("store-edge-attrs-malformed", "error", {"call": "get_all_edge_attrs()"}),
    "no_features": ("store-no-features", "warning", {}),
    "no_edges": ("store-no-edges", "error", {"listed": []}),
    "edge_index_not_1d": ("store-edge-index-shape", "error", {"problem": "pair members are not 1-D"}),
    "edge_size_missing": ("store-edge-size-missing", "error", {"edge_type": None}),
    "hetero_features_homo_graph": ("store-homo-hetero-mismatch", "error",
                                   {"graph_store": "homogeneous (edge_type None)"}),
    "edge_features": ("store-edge-features-not-sampled", "warning", {"effect": "dropped from batches"}),
}


def check(name, *args):
    completed = subprocess.run([sys.executable, SCRIPT, "%s:%s" % (FIXTURES, name), "--skip-sampling"] + list(args),
                               capture_output=True, timeout=300, cwd=ROOT, stdin=subprocess.DEVNULL)
    document = strict_json(completed.stdout)
    assert document["exit_code"] == completed.returncode
    return document


@pytest.fixture(scope="module")
def documents():
    """Every case's run, started together (interpreter start-up dominates each)."""
    names = sorted(CASES) + ["homo_pair"]
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return dict(zip(names, pool.map(check, names)))


@pytest.mark.parametrize("fixture", sorted(CASES))
@pytest.mark.finding("store-edge-attrs-malformed", "store-edge-features-not-sampled", "store-edge-index-shape",
                     "store-edge-size-missing", "store-homo-hetero-mismatch", "store-no-edges", "store-no-features",
                     "store-tensor-attrs-malformed")
def test_each_store_fault_gets_its_finding(documents, fixture):
    finding_id, severity, evidence = CASES[fixture]
    document = documents[fixture]
    found = first(document, finding_id, fixture)
    assert found["severity"] == severity and found["fix"]
    assert dict((key, found["evidence"].get(key)) for key in evidence) == evidence, found["evidence"]
    # A warning alone leaves the gate passing; an error fails it.
    assert document["gates"]["contract"]["passed"] is (severity != "error" and not any(
        f["severity"] == "error" for f in document["findings"]))


def test_the_reference_pair_has_none_of_these_findings(documents):
    document = documents["homo_pair"]
    assert not set(ids(document)) & {case[0] for case in CASES.values()}, ids(document)
    assert document["ok"] is True


@pytest.mark.finding("store-checker-internal-error")
def test_a_rule_that_breaks_is_an_internal_error_with_json():
    """A rule raising: exit 3, and what was gathered (the reference pair's recorded facts) still shown."""
    document = recorded_facts.broken_rule_run("store_checker", ["pkg.stores:make_stores"])
    assert ids(document)[-1] == "store-checker-internal-error" and document["tensor_attrs"]["count"] == 2
