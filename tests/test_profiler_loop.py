"""The profiler measures the training loop (issue 31): a real PyG graph, a real model step given
with --step, the user's settings as --current. Its recommendation is re-measured apart from the
profiler, in the same loop, against a full grid (workers 0/1/2/cores, persistent or not, threads
1..cores), and under a CPU hog the test starts. Small graph, short budgets; no test asserts a
duration of its own: the profiler's cost is compared with the grid's, measured in the same run."""

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import clean_env, invoke_tool

ENABLE_SAMPLING = ("~/.venvs/scalable-distributed/bin/python -m pip install --no-build-isolation "
                   "torch-scatter==2.1.2 torch-sparse==0.6.18")
NODES, EDGES, FEATURES, BATCH = 6000, 60000, 32, 512  # 12 batches an epoch
CURRENT = "num_workers=2,persistent_workers=False"
STARTUP_ALLOWANCE_S = 15  # the profiler's import, graph load, breakdown and step check on a busy 2-core machine

TRAIN = textwrap.dedent("""
    import sys, torch
    import torch.nn.functional as F
    from torch_geometric.data import Data
    from torch_geometric.nn import SAGEConv

    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = SAGEConv(%(features)d, 64), SAGEConv(64, 10)

        def forward(self, x, edge_index):
            return self.conv2(self.conv1(x, edge_index).relu(), edge_index)

    model = Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    def step(batch):
        optimizer.zero_grad()
        out = model(batch.x, batch.edge_index)[:batch.batch_size]
        F.cross_entropy(out, batch.y[:batch.batch_size]).backward()
        optimizer.step()

    def broken(batch):
        raise ValueError("mat1 and mat2 shapes cannot be multiplied (my model)")

    if __name__ == "__main__":  # writes the graph
        g = torch.Generator().manual_seed(0)
        data = Data(x=torch.randn(%(nodes)d, %(features)d, generator=g),
                    edge_index=torch.randint(0, %(nodes)d, (2, %(edges)d), generator=g),
                    y=torch.randint(0, 10, (%(nodes)d,), generator=g))
        torch.save(data, sys.argv[1])
""" % {"nodes": NODES, "edges": EDGES, "features": FEATURES})

# The grid, measured apart from the profiler in the user's loop: `for batch in loader: step(batch)`
# over whole epochs (start-up included), every configuration once per round, rounds alternating in
# order; -> seconds per epoch (median over rounds) per configuration, and the grid's wall time.
GRID = textwrap.dedent("""
    import itertools, json, os, statistics, sys, time, torch
    from torch_geometric.loader import NeighborLoader
    sys.path.insert(0, os.getcwd())
    import train
    data = torch.load(sys.argv[1], weights_only=False)
    cores, rounds, epochs = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    grid = []
    for workers in sorted({0, 1, 2, cores}):
        for persistent in ([False] if workers == 0 else [True, False]):
            for threads in range(1, cores + 1):
                grid.append((workers, persistent, threads))
    seconds = {key: [] for key in grid}
    started = time.time()
    for round_index in range(rounds):
        for workers, persistent, threads in (grid if round_index % 2 == 0 else grid[::-1]):
            torch.set_num_threads(threads)
            kwargs = {"num_workers": workers}
            if workers:
                kwargs["persistent_workers"] = persistent
            loader = NeighborLoader(data, num_neighbors=[10, 5], batch_size=BATCH_SIZE, shuffle=True, **kwargs)
            t0 = time.perf_counter()
            for _ in range(epochs):
                for batch in loader:
                    train.step(batch)
            seconds[(workers, persistent, threads)].append((time.perf_counter() - t0) / epochs)
            del loader
    print(json.dumps({"wall_s": time.time() - started,
                      "epoch_s": {"%d,%d,%d" % k: statistics.median(v) for k, v in seconds.items()}}))
""").replace("BATCH_SIZE", str(BATCH))


@pytest.fixture(scope="module")
def sampling():
    import importlib.util
    if not (importlib.util.find_spec("pyg_lib") or importlib.util.find_spec("torch_sparse")):
        pytest.skip("loader-no-sampler-backend: NeighborLoader needs pyg-lib or torch-sparse to sample; "
                    "enable with: " + ENABLE_SAMPLING)


@pytest.fixture(scope="module")
def project(tmp_path_factory, sampling):
    folder = tmp_path_factory.mktemp("loop")
    (folder / "train.py").write_text(TRAIN)
    subprocess.run([sys.executable, "train.py", str(folder / "graph.pt")], cwd=str(folder), check=True,
                   timeout=300, env=clean_env({"PYTHONDONTWRITEBYTECODE": "1"}))
    return folder


def profile(folder, budget, env=None, step="train:step"):
    env = clean_env(dict(env or {}, PYTHONDONTWRITEBYTECODE="1"))
    env.pop("OMP_NUM_THREADS", None)
    return invoke_tool("profile_loader.py", "--data", folder / "graph.pt", "--num-neighbors", "10,5", "--batch-size",
                       str(BATCH), "--step", step, "--current", CURRENT, "--budget", str(budget),
                       env=env, cwd=folder, timeout=budget * 4 + 60)


