"""The runnable examples under references/examples/, run as a user runs them.

Each example is a template the references point to; each test runs it as a subprocess on a
tiny graph and asserts on the one JSON line it prints. Parts that need a sampling backend
(NeighborLoader) or pyg-lib (temporal sampling) assert what PyG does without them instead, so
the same test checks both sides; in CI (which installs torch-sparse) the backend is required.
"""

import functools
import json
import os
import re
import signal
import subprocess
import sys

import pytest

from conftest import ENABLE
from support import warm_python

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(REPO, "references", "examples")
TIMEOUT = 180
# One thread per process: the examples are tiny and the machines running the tests are shared.
ENV = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")


def example(name):
    return os.path.join(EXAMPLES, name)


def run_example(name, *args, cwd=None):
    """Run an example as `python NAME ARGS` would, as a process of its own forked from an interpreter that
    has imported torch and PyG already (support/warm_python.py)."""
    process = warm_python.shared(ENV).run(example(name), cwd or os.getcwd(), args, timeout=TIMEOUT)
    assert process.returncode == 0, process.stderr[-3000:]
    lines = process.stdout.strip().splitlines()
    assert len(lines) == 1, process.stdout
    return json.loads(lines[0])


@functools.lru_cache(maxsize=None)
def backends():
    """(pyg-lib, any neighbour-sampling backend) in this interpreter: one probe per session."""
    code = ("import torch_geometric.typing as T; "
            "print(T.WITH_PYG_LIB, T.WITH_PYG_LIB or T.WITH_TORCH_SPARSE)")
    probe = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=TIMEOUT, env=ENV)
    pyg_lib, any_backend = probe.stdout.split()
    return pyg_lib == "True", any_backend == "True"


def backend_or_skip_in_ci():
    present = backends()[1]
    if not present and os.environ.get("CI") == "true":
        pytest.fail("neighbor-sampling-unavailable in CI; enable: " + ENABLE["backend"])
    return present


def test_every_example_says_what_it_shows_and_how_to_run_it():
    names = sorted(n for n in os.listdir(EXAMPLES) if n.endswith(".py"))
    assert len(names) == 13, names
    for name in names:
        with open(example(name), encoding="utf-8") as handle:
            source = handle.read()
        assert source.startswith('"""'), name
        assert "python %s" % name in source.split('"""')[1] or "torchrun" in source, name


def docstring_command(name, verb):
    """The arguments after DIR of the docstring's `python NAME VERB DIR ...` line: the run the docs show."""
    with open(example(name), encoding="utf-8") as handle:
        docstring = handle.read().split('"""')[1]
    line = [l for l in docstring.splitlines() if l.strip().startswith("python %s %s DIR" % (name, verb))][0]
    return line.split("#")[0].split()[4:]


def test_out_of_core_sampler_samples_under_an_address_space_cap_smaller_than_its_edges(tmp_path):
    # The docstring's own commands: a documented cap larger than the file would show nothing.
    graph = tmp_path / "graph"
    written = run_example("out_of_core_sampler.py", "write", graph,
                          *docstring_command("out_of_core_sampler.py", "write"))
    assert written["num_edges"] == 600_000 * 32
    report = run_example("out_of_core_sampler.py", "sample", graph,
                         *docstring_command("out_of_core_sampler.py", "sample"))
    assert report["edge_file_mb"] > report["cap_mb"] * 1.5  # the edges could not fit under the cap
    # The cap is real: reading the edge file whole, or even mapping it, fails under it...
    assert report["whole_file_under_cap"] == {"read": "MemoryError", "mmap": "OSError"}
    # ...and sampling through NodeLoader works under the same cap.
    assert report["batches"] == 5
    assert 5 * 64 < report["sampled_nodes"] <= 5 * 64 * (1 + 10 + 10 * 5)
    assert report["sampled_edges"] > 0
    assert report["peak_rss_growth_mb"] < report["edge_file_mb"] / 2


