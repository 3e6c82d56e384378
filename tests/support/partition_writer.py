"""Partition folders for tests/test_partition_layout.py, written by PyG's real Partitioner.

METIS is not available here, so only the clustering step is replaced:
ClusterData._metis returns a fixed node -> part assignment (node % num_parts,
or everything in part 0 for the empty-part case). Permutation, files and
META.json are PyG's own writer. Damaged variants are copies with one thing
broken on purpose.

    python tests/support/partition_writer.py write OUT_DIR      # prints {case: root}
    python tests/support/partition_writer.py verdicts ROOT...   # prints PyG's from_partition verdicts
    python tests/support/partition_writer.py poison MARKER FILE...  # see poison()
    python tests/support/partition_writer.py code-file MARKER FILE os.system|subprocess.call  # see code_file()

The `write` command also prints the verdicts of every case it wrote, so a test
needs one interpreter start for both.
"""

import json
import os
import shutil
import sys
import warnings

import torch

NUM_NODES = 12
PAPERS, AUTHORS = 10, 6


def assign_clusters(mode):
    """Install the stand-in for METIS: the only part of the writer that is replaced."""
    from torch_geometric.loader.cluster import ClusterData

    def metis(self, edge_index, num_nodes):
        if mode == "all-in-part-0":
            return torch.zeros(num_nodes, dtype=torch.long)
        return torch.arange(num_nodes) % self.num_parts

    ClusterData._metis = metis


def homo_data(edge_attr):
    from torch_geometric.data import Data
    nodes = torch.arange(NUM_NODES)
    forward = torch.stack([nodes, (nodes + 1) % NUM_NODES])
    edge_index = torch.cat([forward, forward.flip(0)], dim=1)
    generator = torch.Generator().manual_seed(0)
    data = Data(x=torch.randn(NUM_NODES, 4, generator=generator), edge_index=edge_index, y=nodes % 3)
    if edge_attr:
        data.edge_attr = torch.randn(edge_index.size(1), 2, generator=generator)
    return data


def hetero_data(edge_attr):
    from torch_geometric.data import HeteroData
    generator = torch.Generator().manual_seed(0)
    papers = torch.arange(PAPERS)
    data = HeteroData()
    data["paper"].x = torch.randn(PAPERS, 4, generator=generator)
    data["paper"].y = papers % 3
    data["author"].x = torch.randn(AUTHORS, 4, generator=generator)
    data["author", "writes", "paper"].edge_index = torch.stack([papers % AUTHORS, papers])
    data["paper", "rev_writes", "author"].edge_index = torch.stack([papers, papers % AUTHORS])
    if edge_attr:
        for edge_type in data.edge_types:
            data[edge_type].edge_attr = torch.randn(PAPERS, 2, generator=generator)
    return data


def partition(data, root, mode="modulo"):
    """PyG's Partitioner with the METIS stand-in; 2 parts."""
    from torch_geometric.distributed import Partitioner
    assign_clusters(mode)
    Partitioner(data, 2, root).generate_partition()
    return root


def recipe_layout(out, name, data, labels, seeds, mode="modulo"):
    """The layout of PyG's distributed example: partitions, labels and seeds side by side."""
    parent = os.path.join(out, name, "2-parts")
    root = partition(data, os.path.join(parent, "%s-partitions" % name), mode)
    os.makedirs(os.path.join(parent, "%s-label" % name))
    torch.save(labels, os.path.join(parent, "%s-label" % name, "label.pt"))
    split_dir = os.path.join(parent, "%s-train-partitions" % name)
    os.makedirs(split_dir)
    for pid, part in enumerate(seeds):
        torch.save(part, os.path.join(split_dir, "partition%d.pt" % pid))
    return root


def damaged_copy(source, out, name):
    root = os.path.join(out, name)
    shutil.copytree(source, root)
    return root


