"""The partition checker's rules on facts recorded from real runs over PyG's own Partitioner output
(tests/fast/partition_facts.json), each case edited the way a damaged folder changes them: every finding id
from its facts, nothing from the undamaged folders'. In process: no child, no torch."""

import pytest

from support import recorded_facts
from support.recorded_facts import assign, each
from partition_checker import cli


REPLAY = recorded_facts.Replay("partition_checker", cli, ["/data/parts"])
options, findings, recorded = REPLAY.options, REPLAY.findings, REPLAY.recorded


@pytest.mark.parametrize("case", ["homo", "hetero"])
def test_the_undamaged_folders_have_no_finding(case):
    assert findings(recorded(case)) == []




def part_file(part, name, status, **extra):
    return assign(["parts", part, "files", name], dict({"path": "part_%d/%s" % (part, name), "status": status},
                                                         **extra))


SAFE_SCAN = {"safe": True, "refused": [], "error": None}
CODE_SCAN = {"safe": False, "refused": ["posix.system"], "error": None}
NODES = ["parts", 0, "nodes", "per_type", "nodes"]
EDGES = ["parts", 0, "graph", "per_type", "edge_index"]

# (case, edit, finding id, severity, evidence it must hold)
CASES = [
    ("homo", assign(["meta"], {"present": False, "error": None, "content": None, "problems": []}),
     "partition-meta-missing", "error", {"root": "/data/homo/2-parts/homo-partitions"}),
    ("homo", assign(["meta", "problems"], ["is_hetero is not a bool"]), "partition-meta-invalid", "error",
     {"problems": ["is_hetero is not a bool"]}),
    ("homo", assign(["meta", "error"], "META.json: nested deeper than 32 levels"), "partition-meta-invalid", "error",
     {"error": "META.json: nested deeper than 32 levels"}),
    ("homo", each(assign(["layout", "missing"], [1]), assign(["layout", "missing_count"], 1)),
     "partition-part-missing", "error", {"missing": [1], "missing_count": 1}),
    ("homo", each(assign(["layout", "unexpected"], [2]), assign(["layout", "unexpected_count"], 1)),
     "partition-part-unexpected", "warning", {"unexpected": [2], "num_parts": 2}),
    ("homo", part_file(1, "graph.pt", "missing"), "partition-file-missing", "error",
     {"files": [{"path": "part_1/graph.pt", "status": "missing", "part": 1}]}),
    ("homo", part_file(0, "node_feats.pt", "missing"), "partition-file-missing", "warning",
     {"files": [{"path": "part_0/node_feats.pt", "status": "missing", "part": 0}]}),
    ("homo", part_file(0, "graph.pt", "error", error="EOFError: Ran out of input", scan=SAFE_SCAN),
     "partition-file-unloadable", "error", {"files": [{"path": "part_0/graph.pt", "status": "error", "part": 0,
                                                      "error": "EOFError: Ran out of input", "scan": SAFE_SCAN}]}),
    ("homo", each(part_file(0, "edge_feats.pt", "error", error="UnpicklingError: SETITEMS defaultdict",
                            cause="defaultdict-weights-only", scan=SAFE_SCAN),
                  part_file(1, "edge_feats.pt", "error", error="UnpicklingError: SETITEMS defaultdict",
                            cause="defaultdict-weights-only", scan=SAFE_SCAN)),
     "partition-edge-feats-unloadable", "error", {"torch": "2.13.0+cpu"}),
    ("homo", part_file(0, "node_feats.pt", "pickle-fallback-not-run", error="add_safe_globals", scan=SAFE_SCAN),
     "partition-pickle-fallback", "warning", {}),
    ("homo", part_file(0, "node_feats.pt", "pickle-fallback-loaded"), "partition-pickle-fallback", "warning", {}),
    ("homo", part_file(0, "node_feats.pt", "pickle-fallback-not-run", error="add_safe_globals", scan=CODE_SCAN),
     "partition-pickle-holds-code", "error", {"count": 1}),
    ("homo", part_file(1, "graph.pt", "error", error="UnpicklingError: posix.system", scan=CODE_SCAN),
     "partition-pickle-holds-code", "error", {"count": 1}),
    ("homo", part_file(0, "graph.pt", "pickle-holds-code", error="not loaded", scan=CODE_SCAN),
     "partition-pickle-holds-code", "error", {"count": 1}),
    ("hetero", assign(["maps", "node", '"author"'], {"path": "node_map/../../author.pt", "status": "outside-root"}),
     "partition-path-outside-root", "error", {"count": 1, "root": "/data/hetero/2-parts/hetero-partitions"}),
    ("homo", assign(["examined"], {"parts": 5, "examined": 2, "not_examined": 3, "max_parts": 2}),
     "partition-output-capped", "warning", {"not_examined": 3}),
    ("homo", assign(["report_lost"], {"reason": "too large", "child_returncode": 0}), "partition-output-capped",
     "error", {"report_lost": {"reason": "too large", "child_returncode": 0, "parts_reported": 2}}),
    ("homo", part_file(0, "graph.pt", "meta-device", error="the file[row] is a tensor on the meta device"),
     "partition-tensor-on-meta-device", "error", {"count": 1}),
    ("homo", assign(["caller", "timed_out"], {"call": "torch.load(/data/part_0/graph.pt)", "timeout_s": 120.0}),
     "partition-load-timeout", "error", {"call": "torch.load(/data/part_0/graph.pt)", "timeout_s": 120.0}),
    ("homo", assign(["maps", "node", "null", "invalid_part_ids"], 1), "partition-map-invalid", "error", {}),
    ("homo", assign(["maps", "edge", "null", "problem"], "not a 1-D integer tensor"), "partition-map-invalid",
     "error", {}),
    ("homo", assign(EDGES + ["expected_size"], [10, 10]), "partition-map-size-mismatch", "error",
     {"problems": [{"part": 0, "edge_type": "edge_index", "graph_size": [12, 12], "node_map_lengths": [10, 10]}]}),
    ("homo", assign(["maps", "edge", "null", "length"], 20), "partition-map-size-mismatch", "error",
     {"problems": [{"edge_type": None, "edge_map_length": 20, "edges_stored_in_parts": 24}]}),
    ("hetero", assign(["maps", "extra_files"], {"node": ["venue"]}), "partition-types-mismatch", "error",
     {"map_files_for_unlisted_types": {"node": ["venue"]}}),
    ("hetero", assign(["parts", 0, "graph", "unknown_keys"], ["venue__in__paper"]), "partition-types-mismatch",
     "error", {"problems": [{"part": 0, "file": "graph.pt", "unknown": ["venue__in__paper"], "missing": []}]}),
    ("hetero", assign(["parts", 1, "nodes", "missing_node_types"], ["author"]), "partition-types-mismatch", "error",
     {"problems": [{"part": 1, "file": "node_feats.pt", "unknown": [], "missing": ["author"]}]}),
    ("hetero", assign(["meta", "content", "node_offset"], [0, 7]), "partition-offset-mismatch", "error",
     {"problems": [{"node_type": "author", "meta_offset": 7, "sum_of_earlier_map_lengths": 10}]}),
    ("hetero", assign(["parts", 0, "nodes", "per_type", "paper", "offset_mismatches"], 2), "partition-offset-mismatch",
     "error", {}),
    ("homo", assign(["parts", 0, "graph", "problem"], "graph.pt is a list, not a dict"), "partition-graph-invalid",
     "error", {"problems": [{"part": 0, "problem": "graph.pt is a list, not a dict"}]}),
    ("homo", assign(EDGES + ["row_out_of_range"], 3), "partition-graph-invalid", "error", {}),
    ("homo", assign(EDGES + ["sorted_by_destination"], False), "partition-graph-not-sorted", "error",
     {"parts": [{"part": 0, "edge_type": "edge_index"}]}),
    ("homo", each(assign(["coverage", "nodes", "null", "missing"], 1),
                  assign(["coverage", "nodes", "null", "missing_examples"], [4])), "partition-node-coverage", "error",
     {}),
    ("homo", assign(NODES + ["nodes_mapped_elsewhere"], 2), "partition-node-coverage", "error",
     {"problems": [{"part": 0, "type": "nodes", "nodes_mapped_elsewhere": 2, "examples": []}]}),
    ("homo", assign(["coverage", "edges", "null", "repeated"], 1), "partition-edge-coverage", "error", {}),
    ("homo", assign(EDGES + ["destination_not_owned"], 1), "partition-edge-coverage", "error",
     {"problems": [{"part": 0, "type": "edge_index", "destination_not_owned": 1}]}),
    ("homo", assign(NODES + ["features", "x", "shape"], [5, 4]), "partition-feature-mismatch", "error",
     {"problems": [{"part": 0, "file": "node_feats.pt", "type": "nodes", "feature": "x", "rows": 5,
                    "expected_rows": 6}]}),
    ("homo", assign(["feature_shapes", '[null, "x"]', "1"], ["float64", 4]), "partition-feature-mismatch", "error",
     {}),
    ("homo", assign(["parts", 0, "edge_features", "per_type"], {"edge_index": {"ids_match_graph": False}}),
     "partition-feature-mismatch", "error", {}),
    ("homo", assign(NODES + ["num_nodes"], 0), "partition-empty-part", "error",
     {"parts": [{"part": 0, "node_type": None}]}),
    ("homo", assign(["parts", 1, "from_partition", "LocalFeatureStore"], {"loads": False, "error": "KeyError: x"}),
     "partition-from-partition-fails", "error", {"parts": {"1": {"LocalFeatureStore": "KeyError: x"}},
                                                 "parts_failing": 1}),
    ("homo", assign(["labels", "labels"], []), "partition-labels-missing", "info",
     {"searched": ["/data/homo/2-parts/*-label/label.pt"]}),
    ("homo", assign(["labels", "labels", 0, "shape"], [11]), "partition-labels-invalid", "error",
     {"problems": [{"path": "/data/homo/2-parts/homo-label/label.pt", "rows": 11, "node_type": None,
                    "expected_rows": 12}]}),
    ("hetero", assign(["labels", "labels", 0, "expected_rows"], None), "partition-labels-invalid", "error", {}),
    ("homo", assign(["labels", "labels", 0, "status"], "error"), "partition-labels-invalid", "error", {}),
    ("homo", assign(["labels", "seeds", "homo-train-partitions", "files", "1", "out_of_range"], 1),
     "partition-seeds-invalid", "error", {"problems": [{"split": "homo-train-partitions", "part": 1,
                                                        "index_tensor": True, "out_of_range": 1,
                                                        "id_upper_bound": 12}]}),
    ("homo", assign(["labels", "seeds", "homo-train-partitions", "files", "0", "status"], "missing"),
     "partition-seeds-invalid", "error", {}),
    ("homo", assign(["crash"], {"call": "torch.load(/data/part_0/graph.pt)", "signal": "SIGSEGV", "returncode": -11,
                                "stderr_tail": "Fatal Python error"}), "partition-load-crashed", "error",
     {"signal": "SIGSEGV"}),
]


