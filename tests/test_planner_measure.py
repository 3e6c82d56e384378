"""The model against real runs, as an agent runs the planner: --measure runs each configuration's loader in its
launch shape (workers 0, 1 and 4; mp.spawn and torchrun; 1 and 2 ranks; the graph passed in mp.spawn's args;
a memory-mapped sorted graph; a --data file) at two graph sizes, and the predicted peak /dev/shm and node
memory must be within 15 % of the measured peak. One module-scoped set of runs, one at a time (each spawned
worker imports torch), asserted by several tests; then what the runs left (nothing), a signal mid-run, a
deadline, and a job too large for this machine. As root each run has a private /dev/shm."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import ROOT, clean_env, interrupted_finding, signal_when
from support.helpers import live_processes

PLANNER = ROOT / "scripts" / "plan_capacity.py"
JOB_SCRIPT = str(ROOT / "scripts" / "capacity_planner" / "job.py")
SIZES = {"small": (60000, 600000), "larger": (120000, 1200000)}
FEATURES = 32
COMMON = ["--features", str(FEATURES), "--num-neighbors", "10,5", "--batch-size", "512", "--gpus-per-node", "0",
          "--cores", "2", "--measure", "--timeout", "180"]
CONFIGS = {
    "torchrun1-w0": ["--launch", "torchrun", "--ranks-per-node", "1", "--num-workers", "0"],
    "torchrun1-w1": ["--launch", "torchrun", "--ranks-per-node", "1", "--num-workers", "1"],
    "torchrun2-w4": ["--launch", "torchrun", "--ranks-per-node", "2", "--num-workers", "4"],
    "spawn2-w0": ["--launch", "spawn", "--ranks-per-node", "2", "--num-workers", "0"],
    "spawn2-w1": ["--launch", "spawn", "--ranks-per-node", "2", "--num-workers", "1"],
    "spawn2-w0-args": ["--launch", "spawn", "--ranks-per-node", "2", "--num-workers", "0", "--graph-in-spawn-args"],
    "mapped-torchrun2-w0": ["--launch", "torchrun", "--ranks-per-node", "2", "--num-workers", "0",
                            "--measure-design", "cpu-ddp-shared-copy"],
    "mapped-torchrun2-w1": ["--launch", "torchrun", "--ranks-per-node", "2", "--num-workers", "1",
                            "--measure-design", "cpu-ddp-shared-copy"],
}
TOLERANCE = 0.15
RUNS = [(size, name) for size in SIZES for name in CONFIGS] + [("small", "data-file-torchrun2-w1")]


def mounts():
    with open("/proc/self/mountinfo") as handle:
        return sorted(line.split(" - ")[0].split(None, 4)[4] for line in handle)


def job_processes(temp_root):
    """Processes running the measured job's script with a TMPDIR under `temp_root`: what this module's runs
    started, not another worker's (tests/test_docs_shm.py measures too, perhaps at the same time)."""
    return [pid for pid, environ, command in live_processes()
            if JOB_SCRIPT.encode() in command and str(temp_root).encode() in environ]


def plan(args, temp, timeout=300):
    started = time.time()
    completed = subprocess.run([sys.executable, str(PLANNER)] + [str(a) for a in args], capture_output=True,
                               timeout=timeout, env=clean_env({"TMPDIR": str(temp)}))
    document = json.loads(completed.stdout)
    assert document["exit_code"] == completed.returncode, completed.stderr[-2000:]
    return document, time.time() - started, completed


@pytest.fixture(scope="module")
def measured(neighbor_backend, tmp_path_factory, short_temp_root):
    """Every run of RUNS: {(size, name): (document, seconds, what its TMPDIR held after)}."""
    import torch
    from torch_geometric.data import Data
    folder = tmp_path_factory.mktemp("measure-graph")
    nodes, edges = SIZES["small"]
    torch.manual_seed(3)
    data_file = folder / "graph.pt"
    torch.save(Data(x=torch.randn(nodes, FEATURES), edge_index=torch.randint(0, nodes, (2, edges)),
                    y=torch.randint(0, 10, (nodes,))).to_dict(), str(data_file))
    before, results = mounts(), {}

    def run(size, name):
        temp = tempfile.mkdtemp(dir=str(short_temp_root))
        if name.startswith("data-file"):
            args = ["--data", data_file] + COMMON + CONFIGS["mapped-torchrun2-w1"][:6]
        else:
            nodes, edges = SIZES[size]
            args = ["--nodes", nodes, "--edges", edges] + COMMON + CONFIGS[name]
        document, seconds, completed = plan(args, temp)
        results[(size, name)] = (document, seconds, sorted(os.listdir(str(temp))), completed.stderr)
    # Two at a time: each job's memory is its own processes' (and its own private /dev/shm), so a neighbour
    # slows it down but does not change what it holds.
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda run_id: run(*run_id), RUNS))
    results["mounts"] = (before, mounts())
    results["processes"] = job_processes(short_temp_root)
    return results


def summary_line(size, name, document, seconds):
    record = document.get("measure") or {}
    peak = (record.get("measured") or {}).get("peak") or {}
    model = record.get("model") or {}
    return "%-6s %-22s shm %7.1f / %7.1f MiB (%s)  node %7.1f / %7.1f MiB (%s)  %5.1f s\n" % (
        size, name, model.get("shm_per_node_bytes", 0) / 2.0 ** 20, peak.get("shm_bytes", 0) / 2.0 ** 20,
        (record.get("ratio") or {}).get("shm_per_node"), model.get("node_memory_peak_bytes", 0) / 2.0 ** 20,
        (peak.get("node_bytes") or 0) / 2.0 ** 20, (record.get("ratio") or {}).get("node_memory"), seconds)


