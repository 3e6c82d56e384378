"""scripts/ddp_neighbor_training.py run the way an agent runs it: two real
processes on 127.0.0.1, launched by the script itself and by torchrun.

Every training run asserts on the JSON report and exit code, then checks that
no process of the job survives and that the rendezvous port is free again.
"""

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from conftest import ENABLE

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "ddp_neighbor_training.py"

# 402 nodes -> 241 training seeds -> shards of 121 and 120 seeds; with 30 seeds
# per batch that is 5 batches on rank 0 and 4 on rank 1, so every training run
# also exercises the uneven-step path (Join).
TINY = ["--num-nodes", "402", "--num-neighbors", "5,5", "--batch-size", "30", "--epochs", "3", "--lr", "0.03"]
RUN_TIMEOUT = 120   # seconds; a hung job fails the test instead of the suite
FAIL_BOUND = 60     # seconds within which a job with a failing rank must be over
CHANCE = 0.25       # four classes


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def job_processes(marker):
    """Live processes carrying this run's environment marker (children inherit it)."""
    found = []
    for process in psutil.process_iter(["pid"]):
        try:
            if process.environ().get("DDP_RECIPE_TEST_RUN") == marker:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def port_listeners(port):
    return [conn for conn in psutil.net_connections(kind="tcp")
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN]


class Run:
    def __init__(self, completed, seconds, port):
        self.returncode = completed.returncode
        self.stdout = completed.stdout
        self.stderr = completed.stderr
        self.seconds = seconds
        self.port = port

    def json(self):
        assert self.stdout.strip(), f"no JSON on stdout; stderr tail:\n{self.stderr[-3000:]}"
        return json.loads(self.stdout)


def run_recipe(args, launcher="spawn", env_extra=None, timeout=RUN_TIMEOUT, python_prefix=None):
    """Run the recipe in its own session; kill the whole session if it overruns."""
    port = free_port()
    if launcher == "spawn":
        command = [sys.executable, str(SCRIPT), "--nprocs", "2", "--master-port", str(port), *args]
    elif launcher == "torchrun":
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                   "--master_addr", "127.0.0.1", "--master_port", str(port), str(SCRIPT), *args]
    else:  # a prepared interpreter command (see test_missing_backend...)
        command = [*python_prefix, *args]
    marker = uuid.uuid4().hex
    env = {key: value for key, value in os.environ.items()
           if key not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env["DDP_RECIPE_TEST_RUN"] = marker
    env.update(env_extra or {})
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"{launcher} run did not finish within {timeout}s; stderr tail:\n{stderr[-3000:]}")
    seconds = time.monotonic() - started
    completed = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)

    # Nothing of the job may outlive it: no worker, no listener on the rendezvous port.
    deadline = time.monotonic() + 5
    while (job_processes(marker) or port_listeners(port)) and time.monotonic() < deadline:
        time.sleep(0.2)
    leftovers = [(p.pid, " ".join(p.cmdline()[:4])) for p in job_processes(marker)]
    for leftover in job_processes(marker):
        leftover.kill()
    assert not leftovers, f"processes left behind: {leftovers}"
    assert not port_listeners(port), f"port {port} still has a listener"
    return Run(completed, seconds, port)


@pytest.fixture(scope="module")
def neighbor_backend():
    """Skip training tests when this interpreter cannot sample neighbours at all."""
    probe = ("import torch; from torch_geometric.data import Data; "
             "from torch_geometric.loader import NeighborLoader; "
             "data = Data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=2); "
             "next(iter(NeighborLoader(data, num_neighbors=[1], batch_size=1)))")
    result = subprocess.run([sys.executable, "-W", "ignore", "-c", probe], capture_output=True, text=True,
                            timeout=120)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["?"])[-1]
        pytest.skip(f"neighbor-sampling-unavailable: NeighborLoader cannot sample here ({last}); enable: "
                    + ENABLE["backend"])


@pytest.fixture(scope="module")
def spawn_run(neighbor_backend):
    return run_recipe([*TINY, "--report-details"])


