"""The store checker's rules on facts recorded from real runs over PyG's own stores (tests/fast/store_facts.json),
each case edited the way a broken store changes them: every finding id from its facts, nothing from the
reference's. In process: no child, no torch."""

import json

import pytest

from support import recorded_facts
from support.recorded_facts import assign, each
from store_checker import cli
from store_checker.findings import TOOL
from store_checker.gather import LOADER_CALL, WORKER_CALL


REPLAY = recorded_facts.Replay("store_checker", cli, ["mypkg.stores:make_stores"])
options, findings, recorded = REPLAY.options, REPLAY.findings, REPLAY.recorded


def tensor(facts, attr, group=None):
    return next(t for t in facts["tensors"] if t["attr"] == attr and t["group"] == group)


def edge(facts, edge_type=None):
    return next(e for e in facts["edges"] if e["edge_type"] == edge_type)


@pytest.mark.parametrize("case", ["homo", "hetero"])
def test_the_reference_stores_have_no_finding(case):
    assert findings(recorded(case)) == []


def setup_error(facts):
    facts["setup"].update(status="error", error="ConnectionError: cannot reach feature service",
                          failed_reference="mypkg.stores:make_stores")


def add_edge_feature(facts):
    facts["tensors"].append({"attr": "edge_attr", "group": ["author", "writes", "paper"], "kind": "edge",
                             "full": {"type": "torch.Tensor", "dtype": "float32", "shape": [10, 2], "device": "cpu"},
                             "size": {"value": [10, 2]}})


def csc(facts, **pointer):
    one = edge(facts)
    one.update(layout="csc", pointer=dict({"length": 13, "expected_length": 13, "num_edges": 24, "first": 0,
                                           "last": 24, "monotone": True}, **pointer))
    one.pop("sorted_by_destination")


def mixed_dtypes(facts):
    tensor(facts, "x", "author")["full"]["dtype"] = "float64"


def crash(call):
    def edit(facts):
        facts["crash"] = {"call": call, "signal": "SIGSEGV", "returncode": -11, "stderr_tail": "Fatal Python error"}
    return edit


def timed_out(call, seconds=10.0):
    def edit(facts):
        facts["caller"]["timed_out"] = {"call": call, "timeout_s": seconds, "ended_by": "the alarm"}
    return edit


def step_failed(store, step):
    def edit(facts):
        steps = facts["write_check"][store]["steps"]
        next(s for s in steps if s["step"] == step)["ok"] = False
    return edit


def cleanup_failed(facts):
    facts["write_check"]["feature_store"]["cleanup"] = {"ok": False, "action": "scratch attribute still present"}