@pytest.mark.finding("plan-measured")
@pytest.mark.parametrize("size, name", RUNS)
def test_the_model_is_within_15_percent_of_the_measured_peaks(measured, size, name):
    document, seconds, _, stderr = measured[(size, name)]
    sys.stderr.write(summary_line(size, name, document, seconds))  # shown with -s: the report's table
    assert document["gates"]["measured"]["passed"], (document["findings"], stderr[-2000:])
    [found] = [f for f in document["findings"] if f["id"] == "plan-measured"]
    record = document["measure"]
    for figure in ("shm_per_node", "node_memory"):
        evidence = found["evidence"][figure]
        assert evidence["ratio"] is not None and abs(evidence["ratio"] - 1) <= TOLERANCE, (figure, evidence)
    assert not [f for f in document["findings"] if f["id"] == "plan-measure-disagrees"]
    assert record["measured"]["worker_start_methods"] == [record["job"]["worker_start_method"]]
    if os.geteuid() == 0:
        assert found["evidence"]["private_shm"] is True


@pytest.mark.parametrize("name", ["torchrun1-w0", "spawn2-w0", "mapped-torchrun2-w0"])
def test_without_workers_the_plan_and_the_run_put_nothing_in_shm(measured, name):
    for size in SIZES:
        record = measured[(size, name)][0]["measure"]
        assert record["model"]["shm_per_node_bytes"] == 0 and record["measured"]["peak"]["shm_bytes"] < 1 << 20


def test_the_graph_in_spawn_args_lands_once_per_node_and_pickled_graphs_once_per_rank(measured):
    for size, (nodes, edges) in SIZES.items():
        data = nodes * (4 * FEATURES + 8) + 16 * edges
        passed = measured[(size, "spawn2-w0-args")][0]["measure"]["measured"]["peak"]["shm_bytes"]
        assert abs(passed - data) < 0.05 * data  # the graph, once, with no workers at all
        spawned = measured[(size, "spawn2-w1")][0]["measure"]["measured"]["peak"]["shm_bytes"]
        forked = measured[(size, "mapped-torchrun2-w1")][0]["measure"]["measured"]["peak"]["shm_bytes"]
        assert spawned > forked + 2 * 0.9 * (data - 16 * edges)  # each rank's x and y pickled to its workers


def test_the_runs_left_nothing_behind(measured):
    before, after = measured["mounts"]
    assert after == before and measured["processes"] == []  # no mount on the host, no job process
    for size, name in RUNS:
        document, _, temp_left, _ = measured[(size, name)]
        assert temp_left == [], (name, temp_left)  # the run's scratch folder went, the workers' pymp-* inside
        assert document["measure"]["measured"]["cleanup"]["shm_files_left"] == 0


@pytest.mark.finding("plan-interrupted")
def test_sigterm_mid_run_prints_what_was_measured_and_leaves_nothing(neighbor_backend, temp_dir):
    nodes, edges = SIZES["small"]
    before = mounts()
    process = subprocess.Popen([sys.executable, str(PLANNER), "--nodes", str(nodes), "--edges", str(edges)] + COMMON +
                               CONFIGS["spawn2-w1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=clean_env({"TMPDIR": str(temp_dir)}))
    first_batch = lambda: any("first batch" in path.read_text() for path in temp_dir.glob("*/measure-*/marks.jsonl"))
    # the child publishes what it measured at least once a second
    stdout, _ = signal_when(process, first_batch, signal.SIGTERM, settle=1.5)
    document, stopped = interrupted_finding(process, stdout, signal.SIGTERM, "plan-interrupted")
    record = document["measure"]
    assert record["state"] == "interrupted" and "--measure" in stopped["fix"]
    stages = [s["stage"] for s in record["measured"]["stages"]]
    assert "construction" in stages and record["measured"]["peak"]["node_bytes"] > 0
    assert list(temp_dir.iterdir()) == [] and job_processes(temp_dir) == [] and mounts() == before


@pytest.mark.finding("plan-measure-failed")
def test_a_job_past_the_deadline_is_cut_and_says_so(neighbor_backend, temp_dir):
    nodes, edges = SIZES["small"]
    document, seconds, _ = plan(["--nodes", nodes, "--edges", edges] + COMMON[:-2] + ["--timeout", "9"] +
                                CONFIGS["spawn2-w1"], temp_dir)
    [found] = [f for f in document["findings"] if f["id"] == "plan-measure-failed"]
    assert found["evidence"]["kind"] == "deadline" and "--timeout 27" in found["fix"]
    assert document["exit_code"] == 1 and document["gates"]["measured"] == {"passed": False} and seconds < 25
    assert list(temp_dir.iterdir()) == [] and job_processes(temp_dir) == []


@pytest.mark.finding("plan-measure-refused")
def test_a_job_this_machine_cannot_hold_is_refused_before_it_starts(temp_dir):
    document, seconds, completed = plan(["--nodes", 10 ** 9, "--edges", 10 ** 10] + COMMON + CONFIGS["spawn2-w1"],
                                        temp_dir)
    assert completed.returncode == 2 and [f["id"] for f in document["findings"]] == ["plan-measure-refused"]
    evidence = document["findings"][0]["evidence"]
    assert evidence["short_of"] == ["memory"] and evidence["needs"]["memory_bytes"] > 10 ** 12
    assert "--nodes" in document["findings"][0]["fix"] and seconds < 20 and list(temp_dir.iterdir()) == []
