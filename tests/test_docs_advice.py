"""Advice is code: every quantitative or behavioural claim the guidance makes
that a CPU can check is measured here against the installed torch and PyG.

Each claim runs in a fresh child interpreter (as the snippets in the docs do)
and prints one JSON line that the test asserts on. Nothing is timed: sizes come
from torch.profiler's allocation records or tensor byte counts, costs from
counting calls. Claims that need GPUs or several machines are cited in the
docs instead (see the closing note of references/scaling-and-backends.md).
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from support import warm_python
from test_docs_references import REPO, SKILL, TROUBLESHOOTING, block_defining, read

SCALING = os.path.join(REPO, "references", "scaling-and-backends.md")
DISTRIBUTED = os.path.join(REPO, "references", "distributed-workflows.md")

CHILD_TIMEOUT = 240


CHILD_ENV = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONDONTWRITEBYTECODE="1", PYTHONWARNINGS="ignore")


def measure(code, tmp_path, args=()):
    """Run `code` as its own process (forked from an interpreter that has imported torch and PyG already,
    support/warm_python.py); -> the JSON object on its last stdout line."""
    code = textwrap.dedent(code)
    script = tmp_path / "claim.py"
    script.write_text(code)
    process = warm_python.shared(CHILD_ENV).run(script, tmp_path, args, timeout=CHILD_TIMEOUT,
                                                fresh=warm_python.needs_fresh_interpreter(code))
    assert process.returncode == 0, process.stderr[-4000:]
    lines = [line for line in process.stdout.splitlines() if line.startswith("{")]
    assert lines, "no JSON from the claim; stdout:\n%s\nstderr:\n%s" % (process.stdout[-2000:], process.stderr[-2000:])
    return json.loads(lines[-1])


def squashed(path):
    return " ".join(read(path).split())


# ---------------------------------------------------------------------------
# Memory arithmetic (scaling-and-backends.md, "Memory: the terms that count")
# ---------------------------------------------------------------------------

def test_message_tensor_is_e_times_f_per_layer_and_dwarfs_node_features(tmp_path):
    """Item 2: a MessagePassing layer on a plain edge_index allocates x_j = [E, F_in]."""
    result = measure("""
        import json, torch
        from torch.profiler import profile, ProfilerActivity
        from torch_geometric.nn import GATConv, SAGEConv

        torch.manual_seed(0)
        N, E, F = 1000, 200_000, 64
        x, edge_index = torch.randn(N, F), torch.randint(0, N, (2, E))
        report = {}
        for conv in (SAGEConv(F, F), GATConv(F, F, heads=1, add_self_loops=False)):
            conv(x, edge_index)  # warm up: lazy initialisation is not part of the measurement
            with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
                out = conv(x, edge_index)  # with autograd on, as in training
            events = list(prof.events())
            report[type(conv).__name__] = {
                "index_select_bytes": sum(e.cpu_memory_usage for e in events
                                          if e.name == "aten::index_select" and e.cpu_memory_usage > 0),
                "retained_bytes": sum(e.cpu_memory_usage for e in events),
            }
            del out
        report["node_feature_bytes"] = x.nbytes
        print(json.dumps(report))
    """, tmp_path)
    message_bytes = 200_000 * 64 * 4
    assert message_bytes == 51_200_000
    assert result["node_feature_bytes"] == 1000 * 64 * 4 == 256_000
    # SAGEConv: the gather x_j is exactly E * F_in * 4 bytes, 200x the node features ...
    assert result["SAGEConv"]["index_select_bytes"] == message_bytes
    # ... and transient: mean aggregation does not keep it for backward.
    assert result["SAGEConv"]["retained_bytes"] < message_bytes / 10
    # GATConv multiplies messages by attention weights, so autograd keeps at least one E x F tensor.
    assert result["GATConv"]["index_select_bytes"] >= message_bytes
    assert result["GATConv"]["retained_bytes"] >= message_bytes
    text = squashed(SCALING)
    assert "E * F_in * 4" in text and "51.2 MB" in text


def test_fan_out_order_keeps_the_deepest_hop_and_saves_only_twelve_percent():
    """Item 1: [15, 10, 5] and [5, 10, 15] have the same deepest hop; reversed is ~12 % smaller."""
    namespace = {}
    exec(block_defining("worst_case_nodes").code.split("\nnum_nodes =")[0], namespace)
    worst_case_nodes = namespace["worst_case_nodes"]
    wide_first = worst_case_nodes(1024, [15, 10, 5])
    narrow_first = worst_case_nodes(1024, [5, 10, 15])
    assert wide_first == 937_984 and narrow_first == 825_344
    assert 1024 * 15 * 10 * 5 == 1024 * 5 * 10 * 15 == 768_000  # deepest hop, both orders
    assert round(1 - narrow_first / wide_first, 2) == 0.12
    text = squashed(SCALING)
    assert "far cheaper" not in text
    assert "12 %" in text and "choose the order for accuracy, then check the bound" in text
    assert "not a memory one" not in text  # issue 33: a 12 % difference is a memory difference


# ---------------------------------------------------------------------------
# The sampler's private copy of the graph (items 8 and 9)
# ---------------------------------------------------------------------------

SORT_COUNTER = """
    import json, torch
    import torch_geometric.sampler.utils as sampler_utils
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader

    sorts = []
    real_sort_csc = sampler_utils.sort_csc

    def counting_sort_csc(*args, **kwargs):
        sorts.append(1)
        return real_sort_csc(*args, **kwargs)

    sampler_utils.sort_csc = counting_sort_csc  # to_csc looks it up in this module
    torch.manual_seed(0)
    N, E = 500, 5000
    data = Data(x=torch.randn(N, 4), edge_index=torch.randint(0, N, (2, E)))