# (case, edit, finding id, severity, evidence it must hold)
CASES = [
    ("homo", setup_error, "store-factory-failed", "error", {"error": "ConnectionError: cannot reach feature service"}),
    ("homo", assign(["setup", "feature_store", "is_feature_store"], False), "store-wrong-base-class", "error",
     {"store": "feature_store"}),
    ("homo", assign(["setup", "graph_store", "is_graph_store"], False), "store-wrong-base-class", "error",
     {"store": "graph_store", "expected_base": "torch_geometric.data.GraphStore"}),
    ("homo", each(assign(["tensor_attrs", "status"], "error"), assign(["tensor_attrs", "error"], "RuntimeError: x")),
     "store-call-failed", "error", {"call": "get_all_tensor_attrs()"}),
    ("homo", assign(["tensors", 0, "full"], {"error": "RuntimeError: no"}), "store-call-failed", "error",
     {"call": "get_tensor(index=None)", "attr": "x"}),
    ("homo", assign(["tensors", 0, "indexed", "get_tensor"], {"error": "TypeError: index"}), "store-call-failed",
     "error", {"call": "get_tensor(index=[11, 0, 6, 0])"}),
    ("homo", assign(["tensors", 1, "size"], {"error": "NotImplementedError: "}), "store-call-failed", "error",
     {"call": "get_tensor_size()", "attr": "y"}),
    ("homo", assign(["edges", 0, "read"], {"error": "OSError: gone"}), "store-call-failed", "error",
     {"call": "get_edge_index()"}),
    ("homo", timed_out("feature_store.get_all_tensor_attrs()"), "store-call-timeout", "error",
     {"call": "feature_store.get_all_tensor_attrs()", "timeout_s": 10.0, "skipped_calls": 0}),
    ("homo", assign(["tensor_attrs", "problems"], ["item 'x' is a str, not a TensorAttr"]),
     "store-tensor-attrs-malformed", "error", {"call": "get_all_tensor_attrs()"}),
    ("homo", assign(["edge_attrs", "problems"], ["item (None, 'coo') is a tuple, not an EdgeAttr"]),
     "store-edge-attrs-malformed", "error", {"call": "get_all_edge_attrs()"}),
    ("homo", each(assign(["edge_attrs", "count"], 0), assign(["edge_attrs", "items"], []), assign(["edges"], [])),
     "store-no-edges", "error", {"listed": []}),
    ("homo", each(assign(["tensor_attrs", "count"], 0), assign(["tensor_attrs", "items"], [])), "store-no-features",
     "warning", {"listed": []}),
    ("homo", assign(["tensors", 0, "full"], {"type": "NoneType"}), "store-listed-attr-missing", "error",
     {"attr": "x", "returned": None}),
    ("homo", assign(["edges", 0, "read"], {"missing": True, "error": "KeyError: edge_index"}),
     "store-listed-attr-missing", "error", {"edge_type": None}),
    ("homo", assign(["tensors", 0, "full"], {"type": "list", "length": 12}), "store-tensor-not-tensor", "error",
     {"attr": "x", "call": "get_tensor(index=None)"}),
    ("homo", assign(["tensors", 0, "indexed", "multi_get_tensor", "type"], "numpy.ndarray"),
     "store-tensor-not-tensor", "error", {"call": "multi_get_tensor(index=[11, 0, 6, 0])"}),
    ("homo", each(assign(["tensors", 0, "indexed", "get_tensor", "same_dtype"], False),
                  assign(["tensors", 0, "indexed", "get_tensor", "dtype"], "float64")),
     "store-dtype-inconsistent", "error", {"attr": "x", "dtype": "float64", "expected_dtype": "float32"}),
    ("hetero", mixed_dtypes, "store-dtype-inconsistent", "warning",
     {"attr": "x", "dtype_by_group": {'"author"': "float64", '"paper"': "float32"}}),
    ("homo", assign(["tensors", 1, "full", "shape"], [11]), "store-row-count-mismatch", "error",
     {"rows_by_attr": {"x": 12, "y": 11}}),
    ("homo", assign(["tensors", 1, "size", "value"], [13]), "store-tensor-size-mismatch", "error",
     {"attr": "y", "get_tensor_size": [13], "tensor_shape": [12]}),
    ("homo", each(assign(["tensors", 0, "indexed", "get_tensor", "matches"], False),
                  assign(["tensors", 0, "indexed", "get_tensor", "misread"], "rows in id order")),
     "store-indexed-read-wrong", "error", {"attr": "x", "index": [11, 0, 6, 0], "misread": "rows in id order"}),
    ("homo", assign(["edges", 0, "structure"], "pair members are not 1-D"), "store-edge-index-shape", "error",
     {"problem": "pair members are not 1-D"}),
    ("homo", assign(["edges", 0, "lengths_match"], False), "store-edge-index-shape", "error",
     {"problem": "row and col lengths differ"}),
    ("homo", assign(["edges", 0, "integer"], False), "store-edge-index-dtype", "error", {"dtypes": ["int64", "int64"]}),
    ("homo", assign(["edges", 0, "same_dtype"], False), "store-edge-index-dtype", "error", {"layout": "coo"}),
    ("homo", assign(["edges", 0, "row_range"], [0, 12]), "store-edge-index-out-of-range", "error",
     {"problems": [{"index": "row", "min": 0, "max": 12, "num_nodes": 12}]}),
    ("homo", assign(["edges", 0, "col_range"], [-1, 11]), "store-edge-index-out-of-range", "error",
     {"problems": [{"index": "col", "min": -1, "max": 11, "num_nodes": 12}]}),
    ("homo", lambda facts: csc(facts, length=12), "store-edge-pointer-invalid", "error",
     {"problems": ["length 12, expected num_nodes + 1 = 13"]}),
    ("homo", lambda facts: csc(facts, monotone=False, first=1), "store-edge-pointer-invalid", "error",
     {"problems": ["starts at 1, not 0", "decreases somewhere (not sorted)"]}),
    ("homo", lambda facts: csc(facts, last=20), "store-edge-pointer-invalid", "error",
     {"problems": ["ends at 20, not at the 24 edges"]}),
    ("homo", each(assign(["edges", 0, "is_sorted"], True), assign(["edges", 0, "sorted_by_destination"], False)),
     "store-edge-sorted-claim-false", "error", {"edge_type": None, "layout": "coo"}),
    ("homo", assign(["edges", 0, "size"], None), "store-edge-size-missing", "error", {"edge_type": None}),
    ("hetero", assign(["edges", 0, "size"], None), "store-edge-size-missing", "warning",
     {"edge_type": ["author", "writes", "paper"]}),
    ("hetero", assign(["edges", 0, "edge_type"], ["venue", "writes", "paper"]), "store-edge-type-unknown-node-type",
     "error", {"unknown_node_types": ["venue"]}),
    ("hetero", lambda facts: [t.update(group=None) for t in facts["tensors"]], "store-homo-hetero-mismatch", "error",
     {"graph_store": "heterogeneous"}),
    ("homo", assign(["graph_meta"], {"has_meta": True, "type": "NoneType"}), "store-graph-meta-invalid", "error",
     {"meta_type": "NoneType"}),
    ("homo", assign(["graph_meta", "is_hetero"], True), "store-graph-meta-invalid", "error",
     {"meta_is_hetero": True, "edge_types_are_typed": False}),
    ("homo", assign(["missing_keys", "feature"], {"outcome": "returned", "value": {"type": "torch.Tensor"}}),
     "store-missing-key-behaviour", "error", {"call": "get_tensor(<missing attr>)"}),
    ("homo", assign(["missing_keys", "feature"], {"outcome": "raised", "error_type": "KeyError", "error": "x"}),
     "store-missing-key-behaviour", "warning", {"call": "get_tensor(<missing attr>)"}),
    ("homo", assign(["missing_keys", "edge"], {"outcome": "returned", "value": {"type": "tuple"}}),
     "store-missing-key-behaviour", "error", {"call": "get_edge_index(<missing edge type>)"}),
    ("homo", assign(["missing_keys", "edge"], {"outcome": "raised", "error_type": "ValueError", "error": "x"}),
     "store-missing-key-behaviour", "warning", {"call": "get_edge_index(<missing edge type>)"}),
    ("hetero", add_edge_feature, "store-edge-features-not-sampled", "warning", {"effect": "dropped from batches"}),
    ("homo", assign(["sampling"], {"backend": None, "status": "unavailable"}), "store-sampling-unavailable", "warning",
     {"main_checker_finding": "neighbor-sampling-unavailable"}),
    ("homo", each(assign(["sampling", "status"], "failed"), assign(["sampling", "error"], "IndexError: out of range")),
     "store-sampling-failed", "error", {"error": "IndexError: out of range", "backend": "torch-sparse"}),
    ("homo", each(assign(["sampling", "status"], "wrong"), assign(["sampling", "problems"], ["x has 7 rows"])),
     "store-sampling-failed", "error", {"problems": ["x has 7 rows"]}),
    ("homo", each(assign(["sampling", "status"], "crashed"), crash(LOADER_CALL)), "store-sampling-failed", "error",
     {"backend": "torch-sparse"}),
    ("homo", each(assign(["worker_sampling", "status"], "failed"), assign(["worker_sampling", "error"], "EOFError")),
     "store-fork-unsafe", "error", {"call": WORKER_CALL, "error": "EOFError", "start_method": "fork"}),
    ("homo", each(assign(["worker_sampling", "status"], "wrong"),
                  assign(["worker_sampling", "problems"], [{"attr": "x"}])),
     "store-fork-unsafe", "error", {"problems": [{"attr": "x"}]}),
    ("homo", crash(WORKER_CALL), "store-fork-unsafe", "error", {"call": WORKER_CALL, "signal": "SIGSEGV"}),
    ("homo", timed_out(WORKER_CALL, 120.0), "store-fork-unsafe", "error", {"call": WORKER_CALL, "timeout_s": 120.0}),
    ("hetero", step_failed("feature_store", "get after remove is None"), "store-write-roundtrip-failed", "error",
     {"store": "feature_store", "failed_steps": [{"ok": False, "step": "get after remove is None"}]}),
    ("hetero", step_failed("graph_store", "overwrite"), "store-write-roundtrip-failed", "error",
     {"store": "graph_store"}),
    ("hetero", cleanup_failed, "store-write-cleanup-failed", "error", {"store": "feature_store"}),
    ("homo", assign(["write_check"], {"performed": True, "interrupted": True}), "store-write-cleanup-failed", "error",
     {"cleanup": "a store call timed out during the round trip"}),
    ("homo", crash("feature_store.get_tensor([null, \"x\"], index=None)"), "store-call-crashed", "error",
     {"signal": "SIGSEGV", "call": "feature_store.get_tensor([null, \"x\"], index=None)"}),
    ("homo", crash(None), "store-call-crashed", "error", {"returncode": -11}),
    ("homo", assign(["tensors", 0, "full", "device"], "meta"), "store-tensor-on-meta-device", "error",
     {"call": "get_tensor(index=None)", "attr": "x"}),
    ("homo", assign(["tensors", 0, "indexed"], {"index": [11, 0], "single_row": {"type": "torch.Tensor",
                                                                                  "device": "meta"}}),
     "store-tensor-on-meta-device", "error", {"call": "get_tensor(index=[row])"}),
    ("homo", assign(["edges", 0, "parts", 1, "device"], "meta"), "store-tensor-on-meta-device", "error",
     {"call": "get_edge_index()"}),
]