@pytest.fixture(scope="module")
def saved_graph(tmp_path_factory):
    """A community graph saved as a Data file and as its to_dict(), written by the test (not by the script)."""
    import torch
    from torch_geometric.data import Data

    generator = torch.Generator().manual_seed(7)
    num_nodes, num_classes = 300, 4
    y = torch.arange(num_nodes) % num_classes
    src = torch.arange(num_nodes).repeat_interleave(6)
    # Six partners per node from its own class (node ids congruent modulo num_classes).
    partner = torch.randint(num_nodes // num_classes, (src.numel(),), generator=generator) * num_classes + y[src]
    edge_index = torch.cat([torch.stack([src, partner]), torch.stack([partner, src])], dim=1)
    edge_index = edge_index[:, torch.randperm(edge_index.size(1), generator=generator)]  # unsorted on purpose
    x = torch.randn(num_nodes, 8, generator=generator)
    x[:, :num_classes] += torch.nn.functional.one_hot(y, num_classes).float()
    order = torch.randperm(num_nodes, generator=generator)
    train_mask = torch.zeros(num_nodes, dtype=torch.bool)
    train_mask[order[:181]] = True  # odd count: shards of 91 and 90
    data = Data(x=x, y=y, edge_index=edge_index, train_mask=train_mask, val_mask=~train_mask)
    folder = tmp_path_factory.mktemp("ddp_graph")
    torch.save(data, folder / "graph.pt")
    torch.save(data.to_dict(), folder / "graph.dict.pt")  # the form the references recommend saving
    return folder, sorted(order[:181].tolist())


def assert_trained(report, world_size=2):
    assert report["ok"] is True and report["exit_code"] == 0
    assert report["world_size"] == world_size and report["backend"] == "gloo"
    ranks = report["ranks"]
    assert [r["rank"] for r in ranks] == list(range(world_size))
    assert len({r["pid"] for r in ranks}) == world_size, "ranks must be separate processes"
    epochs = report["epochs"]
    assert len(epochs) == report["config"]["epochs"]
    assert epochs[-1]["train_loss"] < epochs[0]["train_loss"], f"loss did not fall: {epochs}"
    assert report["val_acc"] == epochs[-1]["val_acc"]
    assert report["val_acc"] > CHANCE + 0.35, f"validation accuracy near chance: {epochs}"
    batch_size = report["config"]["batch_size"]
    for rank in ranks:
        expected = math.ceil(rank["num_train_seeds"] / batch_size)
        assert rank["batches_per_epoch"] == [expected] * len(epochs)


def assert_exact_shards(report, train_ids=None):
    shards = [set(r["train_seeds"]) for r in report["ranks"]]
    assert [len(s) for s in shards] == [r["num_train_seeds"] for r in report["ranks"]]
    union = set().union(*shards)
    assert sum(len(s) for s in shards) == len(union), "shards overlap"
    assert len(union) == report["graph"]["num_train"], "shards do not cover the training set"
    if train_ids is not None:
        assert sorted(union) == train_ids
    sizes = [len(s) for s in shards]
    assert max(sizes) - min(sizes) <= 1


def test_help_documents_flags_exit_codes_and_examples():
    result = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0
    text = result.stdout
    for flag in ("--nprocs", "--num-neighbors", "--batch-size", "--epochs", "--data", "--store", "--backend",
                 "--master-addr", "--master-port", "--seed", "--timeout", "--fail-rank", "--report-details"):
        assert flag in text, flag
    assert "exit codes:" in text and "torchrun --nproc_per_node 2" in text
    for code in ("0  every rank", "1  the job failed", "2  usage error"):
        assert code in text, code


def test_usage_error_exits_2_with_one_line_and_a_usage_document(tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path))
    result = subprocess.run([sys.executable, str(SCRIPT), "--num-neighbors", "10,x"],
                            capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1
    assert "--num-neighbors" in result.stderr
    document = json.loads(result.stdout)
    assert document["status"] == "usage-error" and [f["id"] for f in document["findings"]] == ["ddp-usage-error"]
    assert list(tmp_path.iterdir()) == []  # torch was never imported: no torchinductor_<user> folder


def test_missing_sampling_backend_fails_fast_before_spawning():
    # Hide both backends from PyG the way a missing install would: imports raise ImportError.
    prefix = [sys.executable, "-c",
              "import runpy, sys; sys.modules['pyg_lib'] = None; sys.modules['torch_sparse'] = None; "
              f"sys.argv = [{str(SCRIPT)!r}] + sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"]
    run = run_recipe(["--nprocs", "2"], launcher="prepared", python_prefix=prefix)
    assert run.returncode == 1
    report = run.json()
    assert report["ok"] is False
    finding = report["findings"][0]
    assert finding["id"] == "neighbor-sampling-unavailable"
    assert finding["fix"] == "python3 %s --require-neighbor-backend" % (ROOT / "scripts" / "check_sampling_backends.py")
    assert "spawning" not in run.stderr  # failed in the parent, no worker started


def test_self_spawn_two_ranks_train_on_disjoint_shards(spawn_run):
    assert spawn_run.returncode == 0, spawn_run.stderr[-3000:]
    report = spawn_run.json()
    assert report["launcher"] == "spawn" and report["input"] == "data"
    assert report["graph"]["source"] == "synthetic"
    assert_trained(report)
    assert_exact_shards(report)
    # Shards of 121 and 120 seeds: 5 and 4 batches, and still no hang.
    assert [r["batches_per_epoch"][0] for r in report["ranks"]] == [5, 4]


def test_store_fed_batches_match_data_fed_batches(spawn_run):
    store_run = run_recipe([*TINY, "--report-details", "--store"])
    assert store_run.returncode == 0, store_run.stderr[-3000:]
    store, data = store_run.json(), spawn_run.json()
    assert store["input"] == "store" and data["input"] == "data"
    assert_trained(store)
    for store_rank, data_rank in zip(store["ranks"], data["ranks"]):
        assert store_rank["train_seeds"] == data_rank["train_seeds"]
        # [seeds, sampled nodes, sampled edges] of every first-epoch batch.
        assert store_rank["first_epoch_batches"] == data_rank["first_epoch_batches"]
        assert len(store_rank["first_epoch_batches"]) == store_rank["batches_per_epoch"][0]


@pytest.mark.parametrize("saved", ["graph.pt", "graph.dict.pt"], ids=["Data", "to_dict"])
def test_torchrun_two_ranks_on_a_saved_data_file(neighbor_backend, saved_graph, saved):
    folder, train_ids = saved_graph
    path = folder / saved
    args = ["--data", str(path), "--num-neighbors", "5,5", "--batch-size", "30", "--epochs", "3", "--lr", "0.03"]
    run = run_recipe([*args, "--report-details"], launcher="torchrun")
    assert run.returncode == 0, run.stderr[-3000:]
    report = run.json()  # only rank 0 prints
    assert report["launcher"] == "torchrun" and report["graph"]["source"] == str(path)
    assert report["graph"]["num_nodes"] == 300 and report["graph"]["num_train"] == 181
    assert_trained(report)
    assert_exact_shards(report, train_ids)


@pytest.mark.finding("ddp-rank-failed")
def test_self_spawn_failing_rank_stops_the_job(neighbor_backend):
    run = run_recipe([*TINY, "--fail-rank", "1"], timeout=FAIL_BOUND + 30)
    assert run.returncode == 1, run.stderr[-3000:]
    assert run.seconds < FAIL_BOUND
    report = run.json()
    assert report["ok"] is False
    assert report["error"]["rank"] == 1 and "--fail-rank" in report["error"]["message"]
    failed = [f for f in report["findings"] if f["id"] == "ddp-rank-failed"]
    assert failed and failed[0]["evidence"]["rank"] == 1 and report["gates"] == {"trained": {"passed": False}}


def test_torchrun_failing_rank_stops_the_job(neighbor_backend):
    run = run_recipe([*TINY, "--fail-rank", "1"], launcher="torchrun", timeout=FAIL_BOUND + 30)
    assert run.returncode != 0
    assert run.seconds < FAIL_BOUND
    assert "injected failure after the first training batch" in run.stderr
    assert '"ok": true' not in run.stdout


# Usage errors leave nothing behind -------------------------------------------------------------

def run_in_fresh_tmpdir(tmp_path, command):
    """Run `command` with TMPDIR set to a new empty folder; -> (CompletedProcess, what the folder holds)."""
    temp = tmp_path / "fresh-tmpdir"
    temp.mkdir()
    env = {key: value for key, value in os.environ.items()
           if key not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                          "TORCHINDUCTOR_CACHE_DIR", "TMP", "TEMP")}
    env["TMPDIR"] = str(temp)
    completed = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT, env=env,
                               cwd=tmp_path, stdin=subprocess.DEVNULL)
    return completed, sorted(os.listdir(temp))