def test_out_of_core_sampler_matches_neighbor_loader_on_a_small_graph(tmp_path):
    graph = tmp_path / "graph"
    run_example("out_of_core_sampler.py", "write", graph, "--nodes", 300, "--degree", 4)
    report = run_example("out_of_core_sampler.py", "compare", graph, "--num-neighbors", "2,2",
                         "--batch-size", 32)
    assert report["batches"] == 10
    assert report["edges_are_real"] is True  # batch.n_id[batch.edge_index] == the e_id edges
    assert report["full_neighbourhoods"] is True  # and no in-edge of an expanded node is missing
    if backend_or_skip_in_ci():
        assert report["neighbor_loader"] == "same subgraphs"
    else:
        assert report["neighbor_loader"].startswith("unavailable")


def test_temporal_sampling_never_samples_the_future():
    report = run_example("temporal_sampling.py")
    # data.sort() sorts by destination only; the (destination, time) sort leaves none unsorted.
    assert report["unsorted_after_data_sort"] > 0
    assert report["unsorted_after_time_sort"] == 0
    assert report["plain_sampler_edges"] > 0
    assert report["plain_sampler_future_edges"] == 0
    # The same binary search over destination-only order lets future edges in, silently.
    assert report["future_edges_if_only_data_sort"] > 0
    assert report["with_pyg_lib"] == backends()[0]
    if report["with_pyg_lib"]:
        assert report["neighbor_loader_future_edges"] == 0
        assert report["link_loader_future_edges"] == 0
        assert report["pyg_node_time"] == "sampled"
        return
    assert report["pyg_temporal"] == ("ImportError: Edge-level temporal sampling requires a "
                                      "more recent 'pyg-lib' installation")
    if backends()[1]:  # torch-sparse alone: node-level time fails at iteration
        assert report["pyg_node_time"].startswith(
            "ValueError: 'disjoint' sampling not supported for neighbor sampling via "
            "'torch-sparse'")
    else:
        assert report["pyg_node_time"] == (
            "ImportError: 'NeighborSampler' requires either 'pyg-lib' or 'torch-sparse'")


def test_ddp_node_embeddings_dense_and_sparse_match_one_process():
    report = run_example("ddp_node_embeddings.py")
    assert report["adam_on_sparse"].startswith("Adam does not support sparse gradients")
    for kind in ("dense-sgd", "sparse-sgd", "sparse-sparseadam"):
        assert report[kind]["ranks_equal"] is True, kind
        assert report[kind]["max_diff_vs_single_process"] < 1e-5, kind
    assert report["dense-sgd"]["allreduced_grad_rows"] == 1000  # the whole table every step
    assert report["sparse-sgd"]["allreduced_grad_rows"] <= 2 * 32  # rows the two batches touched
    # SparseAdam's moments are dense: twice the table, whatever the gradients.
    assert report["sparse-sparseadam"]["optimizer_state_numel"] == 2 * report["table_numel"]


def torchrun():
    path = os.path.join(os.path.dirname(sys.executable), "torchrun")
    if not os.path.exists(path):
        pytest.skip("no torchrun beside %s; enable: pip install torch==2.13.0" % sys.executable)
    return path


def kill_tree(process):
    """SIGKILL a launcher and every process under it, by pid, children first."""
    import psutil
    parent = psutil.Process(process.pid)
    for child in parent.children(recursive=True) + [parent]:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass


def test_resumable_epoch_ddp_killed_mid_epoch_resumes_each_batch_once(tmp_path):
    command = [torchrun(), "--standalone", "--nproc_per_node", "2",
               example("resumable_epoch.py"), str(tmp_path / "new-folder"), "--epochs", "2"]
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=ENV)
    try:
        for line in first.stderr:  # wait until both ranks are mid-epoch, then kill everything
            if "rank 0: epoch 0 step 4/" in line:
                kill_tree(first)
                break
        first.wait(timeout=TIMEOUT)
    finally:
        if first.poll() is None:
            kill_tree(first)
    assert first.returncode == -signal.SIGKILL
    second = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, env=ENV)
    assert second.returncode == 0, second.stderr[-3000:]
    # Found in the whole of stderr: the two ranks share it, and their lines can interleave.
    resumed = re.findall(r"rank (\d): resuming at epoch (\d+) step (\d+)", second.stderr)
    assert sorted(rank for rank, _, _ in resumed) == ["0", "1"], second.stderr[-3000:]
    assert all((epoch, step) != ("0", "0") for _, epoch, step in resumed), resumed
    report = json.loads(second.stdout.strip().splitlines()[-1])
    assert report == {"epochs": 2, "steps_per_epoch": 7, "world_size": 2, "seeds_per_epoch": 224,
                      "seeds_left_out_per_epoch": 240 % (2 * 16), "seen_once": True, "seen_twice_or_more": 0}