def test_a_setup_that_timed_out_is_said_once_by_the_timeout():
    facts = recorded()
    facts["setup"] = {"status": "timeout", "references": {"pair": "mypkg.stores:make_stores"}, "error": "x",
                      "failed_reference": "mypkg.stores:make_stores"}
    timed_out("mypkg.stores:make_stores()", 120.0)(facts)
    assert [f["id"] for f in findings(facts)] == ["store-call-timeout"]


def test_a_crash_record_without_a_call_still_names_one():
    facts = recorded()
    crash(None)(facts)
    [crashed] = [f for f in findings(facts) if f["id"] == "store-call-crashed"]
    assert isinstance(crashed["evidence"]["call"], str) and crashed["evidence"]["call"]


CUT_SHAPES = [None, {}, {"call": None, "signal": None, "returncode": None, "stderr_tail": None},
              {"call": LOADER_CALL, "signal": "SIGSEGV"}, {"call": WORKER_CALL, "signal": None, "returncode": 1}]
TIMEOUT_SHAPES = [None, {}, {"call": None, "timeout_s": None}, {"call": WORKER_CALL, "timeout_s": 3.0}]
SECTIONS = ("setup", "tensor_attrs", "tensors", "edge_attrs", "edges", "graph_meta", "missing_keys", "sampling",
            "worker_sampling", "write_check")