"""


def test_rebuilding_the_loader_every_epoch_re_sorts_the_whole_graph(tmp_path):
    """Item 9: each NeighborLoader construction sorts all E edges; build it once."""
    result = measure(SORT_COUNTER + """
    counts = {}
    del sorts[:]
    for epoch in range(3):
        NeighborLoader(data, num_neighbors=[5], batch_size=32)
    counts["rebuilt_each_epoch"] = len(sorts)
    del sorts[:]
    loader = NeighborLoader(data, num_neighbors=[5], batch_size=32)
    counts["built_once"] = len(sorts)
    del sorts[:]
    presorted = data.sort(sort_by_row=False)
    NeighborLoader(presorted, num_neighbors=[5], batch_size=32, is_sorted=True)
    counts["presorted_is_sorted"] = len(sorts)
    print(json.dumps(counts))
    """, tmp_path)
    assert result == {"rebuilt_each_epoch": 3, "built_once": 1, "presorted_is_sorted": 0}


def test_each_loader_holds_sixteen_bytes_per_edge_unless_presorted(tmp_path):
    """Item 8: a private sorted row + perm (16 * E bytes) per loader; is_sorted=True shares edge_index."""
    result = measure(SORT_COUNTER + """
    first = NeighborLoader(data, num_neighbors=[5], batch_size=32).node_sampler
    second = NeighborLoader(data, num_neighbors=[5], batch_size=32).node_sampler
    presorted = data.sort(sort_by_row=False)
    shared = NeighborLoader(presorted, num_neighbors=[5], batch_size=32, is_sorted=True).node_sampler
    print(json.dumps({
        "private_bytes": first.row.nbytes + first.perm.nbytes,
        "colptr_bytes": first.colptr.nbytes,
        "two_loaders_share_row": first.row.data_ptr() == second.row.data_ptr(),
        "row_is_edge_index": first.row.data_ptr() == data.edge_index.data_ptr(),
        "presorted_row_is_edge_index": shared.row.data_ptr() == presorted.edge_index.data_ptr(),
        "presorted_perm": None if shared.perm is None else shared.perm.numel(),
    }))
    """, tmp_path)
    assert result["private_bytes"] == 16 * 5000
    assert result["colptr_bytes"] == 8 * (500 + 1)
    assert result["two_loaders_share_row"] is False and result["row_is_edge_index"] is False
    assert result["presorted_row_is_edge_index"] is True and result["presorted_perm"] is None
    text = squashed(SCALING)
    assert "16 * E" in text and "is_sorted=True" in text


# ---------------------------------------------------------------------------
# Equal DDP steps (item 10)
# ---------------------------------------------------------------------------

def test_distributed_sampler_gives_every_rank_the_same_step_count(tmp_path):
    """DistributedSampler pads (or trims) to equal shares; set_epoch reshuffles; NeighborLoader accepts it."""
    result = measure("""
        import json, torch
        from torch.utils.data import DistributedSampler
        from torch_geometric.data import Data
        from torch_geometric.loader import NeighborLoader

        N, world_size, batch_size = 300, 4, 16
        data = Data(x=torch.randn(N, 4), edge_index=torch.randint(0, N, (2, 2000)))
        seeds = torch.arange(241)  # 241 seeds: not divisible by 4
        report = {"plain_split_steps": [], "padded_steps": [], "trimmed_steps": [], "covered": set()}
        for rank in range(world_size):
            shard = seeds.tensor_split(world_size)[rank]
            report["plain_split_steps"].append(len(NeighborLoader(data, num_neighbors=[5], batch_size=batch_size,
                                                                  input_nodes=shard)))
            sampler = DistributedSampler(range(seeds.numel()), num_replicas=world_size, rank=rank,
                                         shuffle=True, seed=0)
            loader = NeighborLoader(data, num_neighbors=[5], batch_size=batch_size, input_nodes=seeds,
                                    sampler=sampler)
            report["padded_steps"].append(len(loader))
            report["covered"].update(int(i) for i in sampler)
            if rank == 0:
                sampler.set_epoch(0)
                epoch0 = list(sampler)
                sampler.set_epoch(1)
                report["set_epoch_reshuffles"] = list(sampler) != epoch0
                sampler.set_epoch(0)
                report["same_epoch_same_order"] = list(sampler) == epoch0
            trimmed = DistributedSampler(range(seeds.numel()), num_replicas=world_size, rank=rank,
                                         shuffle=True, seed=0, drop_last=True)
            report["trimmed_steps"].append(len(NeighborLoader(data, num_neighbors=[5], batch_size=batch_size,
                                                              input_nodes=seeds, sampler=trimmed)))
        report["covered"] = len(report["covered"])
        print(json.dumps(report))
    """, tmp_path)
    assert result["plain_split_steps"] == [4, 4, 4, 4]  # 61/60/60/60 seeds; equal here by luck
    assert len(set(result["padded_steps"])) == 1 and len(set(result["trimmed_steps"])) == 1
    assert result["covered"] == 241  # padding repeats a few seeds but drops none
    assert result["set_epoch_reshuffles"] and result["same_epoch_same_order"]
    text = squashed(SCALING)
    assert "DistributedSampler" in text and "set_epoch" in text and "Join" in text


def test_uneven_tensor_split_can_give_unequal_step_counts(tmp_path):
    """Why SKILL.md insists on equal steps (or Join): shard sizes differing by one can differ by a batch."""
    result = measure("""
        import json, math, torch
        seeds = torch.arange(241)
        sizes = [s.numel() for s in seeds.tensor_split(2)]
        print(json.dumps({"sizes": sizes, "steps": [math.ceil(n / 30) for n in sizes]}))
    """, tmp_path)
    assert result == {"sizes": [121, 120], "steps": [5, 4]}
    assert "Join" in squashed(SKILL)


def test_distributed_sampler_loader_iterates_the_same_number_of_batches(tmp_path, neighbor_backend):
    result = measure("""
        import json, torch
        from torch.utils.data import DistributedSampler
        from torch_geometric.data import Data
        from torch_geometric.loader import NeighborLoader

        data = Data(x=torch.randn(300, 4), edge_index=torch.randint(0, 300, (2, 2000)))
        seeds = torch.arange(241)
        batches, seen = [], set()
        for rank in range(2):
            sampler = DistributedSampler(range(seeds.numel()), num_replicas=2, rank=rank, seed=0)
            loader = NeighborLoader(data, num_neighbors=[5], batch_size=30, input_nodes=seeds, sampler=sampler)
            count = 0
            for batch in loader:
                count += 1
                seen.update(batch.n_id[:batch.batch_size].tolist())
            batches.append(count)
        print(json.dumps({"batches": batches, "seen": len(seen)}))
    """, tmp_path)
    assert result == {"batches": [5, 5], "seen": 241}


# ---------------------------------------------------------------------------
# Link prediction (item 7)
# ---------------------------------------------------------------------------

def test_link_loader_shifts_labels_and_default_split_gives_three_classes(tmp_path, neighbor_backend):
    result = measure("""
        import json, torch
        import torch_geometric.transforms as T
        from torch_geometric.data import Data
        from torch_geometric.loader import LinkNeighborLoader
        from torch_geometric.utils import coalesce

        torch.manual_seed(0)
        N = 200  # coalesced: a duplicated edge would count as leakage by itself
        data = Data(x=torch.randn(N, 8), edge_index=coalesce(torch.randint(0, N, (2, 1500)), num_nodes=N))
        report = {}
        for name, split in {
            "defaults": T.RandomLinkSplit(num_val=0.1, num_test=0.1),
            "recommended": T.RandomLinkSplit(num_val=0.1, num_test=0.1, disjoint_train_ratio=0.3,
                                             add_negative_train_samples=False),
        }.items():
            train, val, test = split(data)
            loader = LinkNeighborLoader(train, num_neighbors=[5, 5], batch_size=64,
                                        edge_label_index=train.edge_label_index,
                                        edge_label=train.edge_label, neg_sampling='binary')
            labels = set()
            for batch in loader:
                labels.update(batch.edge_label.unique().tolist())
            mp = {tuple(e) for e in train.edge_index.t().tolist()}
            sup = {tuple(e) for e in train.edge_label_index[:, train.edge_label == 1].t().tolist()}
            report[name] = {"split_labels": sorted(set(train.edge_label.tolist())),
                            "batch_labels": sorted(labels),
                            "supervision_edges": len(sup),
                            "supervision_in_message_passing": len(sup & mp)}
        print(json.dumps(report))
    """, tmp_path)
    # Defaults: the split already adds negatives (label 0) ...
    assert result["defaults"]["split_labels"] == [0.0, 1.0]
    # ... so the loader adds 1 (link_loader.py) and its own negatives are 0: three classes.
    assert result["defaults"]["batch_labels"] == [0.0, 1.0, 2.0]
    # Every supervision edge is also a message-passing edge: leakage.
    assert result["defaults"]["supervision_in_message_passing"] == result["defaults"]["supervision_edges"] > 0
    assert result["recommended"]["split_labels"] == [1.0]
    assert result["recommended"]["batch_labels"] == [0.0, 1.0]
    assert result["recommended"]["supervision_in_message_passing"] == 0
    text = squashed(SCALING)
    assert "add_negative_train_samples=False" in text and "disjoint_train_ratio" in text


# ---------------------------------------------------------------------------
# Store pairs (items 4, 5, 15, 18)
# ---------------------------------------------------------------------------

# What a call gave, as one comparable string: "ok", or the exception's type and first line. Claims
# prepend it to their scripts (indented as their code is).
OUTCOME = """
    def outcome(make):
        try:
            make()
            return "ok"
        except Exception as error:
            return "%s: %s" % (type(error).__name__, str(error).splitlines()[0][:120])
