"""Partition folders with one more kind of damage each, for tests/test_partition_faults.py.

Each folder starts as PyG's own Partitioner output (tests/support/partition_writer.py: the real writer with a
fixed node -> part assignment instead of METIS) and breaks one thing on purpose.

    python tests/support/partition_damage.py OUT_DIR     # prints {case: root} as JSON
"""

import json
import os
import shutil
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from partition_writer import hetero_data, homo_data, partition  # noqa: E402


def copy(source, out, name):
    root = os.path.join(out, name)
    shutil.copytree(source, root)
    return root


def edit_meta(root, **changes):
    path = os.path.join(root, "META.json")
    with open(path) as handle:
        meta = json.load(handle)
    meta.update(changes)
    with open(path, "w") as handle:
        json.dump(meta, handle)


def edit_pt(path, change):
    value = torch.load(path, weights_only=False)
    value = change(value) or value
    torch.save(value, path)


def reverse_edges(graph):
    for key in ("edge_id", "row", "col"):
        graph[key] = graph[key].flip(0)


def drop_size(graph):
    del graph["size"]


def short_x(feats):
    feats["feats"]["x"] = feats["feats"]["x"][:-1]


def write(out):
    homo = partition(homo_data(edge_attr=False), os.path.join(out, "homo"))
    hetero = partition(hetero_data(edge_attr=False), os.path.join(out, "hetero"))
    cases = {"homo": homo, "hetero": hetero}

    cases["no_meta"] = copy(homo, out, "no_meta")
    os.remove(os.path.join(cases["no_meta"], "META.json"))

    cases["stale_part"] = copy(homo, out, "stale_part")  # part_2 left over from an earlier 3-part run
    shutil.copytree(os.path.join(homo, "part_1"), os.path.join(cases["stale_part"], "part_2"))

    cases["graph_missing"] = copy(homo, out, "graph_missing")
    os.remove(os.path.join(cases["graph_missing"], "part_1", "graph.pt"))

    # Only containers and tensors, but one type weights_only refuses (a frozenset): PyG would retry with
    # weights_only=False, which the checker does not do without --allow-pickle.
    cases["pickled_feats"] = copy(homo, out, "pickled_feats")
    edit_pt(os.path.join(cases["pickled_feats"], "part_0", "node_feats.pt"),
            lambda feats: feats.__setitem__("notes", frozenset([1, 2])))

    cases["bad_map"] = copy(homo, out, "bad_map")  # a part id past num_parts
    edit_pt(os.path.join(cases["bad_map"], "node_map.pt"), lambda m: m.__setitem__(0, 7))

    cases["extra_type_map"] = copy(hetero, out, "extra_type_map")  # a map for a type META.json does not list
    shutil.copy(os.path.join(hetero, "node_map", "author.pt"),
                os.path.join(cases["extra_type_map"], "node_map", "venue.pt"))

    cases["graph_without_size"] = copy(homo, out, "graph_without_size")
    edit_pt(os.path.join(cases["graph_without_size"], "part_0", "graph.pt"), drop_size)

    cases["unsorted_graph"] = copy(homo, out, "unsorted_graph")  # META says sorted by destination; it is not
    edit_pt(os.path.join(cases["unsorted_graph"], "part_0", "graph.pt"), reverse_edges)

    cases["wrong_offsets"] = copy(hetero, out, "wrong_offsets")
    edit_meta(cases["wrong_offsets"], node_offset=[0, 7])

    cases["edge_moved"] = copy(homo, out, "edge_moved")  # the edge map names the other part for one edge
    edit_pt(os.path.join(cases["edge_moved"], "edge_map.pt"), lambda m: m.__setitem__(0, 1 - int(m[0])))

    cases["short_features"] = copy(homo, out, "short_features")
    edit_pt(os.path.join(cases["short_features"], "part_0", "node_feats.pt"), short_x)
    return cases


if __name__ == "__main__":
    print(json.dumps(write(sys.argv[1])))
