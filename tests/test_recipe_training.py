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


# Loaded in every process of a run (sitecustomize on PYTHONPATH): notes each import of the skill's own packages,
# in a file named by the importing process's pid, with whether a process group was live at that moment.
IMPORT_LOG = """\
import os, sys
def _note(event, args):
    if event == "import" and args[0].split(".")[0] in ("diagnostics_core", "ddp_recipe"):
        distributed = sys.modules.get("torch.distributed")
        live = bool(distributed and distributed.is_available() and distributed.is_initialized())
        with open(os.path.join(os.environ["RECIPE_IMPORT_LOG"], str(os.getpid())), "a") as handle:
            handle.write("%s %s\\n" % (args[0], live))
sys.addaudithook(_note)
"""


def run_recipe(args, launcher="spawn", env_extra=None, timeout=RUN_TIMEOUT, python_prefix=None, watch=None,
               stderr=True):
    """Run the recipe in its own session; kill the whole session if it overruns. With `watch` (a folder), the
    run's TMPDIR is watch/tmp and every process notes the skill packages it imports in watch/imports."""
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
           if key not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                          "PYTHONPATH", "TMP", "TEMP", "TORCHINDUCTOR_CACHE_DIR")}
    env["DDP_RECIPE_TEST_RUN"] = marker
    if watch is not None:
        for name in ("tmp", "imports", "site"):
            (watch / name).mkdir()
        (watch / "site" / "sitecustomize.py").write_text(IMPORT_LOG)
        env.update(TMPDIR=str(watch / "tmp"), RECIPE_IMPORT_LOG=str(watch / "imports"), PYTHONPATH=str(watch / "site"))
    env.update(env_extra or {})
    if not stderr:  # the way a shell runs it with 2>&-: every process inherits a closed descriptor 2
        command = ["bash", "-c", '"$@" 2>&-', "bash", *command]
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        stdout, stderr_text = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr_text = process.communicate()
        pytest.fail(f"{launcher} run did not finish within {timeout}s; stderr tail:\n{stderr_text[-3000:]}")
    seconds = time.monotonic() - started
    completed = subprocess.CompletedProcess(command, process.returncode, stdout, stderr_text)

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


def skill_imports(watch):
    """{pid: [(module, whether a process group was live)]} of every process that imported the skill's packages."""
    found = {}
    for path in (watch / "imports").iterdir():
        found[int(path.name)] = [(line.split()[0], line.split()[1] == "True") for line in path.read_text().splitlines()]
    return found


@pytest.fixture(scope="module")
def spawn_run(neighbor_backend, tmp_path_factory):
    watch = tmp_path_factory.mktemp("spawn_run")
    return run_recipe([*TINY, "--report-details"], watch=watch), watch


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
                 "--master-addr", "--master-port", "--seed", "--timeout", "--fail-rank", "--report-details",
                 "--load-per-rank"):
        assert flag in text, flag
    assert "exit codes:" in text and "torchrun --nproc_per_node 2" in text
    for code in ("0  every rank", "1  the job failed", "2  usage error"):
        assert code in text, code


@pytest.mark.finding("neighbor-sampling-unavailable")
def test_missing_sampling_backend_fails_fast_before_spawning():
    # Hide both backends from PyG the way a missing install would: imports raise ImportError.
    prefix = [sys.executable, "-c",
              "import runpy, sys; sys.modules['pyg_lib'] = None; sys.modules['torch_sparse'] = None; "
              f"sys.argv = [{str(SCRIPT)!r}] + sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"]
    run = run_recipe(["--nprocs", "2"], launcher="prepared", python_prefix=prefix)
    assert run.returncode == 1
    report = run.json()
    assert report["ok"] is False and report["gates"] == {"trained": {"passed": False}}
    finding = report["findings"][0]
    assert finding["id"] == "neighbor-sampling-unavailable"
    assert finding["fix"] == "python3 %s --require-neighbor-backend" % (ROOT / "scripts" / "check_sampling_backends.py")
    assert "spawning" not in run.stderr  # failed in the parent, no worker started