"""

STORES = OUTCOME + """
    import json, torch
    from torch_geometric.data import EdgeAttr, FeatureStore, GraphStore, TensorAttr
    from torch_geometric.loader import NeighborLoader

    class Features(FeatureStore):
        def __init__(self):
            super().__init__()
            self.tensors = {}
        def _put_tensor(self, tensor, attr):
            self.tensors[(attr.group_name, attr.attr_name)] = tensor
            return True
        def _get_tensor(self, attr):
            tensor = self.tensors.get((attr.group_name, attr.attr_name))
            return tensor if tensor is None or attr.index is None else tensor[attr.index]
        def _remove_tensor(self, attr):
            return self.tensors.pop((attr.group_name, attr.attr_name), None) is not None
        def _get_tensor_size(self, attr):
            tensor = self.tensors.get((attr.group_name, attr.attr_name))
            return None if tensor is None else tuple(tensor.shape)
        def get_all_tensor_attrs(self):
            return [TensorAttr(group, name) for group, name in self.tensors]

    class Graph(GraphStore):
        def __init__(self):
            super().__init__()
            self.edges, self.reads = {}, 0
        def _put_edge_index(self, edge_index, edge_attr):
            self.edges[(edge_attr.edge_type, edge_attr.layout)] = (edge_index, edge_attr)
            return True
        def _get_edge_index(self, edge_attr):
            self.reads += 1
            entry = self.edges.get((edge_attr.edge_type, edge_attr.layout))
            return None if entry is None else entry[0]
        def _remove_edge_index(self, edge_attr):
            return self.edges.pop((edge_attr.edge_type, edge_attr.layout), None) is not None
        def get_all_edge_attrs(self):
            return [attr for _, attr in self.edges.values()]

    torch.manual_seed(0)
    N, E = 60, 300
    edge_index = torch.randint(0, N, (2, E))