def assert_refused_cleanly(completed, left, finding_id):
    assert completed.returncode == 2, completed.stderr[-2000:]
    assert len(completed.stderr.strip().splitlines()) == 1, completed.stderr[-2000:]
    document = json.loads(completed.stdout)
    assert [f["id"] for f in document["findings"]] == [finding_id] and document["status"] == "usage-error"
    # importing PyG creates $TMPDIR/torchinductor_<user>; a refused command must leave the folder as it was
    assert left == [], left


def torch_saved_dict(path):
    """A torch.save file that loads fine but is no Data object: only torch can tell."""
    import torch
    torch.save({"x": torch.zeros(3)}, path)
    return path


@pytest.mark.parametrize("case", ["bad-flag", "data-missing", "data-not-torch", "data-not-a-Data"])
def test_usage_errors_leave_nothing_in_tmpdir(tmp_path, case):
    args = {"bad-flag": ["--num-neighbors", "10,x"],
            "data-missing": ["--data", str(tmp_path / "no-such-graph.pt")],
            "data-not-torch": ["--data", str(tmp_path / "graph.txt")],
            "data-not-a-Data": ["--data", str(tmp_path / "dict.pt")]}[case]
    (tmp_path / "graph.txt").write_text("srun: error: not a graph\n")
    if case == "data-not-a-Data":
        torch_saved_dict(tmp_path / "dict.pt")
    completed, left = run_in_fresh_tmpdir(tmp_path, [sys.executable, str(SCRIPT), "--nprocs", "2", *args])
    assert_refused_cleanly(completed, left, "ddp-usage-error")