def test_self_spawn_two_ranks_train_on_disjoint_shards(spawn_run):
    run, _ = spawn_run
    assert run.returncode == 0, run.stderr[-3000:]
    report = run.json()
    assert report["launcher"] == "spawn" and report["input"] == "data"
    assert report["graph"]["source"] == "synthetic"
    assert_trained(report)
    assert_exact_shards(report)
    # Shards of 121 and 120 seeds: 5 and 4 batches, and still no hang.
    assert [r["batches_per_epoch"][0] for r in report["ranks"]] == [5, 4]


def test_self_spawned_ranks_import_nothing_of_the_skill_and_leave_no_temp_files(spawn_run):
    """The ranks run the recipe's own code only: the skill's packages are imported by the spawning parent (the
    diagnostics around the job), never in a rank. PyG's rendered templates and the run's scratch are gone."""
    run, watch = spawn_run
    imports = skill_imports(watch)
    ranks = [rank["pid"] for rank in run.json()["ranks"]]
    assert imports and not set(imports) & set(ranks), (imports, ranks)
    assert sorted(os.listdir(watch / "tmp")) == []


def test_store_fed_batches_match_data_fed_batches_with_stderr_closed(spawn_run):
    """The store run has its stderr closed, as `2>&-` does: the ranks inherit it, their progress lines must not
    land in stdout nor break them; the document is the same as with stderr open."""
    store_run = run_recipe([*TINY, "--report-details", "--store"], stderr=False)
    assert store_run.returncode == 0, store_run.stdout[-3000:]
    store, data = store_run.json(), spawn_run[0].json()  # one document and nothing else: no "[rank 0]" line
    assert store["input"] == "store" and data["input"] == "data"
    assert_trained(store)
    for store_rank, data_rank in zip(store["ranks"], data["ranks"]):
        assert store_rank["train_seeds"] == data_rank["train_seeds"]
        # [seeds, sampled nodes, sampled edges] of every first-epoch batch.
        assert store_rank["first_epoch_batches"] == data_rank["first_epoch_batches"]
        assert len(store_rank["first_epoch_batches"]) == store_rank["batches_per_epoch"][0]


@pytest.mark.parametrize("saved, workers", [("graph.pt", "0"), ("graph.dict.pt", "1")], ids=["Data", "to_dict"])
def test_torchrun_two_ranks_on_a_saved_data_file(neighbor_backend, saved_graph, saved, workers, temp_dir):
    """Each rank loads the file itself; rank 0 prints, having imported the skill's packages only once its
    process group was gone; the ranks' temp files (templates; pymp-* of loader workers) are gone too."""
    folder, train_ids = saved_graph
    path = folder / saved
    args = ["--data", str(path), "--num-neighbors", "5,5", "--batch-size", "30", "--epochs", "3", "--lr", "0.03",
            "--num-workers", workers]
    run = run_recipe([*args, "--report-details"], launcher="torchrun", watch=temp_dir)
    assert run.returncode == 0, run.stderr[-3000:]
    report = run.json()  # only rank 0 prints
    assert report["launcher"] == "torchrun" and report["graph"]["source"] == str(path)
    assert report["graph"]["num_nodes"] == 300 and report["graph"]["num_train"] == 181
    assert_trained(report)
    assert_exact_shards(report, train_ids)
    imports = skill_imports(temp_dir)
    rank0, rank1 = [rank["pid"] for rank in report["ranks"]]
    assert rank1 not in imports and imports[rank0] and not any(live for _, live in imports[rank0]), imports
    ours = [name for name in os.listdir(temp_dir / "tmp") if not name.startswith("torchelastic_")]  # torchrun's own
    assert ours == []


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
    assert '"ok": true' not in run.stdout and '"ok":true' not in run.stdout