def write(out):
    cases = {}
    homo = homo_data(edge_attr=False)
    cases["homo"] = recipe_layout(out, "homo", homo, homo.y, torch.arange(NUM_NODES).chunk(2))
    cases["homo_edge_attr"] = partition(homo_data(edge_attr=True), os.path.join(out, "homo_edge_attr"))
    hetero = hetero_data(edge_attr=False)
    cases["hetero"] = recipe_layout(out, "hetero", hetero, hetero["paper"].y, torch.arange(PAPERS).chunk(2))
    cases["hetero_edge_attr"] = partition(hetero_data(edge_attr=True), os.path.join(out, "hetero_edge_attr"))
    # Everything in part 0; labels one row short; a seed id past the node count.
    cases["empty_part"] = recipe_layout(out, "empty_part", homo, homo.y[:-1],
                                        [torch.tensor([0, 1]), torch.tensor([NUM_NODES + 5])],
                                        mode="all-in-part-0")
    # An interrupted copy: part_1 never arrived and part_0/graph.pt stopped half-way.
    cases["incomplete_copy"] = damaged_copy(cases["homo"], out, "incomplete_copy")
    shutil.rmtree(os.path.join(cases["incomplete_copy"], "part_1"))
    graph = os.path.join(cases["incomplete_copy"], "part_0", "graph.pt")
    with open(graph, "rb") as handle:
        content = handle.read()
    with open(graph, "wb") as handle:
        handle.write(content[:len(content) // 2])

    cases["truncated_map"] = damaged_copy(cases["homo"], out, "truncated_map")
    node_map = os.path.join(cases["truncated_map"], "node_map.pt")
    torch.save(torch.load(node_map)[:-2], node_map)

    cases["wrong_meta"] = damaged_copy(cases["homo"], out, "wrong_meta")
    meta_path = os.path.join(cases["wrong_meta"], "META.json")
    with open(meta_path) as handle:
        meta = json.load(handle)
    meta["is_hetero"] = "false"  # a string where PyG tests `meta['is_hetero'] is False`
    with open(meta_path, "w") as handle:
        json.dump(meta, handle)

    # Not in `cases`: PyG itself would block forever on this folder, so it has no verdict.
    stalled = damaged_copy(cases["homo"], out, "stalled_file")
    os.remove(os.path.join(stalled, "part_0", "graph.pt"))
    os.mkfifo(os.path.join(stalled, "part_0", "graph.pt"))  # opening it blocks, like a hung mount
    return cases


def poison(marker, path):
    """Append a payload to a torch.save file's pickle: after the value is built, a REDUCE of
    os.system("touch MARKER") whose result is popped, so the file still loads as the same value.

    weights_only loading stops at the defaultdict's SETITEMS before it reaches the payload, so
    torch's error looks exactly like the harmless defaultdict case. The payload only creates
    MARKER: the tests assert it never appears.
    """
    import pickle
    import zipfile
    with zipfile.ZipFile(path) as archive:
        members = [(info, archive.read(info)) for info in archive.infolist()]
    payload = (pickle.GLOBAL + os.system.__module__.encode() + b"\n" + b"system\n"
               + pickle.BINUNICODE + len(("touch " + marker).encode()).to_bytes(4, "little")
               + ("touch " + marker).encode() + pickle.TUPLE1 + pickle.REDUCE + pickle.POP + pickle.STOP)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for info, data in members:
            if info.filename.endswith("/data.pkl"):
                assert data.endswith(pickle.STOP)
                data = data[:-1] + payload
            archive.writestr(info, data)


class TouchMarker:
    """Pickles as a call that creates MARKER: what unpickling it runs (a harmless stand-in for a payload).
    os.system: torch's weights_only refuses its module outright; subprocess.call: torch names it and
    suggests add_safe_globals, so PyG retries with weights_only=False."""

    def __init__(self, marker, how):
        self.marker, self.how = marker, how

    def __reduce__(self):
        import subprocess
        if self.how == "os.system":
            return os.system, ("touch " + self.marker,)
        return subprocess.call, (["touch", self.marker],)


def code_file(marker, path, how):
    """A torch.save file holding a TouchMarker."""
    torch.save({"value": TouchMarker(marker, how)}, path)


def verdicts(roots):
    """What PyG's from_partition does for each part of each folder on this torch."""
    from torch_geometric.distributed import LocalFeatureStore, LocalGraphStore
    result = {}
    for root in roots:
        result[root] = {}
        for pid in range(2):
            result[root][str(pid)] = {}
            for store in (LocalGraphStore, LocalFeatureStore):
                try:
                    store.from_partition(root, pid)
                    result[root][str(pid)][store.__name__] = True
                except Exception as error:  # the verdict is whether it raises
                    result[root][str(pid)][store.__name__] = False
                    result[root][str(pid)][store.__name__ + "_error"] = "%s: %s" % (type(error).__name__, error)
    return result


def main(argv):
    warnings.simplefilter("ignore")
    if argv[:1] == ["write"] and len(argv) == 2:
        cases = write(argv[1])
        print(json.dumps({"cases": cases, "verdicts": verdicts(cases.values())}))
        return 0
    if argv[:1] == ["poison"] and len(argv) > 2:
        for path in argv[2:]:
            poison(argv[1], path)
        return 0
    if argv[:1] == ["code-file"] and len(argv) == 4:
        code_file(argv[1], argv[2], argv[3])
        return 0
    if argv[:1] == ["verdicts"] and len(argv) > 1:
        print(json.dumps({"verdicts": verdicts(argv[1:])}))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
