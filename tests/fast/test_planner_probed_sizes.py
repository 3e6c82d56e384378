"""The sizes a probe reads from a saved graph or a store, checked in the parent before any arithmetic: each
absurd one is refused naming the field, the file or store, and the flag; sound ones make the graph the model
sizes. In process, on the records probe.py publishes (tests/test_planner_bad_input.py reads real files)."""

import argparse
import copy

import pytest

from capacity_planner import spec
from diagnostics_core.cli import UsageError


def options(**given):
    values = dict(data="graph.pt", store=None, path=None, nodes=None, edges=None, undirected=False,
                  feature_dtype="float32", labels=True)
    values.update(given)
    return argparse.Namespace(**values)


def tensor(*shape, size=4):
    return {"shape": list(shape), "dtype": "float32", "element_size": size}


HOMO = {"kind": "homo", "nodes": 3000, "attrs": {"x": tensor(3000, 8), "edge_index": tensor(2, 20000, size=8),
                                                 "y": tensor(3000, size=8)}}
HETERO = {"kind": "hetero",
          "node_types": {"paper": {"nodes": 500, "attrs": {"x": tensor(500, 4)}},
                         "author": {"nodes": 200, "attrs": {"x": tensor(200, 4)}}},
          "edge_types": {"author,writes,paper": {"attrs": {"edge_index": tensor(2, 900, size=8)}}}}
STORE = {"kind": "store", "features": [{"group": "None", "attr": "x", "shape": [1000, 16]}],
         "edges": [{"edge_type": "None", "size": [1000, 1000], "layout": "coo"}]}


def edited(base, path, value):
    """A copy of `base` with the item at `path` (keys and indexes) set to `value`."""
    sizes = copy.deepcopy(base)
    target = sizes
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return sizes


def refused(sizes, parsed):
    with pytest.raises(UsageError) as caught:
        spec.from_probed(sizes, parsed)
    error = caught.value
    assert error.finding_id == "plan-size-invalid" and "\n" not in error.line
    return error


def test_a_saved_graph_is_sized_from_its_shapes():
    graph = spec.from_probed(copy.deepcopy(HOMO), options())
    assert (graph["nodes"], graph["edges"], graph["node_bytes"], graph["edge_bytes"]) == (3000, 20000, 40, 16)
    hetero = spec.from_probed(copy.deepcopy(HETERO), options())
    assert hetero["edge_types"]["author,writes,paper"]["edges"] == 900 and hetero["nodes"] == 700


def test_a_store_is_sized_from_its_feature_tensor_and_edges_flag():
    graph = spec.from_probed(copy.deepcopy(STORE), options(data=None, store="m:f", edges=5000))
    assert (graph["nodes"], graph["edges"], graph["features"], graph["source"]) == (1000, 5000, 16, "store")


@pytest.mark.finding("plan-size-invalid")
@pytest.mark.parametrize("path, value, field", [
    (("nodes",), -5, "num_nodes"),
    (("nodes",), 0, "num_nodes"),
    (("nodes",), None, "num_nodes"),
    (("nodes",), True, "num_nodes"),
    (("nodes",), 10 ** 19, "num_nodes"),
    (("nodes",), "3000", "num_nodes"),
    (("attrs", "x", "shape", 1), -4, "x.shape[1]"),
    (("attrs", "x", "shape", 1), 10 ** 19, "x.shape[1]"),
    (("attrs", "x", "shape", 1), 99999999999999999999, "x.shape[1]"),
    (("attrs", "x", "shape", 1), 4.5, "x.shape[1]"),
    (("attrs", "x", "shape", 1), 2 * 10 ** 6, "x.shape[1]"),
    (("attrs", "x", "shape"), [3000] + [4] * 9, "x.shape"),
    (("attrs", "x", "shape"), "3000x8", "x.shape"),
    (("attrs", "x", "element_size"), 0, "x.element_size"),
    (("attrs", "x", "element_size"), 64, "x.element_size"),
    (("attrs", "y", "shape"), [10 ** 12, 10 ** 12], "y"),  # each dimension plausible, the tensor not
    (("attrs", "edge_index", "shape", 1), -20000, "edge_index.shape[1]"),
    (("attrs", "edge_index", "shape", 1), 10 ** 13 + 1, "edge_index.shape[1]"),
    (("attrs", "edge_index", "shape"), [3, 20000], "edge_index.shape"),
    (("attrs", "edge_index", "shape"), [20000], "edge_index.shape"),
])
def test_an_absurd_size_in_a_saved_graph_is_refused_naming_the_field(path, value, field):
    error = refused(edited(HOMO, path, value), options())
    assert error.evidence["field"] == field and error.evidence["file"] == "graph.pt"
    assert error.evidence["flag"] == "--data" and field in error.line and "graph.pt" in error.line
    assert "--nodes N --edges E" in error.fix


@pytest.mark.parametrize("path, value, field", [
    (("node_types", "paper", "nodes"), -5, "paper.num_nodes"),
    (("node_types", "author", "attrs", "x", "shape", 1), -1, "author.x.shape[1]"),
    (("edge_types", "author,writes,paper", "attrs", "edge_index", "shape", 1), -900,
     "author,writes,paper.edge_index.shape[1]"),
    (("node_types", "paper", "nodes"), 10 ** 12, "all node types"),
])
def test_an_absurd_size_in_a_saved_hetero_graph_names_the_type(path, value, field):
    assert refused(edited(HETERO, path, value), options()).evidence["field"] == field


@pytest.mark.parametrize("path, value, field", [
    (("features", 0, "shape", 0), -5, "get_tensor_size(None, x)[0]"),
    (("features", 0, "shape", 0), 0, "get_tensor_size(None, x)[0]"),
    (("features", 0, "shape", 1), 10 ** 20, "get_tensor_size(None, x)[1]"),
    (("features", 0, "shape", 1), 10 ** 7, "get_tensor_size(None, x)[1]"),
    (("features", 0, "shape"), [1] * 9, "get_tensor_size(None, x)"),
    (("edges", 0, "size", 1), -1, "edge attribute None size[1]"),
    (("features",), [], "num_nodes (no feature tensor: give --nodes)"),
])
def test_an_absurd_size_a_store_reports_is_refused_naming_the_call(path, value, field):
    error = refused(edited(STORE, path, value), options(data=None, store="m:f", path="proj", edges=5000))
    assert error.evidence["field"] == field and error.evidence["store"] == "m:f" and error.evidence["flag"] == "--store"
    assert "check_store_contract.py" in error.fix


def test_a_store_without_a_feature_tensor_takes_the_nodes_flag():
    sizes = edited(STORE, ("features",), [])
    graph = spec.from_probed(sizes, options(data=None, store="m:f", edges=5000, nodes=700))
    assert graph["nodes"] == 700 and graph["features"] == 0