@pytest.mark.finding("loader-step-failed")
def test_a_step_that_raises_is_reported_once_and_nothing_is_measured(project):
    result = profile(project, 30, step="train:broken")
    assert result.returncode == 1 and result.json["gates"]["measured"]["passed"] is False
    found = result.only("loader-step-failed")
    assert "shapes cannot be multiplied" in found["evidence"]["error"] and "broken" in found["evidence"]["traceback"]
    assert "--loader-only" in found["fix"] and "train:broken" not in found["fix"]
    assert result.json["configs"] == []


def grid_key(advice):
    settings = advice["settings"]
    workers = settings.get("num_workers", 0)
    return "%d,%d,%d" % (workers, int(bool(settings.get("persistent_workers")) and workers > 0),
                         int(advice["env"]["OMP_NUM_THREADS"]))


@pytest.fixture(scope="module")
def grid_then_profile(project):
    """The grid first (2 rounds of 2 epochs per configuration), then the profiler with a third of the
    grid's wall time as its --budget: the claim is that at a third of the cost it finds as good."""
    completed = subprocess.run([sys.executable, "-c", GRID, str(project / "graph.pt"), str(len(os.sched_getaffinity(0))),
                                "2", "2"], cwd=str(project), capture_output=True, text=True, timeout=900,
                               env=clean_env({"PYTHONDONTWRITEBYTECODE": "1"}))
    assert completed.returncode == 0, completed.stderr[-3000:]
    grid = json.loads(completed.stdout)
    # The grid's wall time leaves out its interpreter start and graph load; so does the profiler's
    # measuring time (its blocks), which the budget bounds after a fixed allowance for those.
    budget = int(min(grid["wall_s"] / 3 + STARTUP_ALLOWANCE_S, 60))
    result = profile(project, budget)
    measuring_s = sum(b["wall_s"] for b in result.json.get("blocks") or [])
    return grid, result, measuring_s, budget


@pytest.mark.finding("loader-faster-settings")
def test_the_recommendation_is_within_ten_percent_of_the_grid_at_a_third_of_its_cost(grid_then_profile):
    grid, result, profiler_s, budget = grid_then_profile
    assert result.returncode == 0, result.stderr[-3000:]
    document = result.json
    assert document["request"]["loop"]["kind"] == "step" and document["plan"]["baseline"] == "current"
    measured = [c for c in document["configs"] if c["status"] == "ok"]
    assert {"current", "default"} <= {c["name"] for c in measured}
    assert all(c["rounds"] >= 1 and c["other_cpu_cores"] for c in measured)
    current = next(c for c in measured if c["name"] == "current")
    assert current["ratio_to_baseline"] == 1.0 and current["settings"]["num_workers"] == 2
    assert current["rounds"] >= 2
    advice = document["recommendation"]
    cores = len(document["host"]["allowed_cores"])
    best = min(grid["epoch_s"].values())
    chosen = grid["epoch_s"][grid_key(advice)]
    figures = {"profiler_measuring_s": round(profiler_s, 1), "budget_s": budget,
               "profiler_elapsed_s": document["tool"]["elapsed_s"], "grid_wall_s": round(grid["wall_s"], 1),
               "recommended": grid_key(advice), "recommended_epoch_s": round(chosen, 3),
               "best": min(grid["epoch_s"], key=grid["epoch_s"].get), "best_epoch_s": round(best, 3),
               "current_epoch_s": round(grid["epoch_s"]["2,0,%d" % cores], 3), "verdict": advice["verdict"],
               "load": advice["load"]}
    sys.stderr.write("grid vs recommendation: %s\n" % json.dumps(figures))
    assert chosen <= best * 1.10, (figures, grid)
    assert profiler_s <= grid["wall_s"] / 3, figures
    if advice["verdict"] == "faster":
        assert "loader-faster-settings" in result.ids() and advice["speedup_range"][0] > 1.0


@pytest.mark.finding("loader-too-busy-to-tell")
def test_a_busy_machine_gives_the_same_answer_or_says_it_cannot_tell(project, grid_then_profile):
    _, quiet, _, budget = grid_then_profile
    # Two spinning processes on a 2-core machine: the load the user saw, on demand.
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
            for _ in range(2)]
    try:
        time.sleep(1.0)
        busy = profile(project, budget)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait(10)
    assert busy.returncode == 0, busy.stderr[-3000:]
    load = busy.json["recommendation"]["load"]
    assert load["other_cpu_cores_median"] >= 1.0  # the hog's two spinning processes were seen
    ids = busy.ids()
    same = (busy.json["recommendation"]["settings"], busy.json["recommendation"]["env"]) == (
        quiet.json["recommendation"]["settings"], quiet.json["recommendation"]["env"])
    sys.stderr.write("busy machine: verdict %s, same as quiet: %s, ids %s, load %s\n"
                     % (busy.json["recommendation"]["verdict"], same, ids, load))
    assert same or "loader-too-busy-to-tell" in ids, (busy.json["recommendation"], quiet.json["recommendation"])
    if "loader-too-busy-to-tell" in ids:
        assert "loader-faster-settings" not in ids
        assert busy.json["recommendation"]["config"] == "current"  # nothing presented as faster