"""


def test_homogeneous_store_pair_without_size_raises_typeerror_hetero_falls_back(tmp_path):
    """Item 15."""
    result = measure(STORES + """
    homo_f, homo_g = Features(), Graph()
    homo_f[None, 'x', None] = torch.randn(N, 4)
    homo_g.put_edge_index((edge_index[0], edge_index[1]), edge_type=None, layout='coo')  # no size=
    hetero_f, hetero_g = Features(), Graph()
    hetero_f['paper', 'x', None] = torch.randn(N, 4)
    hetero_g.put_edge_index((edge_index[0], edge_index[1]), edge_type=('paper', 'cites', 'paper'),
                            layout='coo')  # no size=
    print(json.dumps({
        "homogeneous": outcome(lambda: NeighborLoader((homo_f, homo_g), num_neighbors=[2], batch_size=4,
                                                      input_nodes=torch.arange(N))),
        "heterogeneous": outcome(lambda: NeighborLoader((hetero_f, hetero_g), num_neighbors=[2], batch_size=4,
                                                        input_nodes='paper')),
    }))
    """, tmp_path)
    assert result["homogeneous"] == "TypeError: 'NoneType' object is not iterable"
    assert result["heterogeneous"] == "ok"
    assert "'NoneType' object is not iterable" in squashed(TROUBLESHOOTING)  # the store rules' one home


def test_store_pair_without_edges_constructs_unless_meta_says_homogeneous(tmp_path):
    """Item 18: empty edge listings count as heterogeneous; IndexError needs meta={'is_hetero': False}."""
    result = measure(STORES + """
    features, graph = Features(), Graph()
    features['paper', 'x', None] = torch.randn(N, 4)
    plain = outcome(lambda: NeighborLoader((features, graph), num_neighbors=[2], batch_size=4,
                                           input_nodes='paper'))
    graph.meta = {'is_hetero': False}
    with_meta = outcome(lambda: NeighborLoader((features, graph), num_neighbors=[2], batch_size=4,
                                               input_nodes=torch.arange(N)))
    print(json.dumps({"plain": plain, "with_meta": with_meta}))
    """, tmp_path)
    assert result["plain"] == "ok"
    assert result["with_meta"].startswith("IndexError: list index out of range")
    body = read(TROUBLESHOOTING).split("\n### store-no-edges\n", 1)[1].split("\n### ", 1)[0]
    assert "is_hetero" in body and "constructs" in body


def test_the_stock_sampler_reads_every_edge_into_process_memory_at_construction(tmp_path, neighbor_backend):
    """Item 4: only features stay remote; the graph store is read once, whole, at construction."""
    result = measure(STORES + """
    features, graph = Features(), Graph()
    features[None, 'x', None] = torch.randn(N, 4)
    graph.put_edge_index((edge_index[0], edge_index[1]), edge_type=None, layout='coo', size=(N, N))
    loader = NeighborLoader((features, graph), num_neighbors=[3], batch_size=8, input_nodes=torch.arange(N))
    reads_at_construction = graph.reads
    held_edges = loader.node_sampler.row.numel()
    for batch in loader:
        pass
    print(json.dumps({"reads_at_construction": reads_at_construction, "held_edges": held_edges,
                      "reads_while_iterating": graph.reads - reads_at_construction}))
    """, tmp_path)
    assert result == {"reads_at_construction": 1, "held_edges": 300, "reads_while_iterating": 0}
    assert "csc()" in squashed(SCALING)


def test_store_pairs_refuse_weighted_sampling_and_need_sorted_edges_for_temporal(tmp_path):
    """Store limits: weight_attr is unsupported; time_attr needs sorted COO/CSC; only 'time' is node-level."""
    result = measure(STORES + """
    import torch_geometric.typing as T
    from torch_geometric.utils import sort_edge_index

    def pair(time_name, is_sorted, layout='coo'):
        features, graph = Features(), Graph()
        features[None, 'x', None] = torch.randn(N, 4)
        features[None, time_name, None] = torch.arange(N)
        row, col = sort_edge_index(edge_index, sort_by_row=False)
        graph.put_edge_index((row, col), edge_type=None, layout=layout, size=(N, N), is_sorted=is_sorted)
        return features, graph

    def loader(data, **kwargs):
        return NeighborLoader(data, num_neighbors=[2], batch_size=4, input_nodes=torch.arange(N), **kwargs)

    print(json.dumps({
        "weighted": outcome(lambda: loader(pair('time', True), weight_attr='w')),
        "temporal_unsorted": outcome(lambda: loader(pair('time', False), time_attr='time')),
        "temporal_sorted": outcome(lambda: loader(pair('time', True), time_attr='time')),
        "temporal_other_name": outcome(lambda: loader(pair('ts', True), time_attr='ts')),
        "edge_time_support": T.WITH_EDGE_TIME_NEIGHBOR_SAMPLE,
    }))
    """, tmp_path)
    assert result["weighted"].startswith("NotImplementedError: 'weight_attr' argument not yet supported")
    assert result["temporal_unsorted"].startswith("ValueError: Temporal sampling requires that edges are sorted")
    assert result["temporal_sorted"] == "ok"
    if not result["edge_time_support"]:  # any name but 'time' is taken as edge-level time
        assert result["temporal_other_name"] == (
            "ImportError: Edge-level temporal sampling requires a more recent 'pyg-lib' installation")
    text = squashed(SCALING)
    assert "'weight_attr' argument not yet supported" in text and "any other name is read as edge-level time" in text


def test_which_loaders_accept_a_store_pair(tmp_path):
    """Item 5: NeighborLoader / LinkNeighborLoader take a tuple; RandomNodeLoader, ClusterData, HGTLoader do not."""
    result = measure(STORES + """
    import torch_geometric.typing
    from torch_geometric.distributed import LocalFeatureStore, LocalGraphStore
    from torch_geometric.loader import ClusterData, HGTLoader, LinkNeighborLoader, RandomNodeLoader
    fs = LocalFeatureStore.from_data(node_id=torch.arange(N), x=torch.randn(N, 4))
    gs = LocalGraphStore.from_data(edge_id=torch.arange(E), edge_index=edge_index, num_nodes=N)
    pair = (fs, gs)
    print(json.dumps({
        "NeighborLoader": outcome(lambda: NeighborLoader(pair, num_neighbors=[2], batch_size=4,
                                                         input_nodes=torch.arange(N))),
        "LinkNeighborLoader": outcome(lambda: LinkNeighborLoader(pair, num_neighbors=[2], batch_size=4,
                                                                 edge_label_index=(None, edge_index))),
        "RandomNodeLoader": outcome(lambda: RandomNodeLoader(pair, num_parts=2)),
        "ClusterData": outcome(lambda: ClusterData(pair, num_parts=2)),
        "HGTLoader": outcome(lambda: HGTLoader(pair, num_samples=[2], batch_size=4, input_nodes=None)),
        "torch_sparse": torch_geometric.typing.WITH_TORCH_SPARSE,
    }))
    """, tmp_path)
    assert result["NeighborLoader"] == "ok" and result["LinkNeighborLoader"] == "ok"
    assert result["RandomNodeLoader"] == "AttributeError: 'tuple' object has no attribute 'edge_index'"
    assert result["ClusterData"] == "AttributeError: 'tuple' object has no attribute 'edge_index'"
    if result["torch_sparse"]:
        assert result["HGTLoader"].startswith("NotImplementedError: HGTSampler does not support"), result
    else:  # HGTSampler checks for torch-sparse before it looks at the data
        assert result["HGTLoader"] == "ImportError: 'HGTSampler' requires 'torch-sparse'"
    text = squashed(SCALING)
    assert "Any loader that accepts" not in text
    for name in ("RandomNodeLoader", "HGTLoader", "ClusterData"):
        assert name in text.split("## Remote backends", 1)[1].split("## Multi-GPU", 1)[0]


def test_abstract_store_error_prefix_is_stable_across_python_versions(tmp_path):
    """Item 17: quote only "Can't instantiate abstract class"; the rest changed in Python 3.12."""
    from conftest import pyenv_python

    result = measure("""
        import json
        from torch_geometric.data import FeatureStore
        class Incomplete(FeatureStore):
            pass
        try:
            Incomplete()
        except TypeError as error:
            print(json.dumps({"message": str(error)}))
    """, tmp_path)
    assert result["message"].startswith("Can't instantiate abstract class Incomplete")
    newer = pyenv_python("3.12")
    probe = ("import abc\nclass S(abc.ABC):\n    @abc.abstractmethod\n    def f(self): ...\n"
             "try:\n    S()\nexcept TypeError as e:\n    print(e)\n")
    message = subprocess.run([str(newer), "-c", probe], capture_output=True, text=True, timeout=60).stdout
    assert message.startswith("Can't instantiate abstract class S") and "with abstract methods" not in message
    text = squashed(SCALING)
    assert "Can't instantiate abstract class DictFeatureStore ...`" in text
    assert "Can't instantiate abstract class ... with abstract methods" not in text


# ---------------------------------------------------------------------------
# Backends, flags and warnings (items 3, 14, 16, 19, 21, 22)
# ---------------------------------------------------------------------------

def test_neighbor_sampler_builds_its_csc_on_the_cpu(tmp_path):
    """Item 3: the sampler's graph lives on the CPU whatever the data's device (GPU: cited from source)."""
    result = measure("""
        import inspect, json, torch
        from torch_geometric.data import Data
        from torch_geometric.loader import NeighborLoader
        from torch_geometric.sampler import HGTSampler, NeighborSampler
        data = Data(x=torch.randn(20, 2), edge_index=torch.randint(0, 20, (2, 60)))
        sampler = NeighborLoader(data, num_neighbors=[2], batch_size=4).node_sampler
        print(json.dumps({
            "cpu_csc_calls": inspect.getsource(NeighborSampler.__init__).count("device='cpu'"),
            "hgt_cpu_csc_calls": inspect.getsource(HGTSampler.__init__).count("device='cpu'"),
            "devices": sorted({str(sampler.colptr.device), str(sampler.row.device)}),
        }))
    """, tmp_path)
    assert result == {"cpu_csc_calls": 2, "hgt_cpu_csc_calls": 1, "devices": ["cpu"]}
    # Every mention tells the truth and points at gpu-sampling-needs-cugraph.
    for where, text in (("SKILL.md", squashed(SKILL)), ("scaling", squashed(SCALING)),
                        ("troubleshooting", squashed(TROUBLESHOOTING))):
        assert "gpu-sampling-unavailable" not in text, where
        assert "a CUDA build of the backend" not in text, where
    assert "gpu-sampling-needs-cugraph" in squashed(SKILL) and "gpu-sampling-needs-cugraph" in squashed(SCALING)


def test_torch_sparse_sampling_lacks_disjoint_weighted_and_per_hop_counts(tmp_path, neighbor_backend):
    """Item 14: torch-sparse is not 'the same neighbour sampling' as pyg-lib."""
    result = measure(OUTCOME + """
    import json, torch
    import torch_geometric.typing as T
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader

    data = Data(x=torch.randn(50, 2), edge_index=torch.randint(0, 50, (2, 200)), w=torch.rand(200))
    batch = next(iter(NeighborLoader(data, num_neighbors=[3, 2], batch_size=4)))
    print(json.dumps({
        "backend": "pyg-lib" if T.WITH_PYG_LIB else "torch-sparse",
        "num_sampled_nodes": getattr(batch, "num_sampled_nodes", None) is not None,
        "disjoint": outcome(lambda: next(iter(NeighborLoader(data, num_neighbors=[2], batch_size=4,
                                                             disjoint=True)))),
        "weighted": outcome(lambda: NeighborLoader(data, num_neighbors=[2], batch_size=4, weight_attr='w')),
    }))
    """, tmp_path)
    if result["backend"] == "pyg-lib":
        pytest.skip("pyg-lib is installed: this claim is about torch-sparse alone")
    assert result["num_sampled_nodes"] is False
    assert result["disjoint"].startswith("ValueError: 'disjoint' sampling not supported")
    assert result["weighted"] == "ImportError: Weighted neighbor sampling requires 'pyg-lib>=0.3.0'"
    body = read(TROUBLESHOOTING).split("\n### ext-glibc-too-old\n", 1)[1].split("\n### ", 1)[0]
    assert "same neighbour sampling" not in body and "num_sampled_nodes" in body


def test_with_metis_reflects_pyg_lib_only_and_torch_sparse_is_tried_at_call_time(tmp_path):
    """Item 21."""
    result = measure("""
        import json, torch, torch_geometric.typing as T
        from torch_geometric.data import Data
        from torch_geometric.loader import ClusterData
        calls = []
        class FakeSparseOps:  # stands in for torch.ops.torch_sparse with a METIS-enabled build
            @staticmethod
            def partition(rowptr, col, weight, num_parts, recursive):
                calls.append(num_parts)
                return torch.arange(rowptr.numel() - 1) % num_parts
        T.WITH_TORCH_SPARSE = True
        torch.ops.torch_sparse = FakeSparseOps()
        data = Data(x=torch.randn(20, 2), edge_index=torch.randint(0, 20, (2, 60)))
        parts = ClusterData(data, num_parts=2, log=False)
        print(json.dumps({"WITH_METIS": T.WITH_METIS, "WITH_PYG_LIB": T.WITH_PYG_LIB,
                          "partition_calls": calls, "parts": len(parts)}))
    """, tmp_path)
    if result["WITH_PYG_LIB"]:
        pytest.skip("pyg-lib is installed: WITH_METIS then describes it")
    assert result == {"WITH_METIS": False, "WITH_PYG_LIB": False, "partition_calls": [2], "parts": 2}
    assert "WITH_METIS" in squashed(SCALING) and "pyg-lib's" in squashed(SCALING)


def test_legacy_extension_warning_is_hidden_by_default_filters(tmp_path):
    """Item 22: the torch-cluster DeprecationWarning is silent unless warnings are enabled."""
    fake = tmp_path / "fake_site" / "torch_cluster"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    code = "import torch_geometric"
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "fake_site"))
    env.pop("PYTHONWARNINGS", None)
    default = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                             timeout=CHILD_TIMEOUT)
    shown = subprocess.run([sys.executable, "-W", "default::DeprecationWarning", "-c", code],
                           capture_output=True, text=True, env=env, timeout=CHILD_TIMEOUT)
    assert default.returncode == 0 and shown.returncode == 0
    assert "torch-cluster' is no longer necessary" not in default.stderr
    assert "torch-cluster' is no longer necessary" in shown.stderr
    body = read(TROUBLESHOOTING).split("\n### legacy-extension-ignored\n", 1)[1].split("\n### ", 1)[0]
    assert "-W default::DeprecationWarning" in body


def test_count_parameters_returns_a_count_not_bytes(tmp_path):
    """Item 19."""
    result = measure("""
        import json
        from torch_geometric.nn import GraphSAGE
        from torch_geometric.profile import count_parameters, get_model_size
        model = GraphSAGE(in_channels=32, hidden_channels=64, num_layers=2)
        print(json.dumps({"count": count_parameters(model),
                          "numel": sum(p.numel() for p in model.parameters()),
                          "bytes": get_model_size(model)}))
    """, tmp_path)
    assert result["count"] == result["numel"] and result["bytes"] > 4 * result["numel"]
    row = [line for line in read(SCALING).splitlines() if line.startswith("| `count_parameters`")]
    assert row and "counts trainable elements only" in row[0] and "not bytes" in row[0]


def test_dist_loader_port_message_names_master_addr_only_when_the_port_is_missing(tmp_path):
    """Item 16: both missing -> the address error; only the port missing -> the misleading MASTER_ADDR text."""
    result = measure("""
        import json, os
        from torch_geometric.distributed import DistContext
        from torch_geometric.distributed.dist_loader import DistLoader
        os.environ.pop('MASTER_ADDR', None)
        os.environ.pop('MASTER_PORT', None)
        ctx = DistContext(rank=0, global_rank=0, world_size=1, global_world_size=1, group_name='t')
        report = {}
        for name, kwargs in {"both": {}, "port_only": {"master_addr": "127.0.0.1"}}.items():
            try:
                DistLoader(current_ctx=ctx, **kwargs)
            except ValueError as error:
                report[name] = str(error)
        print(json.dumps(report))
    """, tmp_path)
    assert result["both"].startswith("Missing master address")
    assert result["port_only"].startswith("Missing master port") and "'MASTER_ADDR'" in result["port_only"]
    text = squashed(DISTRIBUTED)
    assert "when both are missing" not in text and "only the port is missing" in text


# ---------------------------------------------------------------------------
# The DDP recipe's local rank count (item 6)
# ---------------------------------------------------------------------------

RECIPE = os.path.join(REPO, "scripts", "ddp_neighbor_training.py")


def recipe_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "TORCHELASTIC_")) and k not in (
               "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")}
    env.update(CUDA_VISIBLE_DEVICES="", PYTHONWARNINGS="ignore", **extra)
    return env


def test_recipe_refuses_world_size_as_local_count_in_a_multi_node_slurm_job():
    """srun with RANK/WORLD_SIZE but no LOCAL_WORLD_SIZE on 2 nodes: exit 2 with the usage-error document."""
    env = recipe_env(RANK="0", WORLD_SIZE="8", LOCAL_RANK="0", SLURM_JOB_NUM_NODES="2", SLURM_PROCID="0",
                     MASTER_ADDR="127.0.0.1", MASTER_PORT="1")
    process = subprocess.run([sys.executable, RECIPE], capture_output=True, text=True, env=env,
                             timeout=CHILD_TIMEOUT)
    assert process.returncode == 2, process.stderr[-3000:]
    assert [f["id"] for f in json.loads(process.stdout)["findings"]] == ["ddp-usage-error"]
    assert "LOCAL_WORLD_SIZE is not set and this job spans several nodes" in process.stderr
    assert "LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE" in process.stderr


def test_recipe_local_count_and_auto_backend_rules(tmp_path):
    """The fallbacks, and --backend auto refusing to put a GPU job on gloo (GPU count faked)."""
    result = measure("""
        import importlib.util, json, sys, torch
        spec = importlib.util.spec_from_file_location("recipe", sys.argv[1])
        recipe = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(recipe)
        recipe.import_stack()  # the recipe imports torch only once its command line is accepted

        def outcome(call):
            try:
                return call()
            except recipe.UsageError as error:
                return "UsageError: " + str(error)

        local = recipe.local_world_size_from_env
        torch.cuda.is_available, torch.cuda.device_count = (lambda: True), (lambda: 4)  # 4 GPUs
        print(json.dumps({
            "torchrun": local({"LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1"}, 8),
            "slurm_tasks_per_node": local({"SLURM_NTASKS_PER_NODE": "4", "SLURM_JOB_NUM_NODES": "2"}, 8),
            "single_node": local({"SLURM_JOB_NUM_NODES": "1"}, 2),
            "second_node_unknown": outcome(lambda: local({"GROUP_RANK": "1"}, 8)),
            "auto_one_per_gpu": recipe.choose_backend("auto", 4),
            "auto_too_many_ranks": outcome(lambda: recipe.choose_backend("auto", 8)),
            "gloo_on_purpose": recipe.choose_backend("gloo", 8),
        }))
    """, tmp_path, args=[RECIPE])
    assert result["torchrun"] == 4 and result["slurm_tasks_per_node"] == 4 and result["single_node"] == 2
    assert result["second_node_unknown"].startswith("UsageError: LOCAL_WORLD_SIZE is not set")
    assert result["auto_one_per_gpu"] == "nccl" and result["gloo_on_purpose"] == "gloo"
    assert result["auto_too_many_ranks"].startswith("UsageError: --backend auto: 4 GPU(s) visible but 8 ranks")
    help_text = subprocess.run([sys.executable, RECIPE, "--help"], capture_output=True, text=True,
                               timeout=CHILD_TIMEOUT).stdout
    assert "LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE" in help_text


def test_trim_to_layer_keeps_seed_outputs_and_drops_far_hops(tmp_path):
    """Faster steps: trimming (what pyg-lib's per-hop counts enable) changes no seed output.

    pyg-lib is not installable here, so the hop-ordered batch pyg-lib would return is built by hand:
    seeds, then hop-1 nodes, then hop-2 nodes; edges into the seeds first, then into hop 1.
    """
    result = measure("""
        import json, torch
        from torch_geometric.nn import GraphSAGE

        torch.manual_seed(0)
        seeds, hop1, hop2 = 4, 12, 36
        n = seeds + hop1 + hop2
        into_seeds = torch.stack([torch.randint(seeds, seeds + hop1, (24,)), torch.randint(0, seeds, (24,))])
        into_hop1 = torch.stack([torch.randint(seeds + hop1, n, (72,)), torch.randint(seeds, seeds + hop1, (72,))])
        edge_index = torch.cat([into_seeds, into_hop1], dim=1)
        x = torch.randn(n, 8)
        model = GraphSAGE(in_channels=8, hidden_channels=16, num_layers=2, out_channels=3).eval()
        with torch.no_grad():
            full = model(x, edge_index)[:seeds]
            trimmed_out = model(x, edge_index, num_sampled_nodes_per_hop=[seeds, hop1, hop2],
                                num_sampled_edges_per_hop=[24, 72])
        print(json.dumps({"same_seed_outputs": bool(torch.allclose(full, trimmed_out[:seeds], atol=1e-6)),
                          "rows_out": trimmed_out.size(0), "rows_in": n}))
    """, tmp_path)
    assert result["same_seed_outputs"] is True
    assert result["rows_out"] < result["rows_in"]
    assert "num_sampled_nodes_per_hop=batch.num_sampled_nodes" in squashed(SCALING)
