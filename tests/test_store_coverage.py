"""scripts/check_store_contract.py on the store faults no other test reproduces, one pair each
(tests/support/store_coverage_fixtures.py), run the way an agent runs it; and the internal-error path."""

import json
import subprocess
import sys

import pytest

from conftest import ROOT, strict_json

SCRIPT = str(ROOT / "scripts" / "check_store_contract.py")
FIXTURES = "tests/support/store_coverage_fixtures.py"


def check(name, *args):
    completed = subprocess.run([sys.executable, SCRIPT, "%s:%s" % (FIXTURES, name), "--skip-sampling"] + list(args),
                               capture_output=True, timeout=300, cwd=ROOT, stdin=subprocess.DEVNULL)
    document = strict_json(completed.stdout)
    assert document["exit_code"] == completed.returncode
    return document


def ids(document):
    return [f["id"] for f in document["findings"]]


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


@pytest.mark.parametrize("fixture", sorted(CASES))
@pytest.mark.finding(
    "store-edge-attrs-malformed",
    "store-edge-features-not-sampled",
    "store-edge-index-shape",
    "store-edge-size-missing",
    "store-homo-hetero-mismatch",
    "store-no-edges",
    "store-no-features",
    "store-tensor-attrs-malformed")
def test_each_store_fault_gets_its_finding(fixture):
    finding_id, severity, evidence = CASES[fixture]
    document = check(fixture)
    found = [f for f in document["findings"] if f["id"] == finding_id]
    assert found, (fixture, ids(document))
    assert found[0]["severity"] == severity and found[0]["fix"]
    for key, value in evidence.items():
        assert found[0]["evidence"][key] == value, (key, found[0]["evidence"])
    # A warning alone leaves the gate passing; an error fails it.
    assert document["gates"]["contract"]["passed"] is (severity != "error" and not any(
        f["severity"] == "error" for f in document["findings"]))


def test_the_reference_pair_has_none_of_these_findings():
    document = check("homo_pair")
    assert not set(ids(document)) & {case[0] for case in CASES.values()}, ids(document)
    assert document["ok"] is True


@pytest.mark.finding("store-checker-internal-error")
def test_a_rule_that_breaks_is_an_internal_error_with_json():
    """The checker's own failure path: a rule raising is exit 3 with store-checker-internal-error."""
    code = ("import sys; sys.argv[0] = %r; sys.path.insert(0, %r); import check_store_contract as tool\n"
            "import store_checker.rules as rules\n"
            "def broken(facts, options):\n    raise KeyError('rule bug')\n"
            "rules.RULES = rules.RULES + (broken,)\n"
            "sys.exit(tool.main(['%s:homo_pair', '--skip-sampling']))" % (SCRIPT, str(ROOT / "scripts"), FIXTURES))
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=300, cwd=ROOT)
    document = json.loads(completed.stdout)
    assert completed.returncode == 3 and document["status"] == "internal-error"
    assert ids(document)[-1] == "store-checker-internal-error"
    assert "rule bug" in document["findings"][-1]["evidence"]["error"]