EMPTY = {"tensors": [], "edges": [], "write_check": {"performed": False}}


@pytest.mark.parametrize("cut", range(len(SECTIONS) + 1))
def test_no_cut_short_record_turns_into_an_internal_error(cut):
    """The child publishes its sections in order and may die after any of them, with a crash or timeout record
    whose fields may be missing: every such shape still gives findings, and every crash or timeout names a call."""
    complete = recorded()
    facts = dict((section, complete[section] if position < cut else EMPTY.get(section))
                 for position, section in enumerate(SECTIONS))
    for running in ("sampling", "worker_sampling"):
        if facts[running] is None and cut == SECTIONS.index(running):
            facts[running] = {"status": "crashed"}
    for crashed in CUT_SHAPES:
        for timeout in TIMEOUT_SHAPES:
            found = findings(dict(facts, crash=crashed, caller={"count": 3, "skipped": [], "timed_out": timeout}))
            json.dumps(found)
            assert {f["id"] for f in found} <= set(TOOL.findings)
            for one in found:
                if one["id"] in ("store-call-crashed", "store-call-timeout"):
                    assert isinstance(one["evidence"]["call"], str) and one["evidence"]["call"]


@pytest.mark.parametrize("case, edit, finding_id, severity, evidence", CASES,
                         ids=["%s-%d" % (c[2], n) for n, c in enumerate(CASES)])
def test_each_fault_in_the_facts_gets_its_finding(case, edit, finding_id, severity, evidence):
    recorded_facts.assert_edit_found("store_checker", cli.SPEC, options(), case, edit, (finding_id, severity, evidence))
