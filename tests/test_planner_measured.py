"""The planner's memory model against measurement: calibrate once (the tool's --calibrate, real PyG in its
children), then plan three larger graphs and measure each one here in fresh processes with code of this
file's own (peak RSS, /dev/shm the process placed, per-batch tensor bytes, two ranks mapping one file)."""

import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLANNER = ROOT / "scripts" / "plan_capacity.py"
# Up to the largest this shared machine holds comfortably in seconds: 8M edges (128 MiB of edge_index).
SIZES = ((250000, 2000000), (500000, 4000000), (1000000, 8000000))
FEATURES, FANOUTS, BATCH = 16, [10, 5], 512
TOLERANCE = 0.15

MEASURE = r'''
import json, os, sys, torch
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader

def status():
    found = {}
    for line in open("/proc/self/status"):
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem"):
            found[name] = int(rest.split()[0]) * 1024
    return found

spec = json.loads(sys.argv[1])
torch.manual_seed(1)
base = status()
if spec.get("file"):
    data = Data.from_dict(torch.load(spec["file"], mmap=True))
else:
    n, e = spec["nodes"], spec["edges"]
    data = Data(x=torch.randn(n, spec["features"]), edge_index=torch.randint(0, n, (2, e)),
                y=torch.randint(0, 10, (n,)))
graph = status()
loader = NeighborLoader(data, num_neighbors=spec["fanouts"], batch_size=spec["batch"], shuffle=True,
                        num_workers=spec["workers"], is_sorted=spec.get("is_sorted", False))
after = status()
out = {"base": base, "graph": graph, "after": after, "batches": []}
if spec.get("sample"):
    for index, batch in enumerate(loader):
        if index == 8:
            break
        out["batches"].append(sum(t.numel() * t.element_size() for s in batch.stores for t in s.values()
                                  if isinstance(t, torch.Tensor)))
print(json.dumps(out))
'''


def plan(*args, env=None):
    completed = subprocess.run([sys.executable, str(PLANNER)] + [str(a) for a in args], capture_output=True,
                               text=True, timeout=300, env=env)
    assert completed.returncode in (0, 1), completed.stderr[-2000:]
    return json.loads(completed.stdout)


def measure(spec):
    completed = subprocess.run([sys.executable, "-c", MEASURE, json.dumps(spec)], capture_output=True, text=True,
                               timeout=120)
    assert completed.returncode == 0, completed.stderr[-2000:]
    return json.loads(completed.stdout.splitlines()[-1])


def measure_ranks(spec, ranks):
    return measure_together([spec] * ranks)