def load_example(name):
    import importlib.util
    spec = importlib.util.spec_from_file_location(name[:-3], example(name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("world_size, batch_size", [(2, 16), (3, 16), (4, 7), (3, 50)])
def test_equal_shares_leave_the_remainder_out_and_padding_keeps_it(world_size, batch_size):
    """Issue 41, item 4: num_seeds % (world_size * batch_size) seeds sit out of each epoch (16 of 240 with the
    docstring's 2 ranks and batches of 16); pad=True trains every seed, repeating a few."""
    sampler_class = load_example("resumable_epoch.py").ResumableSampler
    seeds = 240
    for pad in (False, True):
        shares = [sampler_class(seeds, batch_size, seed=0, rank=rank, world_size=world_size, pad=pad)
                  for rank in range(world_size)]
        for epoch in (0, 1):
            for share in shares:
                share.set_epoch(epoch)
            trained = [index for share in shares for index in share.indices]
            assert len({len(share) for share in shares}) == 1  # the same steps on every rank
            left_out = seeds - len(set(trained))
            if pad:
                assert left_out == 0 and len(trained) - seeds == -seeds % (world_size * batch_size)
            else:
                assert left_out == seeds % (world_size * batch_size) and len(trained) == len(set(trained))
    text = " ".join(open(os.path.join(REPO, "references", "distributed-workflows.md")).read().split())
    assert "`num_seeds % (world_size * batch_size)` seeds sit out (16 of 240 with 2 ranks and batches of 16" in text
    assert "`ResumableSampler(..., pad=True)`" in text


def test_resumable_epoch_under_elastic_torchrun_restarts_and_resumes(tmp_path):
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    if not os.path.exists(torchrun):
        pytest.skip("no torchrun beside %s; enable: pip install torch==2.13.0" % sys.executable)
    process = subprocess.run(
        # One worker: torchrun restarts it after its crash, and it resumes from the checkpoint.
        [torchrun, "--standalone", "--nproc_per_node", "1", "--max-restarts", "1",
         example("resumable_epoch.py"),
         str(tmp_path / "new-folder"), "--epochs", "2", "--crash-at-step", "4"],
        capture_output=True, text=True, timeout=TIMEOUT,
        env=ENV)
    assert process.returncode == 0, process.stderr[-3000:]
    assert "exitcode: 17" in process.stderr  # the worker really died once
    assert "rank 0: resuming at epoch 0 step 4" in process.stderr
    report = json.loads(process.stdout.strip().splitlines()[-1])
    assert report["world_size"] == 1 and report["seen_once"] is True
    assert report["seen_twice_or_more"] == 0


def test_distributed_link_eval_equals_one_process():
    report = run_example("distributed_link_eval.py")
    assert report["equal"] is True
    assert report["distributed"] == report["single_process"]
    assert report["distributed"]["count"] == 301
    assert 0 < report["distributed"]["mrr"] < 1
    # A mean of the two ranks' own MRRs (shares of 151 and 150) is not the MRR.
    assert report["mean_of_rank_mrrs"] != report["distributed"]["mrr"]


def needs_backend_or_skip():
    if not backend_or_skip_in_ci():
        pytest.skip("neighbor-sampling-unavailable; enable: " + ENABLE["backend"])


def test_sqlite_store_keeps_order_and_repeats_and_raises_for_missing_ids(tmp_path):
    report = run_example("sqlite_store.py", cwd=tmp_path)  # asserts the requested order, repeats kept
    assert report["rows"] == 100
    assert report["missing_id"].startswith("KeyError: 'node ids [1000000] are not in")
    assert report["edges"] == 600 and report["colptr"] == 101
    assert (tmp_path / "graph.sqlite").is_file() and (tmp_path / "csc.pt").is_file()


def test_dict_store_lookups_are_asymmetric():
    # The example asserts the AttrView, index order and missing-feature rules itself.
    assert run_example("dict_store.py") == {"tensor_attrs": 1, "edge_attrs": 1, "missing_edges": "KeyError"}


@pytest.mark.parametrize("name", ["dict_store.py", "sqlite_store.py"])
def test_a_store_examples_checker_line_passes_as_written(tmp_path, name):
    """The docstring's check_store_contract line, run from a copy's folder with the skill where README installs
    it (here: this checkout): the store pair passes the contract checker."""
    import shutil
    shutil.copy(example(name), tmp_path / name)
    run_example(name, cwd=tmp_path)  # sqlite_store.py writes its files beside the copy first
    with open(example(name), encoding="utf-8") as handle:
        docstring = handle.read().split('"""')[1]
    line = [l for l in docstring.splitlines() if "check_store_contract.py" in l][0].split("#")[0].split()
    installed = "~/.claude/skills/scalable-distributed/"
    assert line[0] == "python" and line[1].startswith(installed), line
    command = [sys.executable, os.path.join(REPO, line[1][len(installed):])] + line[2:]
    completed = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT, env=ENV)
    document = json.loads(completed.stdout)
    problems = [f["id"] for f in document["findings"] if f["severity"] != "info"]
    # Without a sampling backend the checker cannot try the loader on the pair, and says so (a warning).
    expected = [] if backends()[1] else ["store-sampling-unavailable"]
    assert completed.returncode == 0 and problems == expected, document["findings"]


def test_link_prediction_split_does_not_leak_and_labels_stay_binary():
    report = run_example("link_prediction.py")
    assert report["split_labels"] == [1.0]  # no negatives in the training split
    assert report["supervision_in_message_passing"] == 0  # disjoint_train_ratio > 0
    if backend_or_skip_in_ci():
        assert report["train_labels"] == [0.0, 1.0]  # loader negatives 0, positives 1: not {0, 1, 2}
        assert 0 <= report["val_accuracy"] <= 1 and report["triplet_negatives_per_source"] == 2
    else:
        assert report["sampling"] == "ImportError: 'NeighborSampler' requires either 'pyg-lib' or 'torch-sparse'"


def test_ddp_neighbor_loader_gives_every_rank_the_same_steps_over_a_shared_edge_index():
    ranks = run_example("ddp_neighbor_loader.py")["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert all(r["shares_edge_index"] for r in ranks)  # is_sorted=True: no private sorted copy
    if backend_or_skip_in_ci():
        assert ranks[0]["steps"] == ranks[1]["steps"] == [7, 7]  # 200 seeds, 100 per rank, batches of 16
    else:
        assert all(r["sampling"].startswith("ImportError") for r in ranks)


def test_ddp_join_checkpoint_survives_uneven_shares_and_restores_on_every_rank():
    ranks = run_example("ddp_join_checkpoint.py")["ranks"]  # each rank asserts its restored weights
    assert [(r["steps_per_epoch"], r["start_epoch"]) for r in ranks] == [(3, 2), (2, 2)]


def test_layerwise_inference_equals_the_full_batch_forward_pass_in_one_process_and_sharded():
    report = run_example("layerwise_inference.py")  # also asserts that shuffle=True misplaces rows
    ranks = report["ranks"]
    if backend_or_skip_in_ci():
        assert report["one_process"] == {"equals_full_batch": True, "shuffled_rows_misplaced": True}
        assert [r["equals_full_batch"] for r in ranks] == [True, True]
    else:
        assert report["one_process"]["sampling"].startswith("ImportError")
        assert all(r["sampling"].startswith("ImportError") for r in ranks)


def test_faster_steps_prefetch_compile_and_trim():
    needs_backend_or_skip()
    report = run_example("faster_steps.py")
    assert report["trimmed"] + report["compiled"] == 3
    assert report["trimmed"] == (3 if backends()[0] else 0)  # per-hop counts come only from pyg-lib
    if report["device"] == "cpu":
        assert report["explicit_cuda_without_cuda"] == "RuntimeError at the first batch"


def test_heterogeneous_sampling_needs_reverse_edges_and_every_fan_out():
    needs_backend_or_skip()
    report = run_example("heterogeneous_sampling.py")  # asserts the silent empty batch and the ValueError
    assert report["seed_authors"] == 16 and report["papers_sampled"] > 0