def test_missing_torch_geometric_leaves_nothing_in_tmpdir(tmp_path):
    # torch importable, torch_geometric not: what an install of torch alone looks like to the recipe.
    command = [sys.executable, "-c",
               "import runpy, sys; sys.modules['torch_geometric'] = None; "
               f"sys.argv = [{str(SCRIPT)!r}]; runpy.run_path(sys.argv[0], run_name='__main__')"]
    completed, left = run_in_fresh_tmpdir(tmp_path, command)
    assert_refused_cleanly(completed, left, "ddp-stack-missing")


@pytest.mark.finding("ddp-stack-missing")
def test_interpreter_without_torch_leaves_nothing_in_tmpdir(tmp_path):
    from conftest import pyenv_python
    python = pyenv_python("3.11", with_torch=False)
    completed, left = run_in_fresh_tmpdir(tmp_path, [str(python), str(SCRIPT)])
    assert_refused_cleanly(completed, left, "ddp-stack-missing")
    # torch pinned to its CPU build (an unpinned or untagged pin pulls PyPI's CUDA build on Linux)
    fix = json.loads(completed.stdout)["findings"][0]["fix"]
    assert fix.startswith("%s -m pip install torch==2.13.0+cpu --index-url https://download.pytorch.org/whl/cpu && "
                          "%s -m pip install torch_geometric  # " % (python, python)), fix
    assert fix.endswith("check_sampling_backends.py --require-neighbor-backend")