def measure_together(specs):
    """Each spec in its own process, all at once: memory is per process, and two cores halve the wait."""
    processes = [subprocess.Popen([sys.executable, "-c", MEASURE, json.dumps(spec)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for spec in specs]
    results = []
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err[-2000:]
        results.append(json.loads(out.splitlines()[-1]))
    return results


CALIBRATION_TEMP_LEFT = []


@pytest.fixture(scope="session")
def calibrated(tmp_path_factory, short_temp_root):
    """One --calibrate run for the session, with a temp dir of its own; its coefficients, saved for the
    plans below (the temp dir's contents after the run: CALIBRATION_TEMP_LEFT)."""
    from conftest import clean_env
    temp = Path(tempfile.mkdtemp(dir=str(short_temp_root)))
    document = plan("--calibrate", "--timeout", "240", "--nodes", 1000, "--edges", 10000,
                    env=clean_env({"TMPDIR": str(temp)}))
    assert document["coefficients"]["used"] == "calibrated", document["findings"]
    path = tmp_path_factory.mktemp("coefficients") / "coefficients.json"
    path.write_text(json.dumps(document["coefficients"]["values"]))
    CALIBRATION_TEMP_LEFT[:] = sorted(entry.name for entry in temp.iterdir())
    return path


def test_calibration_builds_every_conv_and_leaves_nothing_in_the_temp_dir(calibrated):
    # PyG renders each conv's propagate (GAT's edge_updater too) into a .py file in the temp dir and
    # never removes it: before the probe removed its own, every --calibrate left six there.
    values = json.loads(calibrated.read_text())
    assert set(values["conv"]) == {"sage", "gcn", "gat", "gin", "transformer"}
    assert CALIBRATION_TEMP_LEFT == []


def design(document, name):
    return [d for d in document["designs"] if d["design"] == name][0]


def sized_plan(coefficients, nodes, edges, workers, ranks=1):
    return plan("--coefficients", coefficients, "--nodes", nodes, "--edges", edges, "--features", FEATURES,
                "--num-neighbors", ",".join(map(str, FANOUTS)), "--batch-size", BATCH, "--num-workers", workers,
                "--gpus-per-node", ranks, "--host-ram", "24GB")


def within(predicted, measured, what, rows):
    rows.append((what, predicted, measured))
    assert abs(predicted - measured) <= TOLERANCE * measured, "%s: predicted %d, measured %d (%.1f%%)" % (
        what, predicted, measured, 100.0 * (predicted - measured) / measured)


def report(rows):
    for what, predicted, measured in rows:  # shown with -s; the table in the report comes from here
        sys.stderr.write("%-58s predicted %8.1f MiB measured %8.1f MiB (%+.1f%%)\n" % (
            what, predicted / 2 ** 20, measured / 2 ** 20, 100.0 * (predicted - measured) / measured))


def test_peak_rss_and_shm_of_one_loader_process_match_the_model_at_three_sizes(calibrated):
    rows = []
    for nodes, edges in SIZES:
        spec = {"nodes": nodes, "edges": edges, "features": FEATURES, "fanouts": FANOUTS, "batch": BATCH}
        one = design(sized_plan(calibrated, nodes, edges, 0), "one-process-loader")["host"]
        got, with_workers = measure_together([dict(spec, workers=0), dict(spec, workers=2)])
        within(one["per_process_peak"]["bytes"], got["after"]["VmHWM"], "peak RSS, no workers, E=%d" % edges, rows)
        within(one["per_process_steady"]["bytes"], got["after"]["VmRSS"], "steady RSS, no workers, E=%d" % edges,
               rows)
        loader_peak = one["per_process_peak"]["terms"][2]["bytes"]
        within(loader_peak, got["after"]["VmHWM"] - got["graph"]["VmRSS"], "loader construction peak, E=%d" % edges,
               rows)
        shared = design(sized_plan(calibrated, nodes, edges, 2), "one-process-loader")["host"]
        got = with_workers
        sampler_shm = shared["shm_per_rank"]["terms"][0]["bytes"]
        within(sampler_shm, got["after"]["RssShmem"] - got["base"]["RssShmem"],
               "/dev/shm at construction, 2 workers, E=%d" % edges, rows)
        within(shared["per_process_peak"]["bytes"], got["after"]["VmHWM"], "peak RSS, 2 workers, E=%d" % edges, rows)
    report(rows)


@pytest.mark.skipif(not (importlib.util.find_spec("pyg_lib") or importlib.util.find_spec("torch_sparse")),
                    reason="sampling needs pyg-lib or torch-sparse: pip install torch-sparse (PyG's wheel index) "
                           "into this venv, then rerun this file")
def test_expected_batch_tensor_bytes_match_sampled_batches_at_three_sizes(calibrated):
    rows = []
    for nodes, edges in SIZES:
        one = design(sized_plan(calibrated, nodes, edges, 0), "one-process-loader")
        got = measure({"nodes": nodes, "edges": edges, "features": FEATURES, "fanouts": FANOUTS, "batch": BATCH,
                       "workers": 0, "sample": True})
        mean = sum(got["batches"]) / float(len(got["batches"]))
        within(one["gpu_expected"]["batch"]["tensor_bytes"], mean, "batch tensor bytes, E=%d" % edges, rows)
        assert max(got["batches"]) <= one["gpu"]["batch"]["tensor_bytes"]  # the worst case bounds every batch
    report(rows)


@pytest.mark.finding("plan-shared-copy-not-shared")
def test_two_ranks_mapping_one_sorted_file_share_the_edges_until_workers_copy_them(calibrated, tmp_path):
    import torch
    from torch_geometric.data import Data
    nodes, edges = SIZES[-1]
    torch.manual_seed(2)
    data = Data(x=torch.randn(nodes, FEATURES), edge_index=torch.randint(0, nodes, (2, edges)),
                y=torch.randint(0, 10, (nodes,))).sort(sort_by_row=False)
    path = tmp_path / "graph_sorted.pt"
    torch.save(data.to_dict(), str(path))
    del data
    rows = []
    for workers in (0, 1):
        document = sized_plan(calibrated, nodes, edges, workers, ranks=2)
        shared = design(document, "ddp-shared-copy")["host"]
        ranks = measure_ranks({"file": str(path), "fanouts": FANOUTS, "batch": BATCH, "workers": workers,
                               "is_sorted": True}, 2)
        for index, got in enumerate(ranks):
            # the mapped file's pages are page cache, counted once per node, not per rank
            private = got["after"]["VmRSS"] - (got["after"]["RssFile"] - got["base"]["RssFile"])
            within(shared["per_process_steady"]["bytes"], private,
                   "rank %d RSS beside the mapped file, %d workers" % (index, workers), rows)
            shm = got["after"]["RssShmem"] - got["base"]["RssShmem"]
            if workers:
                within(shared["shm_per_rank"]["terms"][0]["bytes"], shm, "rank %d /dev/shm, 1 worker" % index, rows)
            else:
                assert shm < 1 << 20  # no workers: the edges stay in the shared page cache
        if workers:
            found = [f for f in document["findings"] if f["id"] == "plan-shared-copy-not-shared"]
            assert found and found[0]["evidence"]["shm_per_node"] == 2 * found[0]["evidence"]["shm_per_rank"]
    report(rows)