def test_a_file_holding_code_is_never_offered_a_load():
    """Code found by the scan: no fix loads it (no --allow-pickle rerun, no rewrite)."""
    facts = recorded()
    part_file(0, "node_feats.pt", "pickle-fallback-not-run", error="add_safe_globals", scan=CODE_SCAN)(facts)
    part_file(0, "edge_feats.pt", "error", error="SETITEMS defaultdict", cause="defaultdict-weights-only",
              scan=CODE_SCAN)(facts)
    found = findings(facts)
    assert [f["id"] for f in found] == ["partition-pickle-holds-code"]
    assert "--allow-pickle" not in found[0]["fix"].split("(no --allow-pickle")[0]
    assert "rewrite_as_dict" not in found[0]["fix"]


def test_missing_ids_count_only_when_every_part_was_read():
    facts = recorded()
    facts["coverage"]["nodes"]["null"]["missing"] = 3
    facts["coverage"]["complete"] = False
    assert "partition-node-coverage" not in [f["id"] for f in findings(facts)]


@pytest.mark.parametrize("case, edit, finding_id, severity, evidence", CASES,
                         ids=["%s-%d" % (c[2], n) for n, c in enumerate(CASES)])
def test_each_damage_in_the_facts_gets_its_finding(case, edit, finding_id, severity, evidence):
    recorded_facts.assert_edit_found("partition_checker", cli.SPEC, options(), case, edit, (finding_id, severity, evidence))
