"""scripts/profile_loader.py (issue 24), run the way an agent runs it.

Runs that measure use small synthetic graphs and small budgets; nothing here asserts a duration
except the tool's own reported elapsed_s against its budget (plus BUDGET_SLACK_S). Cases that a
2-core test machine cannot produce on demand (oversubscription, affinity that hurts, a small
/dev/shm) replay the profiler's rules on measured-looking facts, as tests/test_checker_diagnoses.py does
for the checker. Each test marks the finding ids it reproduces with @pytest.mark.finding(...).
"""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from support import hostile_fakes as hostile
from conftest import clean_env, invoke_tool, load_modules, strict_json, tree_state

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(REPO, "scripts")
SCRIPT = os.path.join(SCRIPTS, "profile_loader.py")
TROUBLESHOOTING = os.path.join(REPO, "references", "troubleshooting.md")
SMALL = "20000,200000,32"  # nodes, edges, features: 20 batches of 1024 seeds per epoch
# The tool's own elapsed_s may pass --budget by ending processes and rendering after the deadline.
BUDGET_SLACK_S = 3.0
ENABLE_SAMPLING = ("~/.venvs/scalable-distributed/bin/python -m pip install --no-build-isolation "
                   "torch-scatter==2.1.2 torch-sparse==0.6.18")
CONFIG_KEYS = {"settings", "batches_per_s", "seeds_per_s", "first_batch_s", "peak_rss_mb"}


@pytest.fixture(scope="module")
def sampling():
    import importlib.util  # found, not imported: importing PyG here would cost the suite seconds
    if not (importlib.util.find_spec("pyg_lib") or importlib.util.find_spec("torch_sparse")):
        pytest.skip("loader-no-sampler-backend: NeighborLoader needs pyg-lib or torch-sparse to sample; "
                    "enable with: " + ENABLE_SAMPLING)


@pytest.fixture
def token():
    """A marker in the tool's environment that every process it starts inherits."""
    value = uuid.uuid4().hex
    yield value
    hostile.end_survivors(value)


def profile(*args, cwd=None, env=None, token=None, timeout=None, python=None):
    env = dict(env if env is not None else clean_env())
    env.pop("OMP_NUM_THREADS", None)  # the default loader is torch's default
    if token:
        env[hostile.TOKEN_VARIABLE] = token
    budget = float(args[args.index("--budget") + 1]) if "--budget" in args else 60.0
    result = invoke_tool("profile_loader.py", *args, env=env, cwd=cwd, python=python,
                         timeout=timeout or budget * 4 + 60)
    if result.returncode != 2:
        assert result.json["tool"]["elapsed_s"] <= budget + BUDGET_SLACK_S, result.json["tool"]
    return result


def load_package():
    """The profiler's package, imported here to replay its rules; writes no bytecode."""
    load_modules(["loader_profiler.advice", "loader_profiler.rules", "loader_profiler.run"])
    return sys.modules["loader_profiler"]


STORE_MODULE = """
import os, signal, time, torch
from torch_geometric.data import Data
from torch_geometric.distributed import LocalFeatureStore, LocalGraphStore

def graph():
    g = torch.Generator().manual_seed(0)
    return Data(x=torch.randn(4000, 8, generator=g), edge_index=torch.randint(0, 4000, (2, 40000), generator=g))

def make_stores(feature_cls=LocalFeatureStore):
    data = graph()
    features = feature_cls.from_data(torch.arange(data.num_nodes), x=data.x)
    edges = LocalGraphStore.from_data(torch.arange(data.num_edges), data.edge_index, data.num_nodes)
    return features, edges

def broken():
    raise ConnectionError("feature service at 10.0.0.1:9000 refused the connection")

class Hanging(LocalFeatureStore):
    def _get_tensor(self, attr):
        time.sleep(3600)

class Segfaulting(LocalFeatureStore):
    def _get_tensor(self, attr):
        os.kill(os.getpid(), signal.SIGSEGV)

class MainProcessOnly(LocalFeatureStore):
    # A client that cannot be used from a forked worker (a connection opened in the parent).
    def _get_tensor(self, attr):
        if os.getpid() != self.owner:
            raise RuntimeError("connection used from a forked process")
        return super()._get_tensor(attr)

def hanging():
    return make_stores(Hanging)

def segfaulting():
    return make_stores(Segfaulting)

def main_process_only():
    features, edges = make_stores(MainProcessOnly)
    features.owner = os.getpid()
    return features, edges

def slow_to_build():
    time.sleep(3600)
"""


@pytest.fixture
def stores(tmp_path):
    (tmp_path / "mystores.py").write_text(STORE_MODULE)
    return tmp_path


# ---------------------------------------------------------------------------
# Contract: registry, usage, internal errors
# ---------------------------------------------------------------------------

def test_finding_registry_tests_and_docs_agree():
    listed = subprocess.run([sys.executable, SCRIPT, "--list-findings"], capture_output=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    ids = {entry["id"] for entry in strict_json(listed.stdout)}
    with open(TROUBLESHOOTING, encoding="utf-8") as handle:
        text = handle.read()
    block = text.split("\n## Loader profiler (`scripts/profile_loader.py`)\n", 1)[1].split("\n## ", 1)[0]
    sections = re.split(r"^### ", block, flags=re.M)[1:]
    documented = {section.split("\n", 1)[0].strip() for section in sections}
    assert ids == documented  # each id's marked test: tests/test_contract_every_tool.py
    for section in sections:
        name = section.split("\n", 1)[0]
        assert len(section.rstrip().splitlines()) <= 70, name
        for label in ("**Symptom:**", "**Cause:**", "**Fix:**"):
            assert label in section, (name, label)
    explained = subprocess.run([sys.executable, SCRIPT, "--explain", "loader-affinity-hurts"],
                               capture_output=True, text=True, timeout=60)
    assert explained.returncode == 0 and explained.stdout.startswith("### loader-affinity-hurts\n")


@pytest.mark.finding("profile-loader-usage-error")
@pytest.mark.parametrize("args", [["--bogus"], ["--synthetic", "10,5"], ["--synthetic", SMALL, "--budget", "0"],
                                  [], ["--data", "/nonexistent/graph.pt"], ["--explain", "no-such-id"],
                                  ["--synthetic", SMALL, "--input-edges", "a,b,c"],
                                  ["--synthetic", SMALL, "--ranks-per-node", "999"]])
def test_bad_command_line_is_one_stderr_line_one_document_exit_2(args):
    completed = subprocess.run([sys.executable, SCRIPT] + args, capture_output=True, timeout=60,
                               env=clean_env(), stdin=subprocess.DEVNULL)
    assert completed.returncode == 2
    assert len(completed.stderr.decode().strip().splitlines()) == 1
    document = strict_json(completed.stdout)
    assert document["status"] == "usage-error" and document["exit_code"] == 2
    assert [f["id"] for f in document["findings"]] == ["profile-loader-usage-error"]


# ---------------------------------------------------------------------------
# Runs that measure nothing (input problems, refusals, a tiny budget) start together in one module
# fixture: they only wait on imports, and the tests read their results.
# ---------------------------------------------------------------------------

FILES = textwrap.dedent("""
    import os, sys, torch
    from torch_geometric.data import Data
    folder = sys.argv[1]
    g = torch.Generator().manual_seed(0)
    data = Data(x=torch.randn(5000, 16, generator=g), edge_index=torch.randint(0, 5000, (2, 50000), generator=g),
                y=torch.randint(0, 4, (5000,), generator=g), train_mask=torch.rand(5000, generator=g) < 0.5)
    torch.save(data, os.path.join(folder, "graph.pt"))
    torch.save({"w": torch.ones(2)}, os.path.join(folder, "weights.pt"))

    class Payload:  # what a pickle may carry: a call that runs as the file loads
        def __reduce__(self):
            return (os.system, ("touch " + os.path.join(folder, "payload-ran"),))
    data.payload = Payload()
    torch.save(data, os.path.join(folder, "payload.pt"))
""")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """graph.pt (a Data with a train_mask), weights.pt (not a graph), payload.pt (a pickled call)."""
    folder = tmp_path_factory.mktemp("inputs")
    (folder / "mystores.py").write_text(STORE_MODULE)
    subprocess.run([sys.executable, "-c", FILES, str(folder)], check=True, timeout=300,
                   env=clean_env({"PYTHONDONTWRITEBYTECODE": "1"}))
    return folder


@pytest.fixture(scope="module")
def quick_runs(inputs, venv_factory, tmp_path_factory):
    from concurrent.futures import ThreadPoolExecutor
    site = tmp_path_factory.mktemp("site")
    # A sitecustomize that ends the profiler's child as it starts, saying nothing.
    (site / "sitecustomize.py").write_text(
        "import os, sys\nif '--internal-child-profile' in sys.argv:\n    os._exit(0)\n")
    no_torch = venv_factory("no-torch", exclude=("torch",))
    no_sampler = venv_factory("no-sampler", exclude=("torch_sparse", "pyg_lib", "libpyg"))
    cases = {
        "internal": dict(args=["--synthetic", SMALL, "--budget", "20"], env=clean_env({"PYTHONPATH": str(site)})),
        "no-torch": dict(args=["--synthetic", SMALL], python=no_torch),
        "no-sampler": dict(args=["--synthetic", "2000,10000,8", "--budget", "20"], python=no_sampler),
        "tiny-budget": dict(args=["--synthetic", SMALL, "--budget", "2"]),
        "payload": dict(args=["--data", inputs / "payload.pt", "--budget", "20"], cwd=inputs),
        "weights": dict(args=["--data", inputs / "weights.pt", "--budget", "20"]),
        "broken-store": dict(args=["--store", "mystores:broken", "--budget", "20"], cwd=inputs),
        "no-such-seeds": dict(args=["--data", inputs / "graph.pt", "--input-nodes", "val_mask", "--budget", "20"]),
    }
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {name: pool.submit(profile, *case.pop("args"), **case) for name, case in cases.items()}
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.finding("profile-loader-internal-error")
def test_child_that_vanishes_without_a_word_is_an_internal_error(quick_runs):
    result = quick_runs["internal"]
    assert result.returncode == 3
    found = result.only("profile-loader-internal-error")
    assert "traceback" in found["evidence"] and found["fix"] == "report it with this JSON attached"


@pytest.mark.finding("loader-stack-missing")
def test_interpreter_without_torch_is_refused(quick_runs):
    result = quick_runs["no-torch"]
    assert result.returncode == 2
    found = result.only("loader-stack-missing")
    assert set(found["evidence"]["missing"]) == {"torch", "torch_geometric"}
    # torch pinned to its CPU build (PyPI's default Linux torch is a multi-GB CUDA one), then PyG and psutil
    assert "-m pip install torch==2.13.0+cpu --index-url https://download.pytorch.org/whl/cpu && " in found["fix"]
    assert "-m pip install torch_geometric psutil  # " in found["fix"] and "check_sampling_backends.py" in found["fix"]


def unmeasured(result, finding_id):
    """The one finding of a run that measured nothing (exit 1, the gate "measured" failed)."""
    assert result.returncode == 1
    assert result.json["gates"]["measured"]["passed"] is False
    return result.only(finding_id)


@pytest.mark.finding("loader-no-sampler-backend")
def test_without_a_sampling_backend_nothing_is_measured_and_the_checker_is_named(quick_runs):
    found = unmeasured(quick_runs["no-sampler"], "loader-no-sampler-backend")
    assert "check_sampling_backends.py --require-neighbor-backend" in found["fix"]
    # The graph was still loaded: input problems come first.
    assert quick_runs["no-sampler"].json["graph"]["num_nodes"] == 2000


@pytest.mark.finding("loader-budget-short")
def test_a_budget_too_small_to_start_still_gives_json_within_it(quick_runs):
    found = unmeasured(quick_runs["tiny-budget"], "loader-budget-short")
    assert found["evidence"]["cut_at_deadline"] is True
    assert found["fix"].endswith("--budget 30")


@pytest.mark.finding("loader-data-unsafe-pickle")
def test_a_file_that_needs_pickle_is_refused_without_running_it(quick_runs, inputs):
    found = unmeasured(quick_runs["payload"], "loader-data-unsafe-pickle")
    assert "weights_only" in found["evidence"]["error"]
    # The fix re-saves from the script that made the file; it never loads the refused file.
    assert "weights_only=False" not in found["fix"] and "to_dict()" in found["fix"]
    assert not (inputs / "payload-ran").exists()


@pytest.mark.finding("loader-data-load-failed")
def test_a_file_that_is_not_a_graph_is_reported(quick_runs):
    found = unmeasured(quick_runs["weights"], "loader-data-load-failed")
    assert "not a Data or HeteroData" in found["evidence"]["error"]


@pytest.mark.finding("loader-store-failed")
def test_a_store_factory_that_raises_is_reported(quick_runs):
    found = unmeasured(quick_runs["broken-store"], "loader-store-failed")
    assert "refused the connection" in found["evidence"]["error"]
    # The fix hands the pair to the store checker; it does not import the module itself.
    assert "check_store_contract.py" in found["fix"] and "import " not in found["fix"]


@pytest.mark.finding("loader-setup-failed")
def test_seeds_from_a_missing_attribute_are_reported(quick_runs):
    found = unmeasured(quick_runs["no-such-seeds"], "loader-setup-failed")
    assert "train_mask" in found["evidence"]["attributes"]
    assert "--input-nodes NAME" in found["fix"]


def sigterm_when(command, cwd, token, processes):
    """Start the tool, send SIGTERM once `processes` carry the token, -> what is left after it ends."""
    process = subprocess.Popen(command, cwd=str(cwd), env=clean_env({hostile.TOKEN_VARIABLE: token}),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    deadline = time.time() + 90
    while time.time() < deadline and len(hostile.survivors(token)) < processes:
        time.sleep(0.1)
    seen = len(hostile.survivors(token))
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=30)
    time.sleep(0.5)
    return seen, hostile.survivors(token)


def test_sigterm_while_user_code_runs_leaves_no_process(stores, token):
    # The tool, its coordinator and a rank blocked in the store factory.
    seen, left = sigterm_when([sys.executable, SCRIPT, "--store", "mystores:slow_to_build", "--budget", "60"],
                              stores, token, 3)
    assert seen >= 3 and left == []


def test_sigterm_while_workers_run_leaves_no_process(sampling, tmp_path, token):
    # The tool, its coordinator, a rank and at least one DataLoader worker.
    seen, left = sigterm_when([sys.executable, SCRIPT, "--synthetic", SMALL, "--budget", "60"], tmp_path, token, 4)
    assert seen >= 4 and left == []


# ---------------------------------------------------------------------------
# Real measurements
# ---------------------------------------------------------------------------

REMEASURE = textwrap.dedent("""
    # The recommendation, measured apart from the profiler: default and recommended loaders
    # alternate (A,B then B,A), each over a whole epoch (so an epoch's start-up counts).
    import contextlib, json, statistics, sys, time, torch
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader
    advice, nodes, edges, features = json.loads(sys.argv[1]), *map(int, sys.argv[2].split(","))
    g = torch.Generator().manual_seed(0)
    data = Data(x=torch.randn(nodes, features, generator=g), edge_index=torch.randint(0, nodes, (2, edges), generator=g),
                y=torch.randint(0, 10, (nodes,), generator=g))
    default_threads = torch.get_num_threads()
    loaders = {"default": (NeighborLoader(data, num_neighbors=[10, 5], batch_size=1024, shuffle=True), default_threads),
               "recommended": (NeighborLoader(data, num_neighbors=[10, 5], batch_size=1024, shuffle=True,
                                              **advice["settings"]), int(advice["env"]["OMP_NUM_THREADS"]))}
    rates = {name: [] for name in loaders}
    for round_index in range(3):
        for name in (sorted(loaders) if round_index % 2 == 0 else sorted(loaders, reverse=True)):
            loader, threads = loaders[name]
            torch.set_num_threads(threads)
            cores = advice["loader_cores"] and name == "recommended"
            started, count = time.perf_counter(), 0
            with loader.enable_cpu_affinity(advice["loader_cores"][0]) if cores else contextlib.nullcontext():
                for batch in loader:  # one whole epoch, its start included
                    count += 1
            rates[name].append(count / (time.perf_counter() - started))
    print(json.dumps({name: {"median": statistics.median(r), "spread": max(r) - min(r), "samples": r}
                      for name, r in rates.items()}))
""")


def remeasure(advice, size):
    completed = subprocess.run([sys.executable, "-c", REMEASURE, json.dumps(advice), size], capture_output=True,
                               text=True, timeout=300, env=clean_env({"PYTHONDONTWRITEBYTECODE": "1"}))
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout)


def test_a_model_s_convs_leave_nothing_in_the_temp_dir(sampling, tmp_path):
    # PyG renders each conv's propagate (GAT's edge_updater too) into a .py file in the temp dir and never
    # removes it: a day of test runs had left 983 in /tmp. The ranks remove their own.
    temp, work = tmp_path / "tmp", tmp_path / "cwd"
    temp.mkdir()
    work.mkdir()
    result = profile("--synthetic", "2000,20000,16", "--stand-in", "gat,2,16", "--budget", "10", cwd=work,
                     env=clean_env({"TMPDIR": str(temp)}))
    assert result.returncode in (0, 1), result.stderr[-3000:]
    assert result.json["request"]["loop"]["kind"] == "stand-in"
    assert [b for b in result.json["blocks"] if b["steps"] >= 1], result.json["findings"]
    assert sorted(entry.name for entry in temp.iterdir()) == [] and list(work.iterdir()) == []


def test_synthetic_run_measures_recommends_and_leaves_nothing_behind(sampling, tmp_path, token):
    watched = [tmp_path, SCRIPTS]
    before = tree_state(*watched)
    result = profile("--synthetic", SMALL, "--budget", "20", "--loader-only", cwd=tmp_path, token=token)
    assert hostile.survivors(token) == []
    assert tree_state(*watched) == before  # no file in the working directory, no __pycache__ in the skill
    assert result.returncode == 0, result.stderr[-3000:]
    document = result.json
    assert document["gates"]["measured"]["passed"] is True
    measured = [c for c in document["configs"] if c["status"] == "ok"]
    # Issue 31: persistent worker counts are measured with the main process's threads as a second axis.
    assert {c["name"] for c in measured} >= {"default", "workers-1-threads-1", "workers-2-threads-1"}
    for config in measured:
        assert CONFIG_KEYS <= set(config)
        low, high = config["batches_per_s_range"]
        assert low <= config["batches_per_s"] <= high and config["peak_rss_mb"] > 0
    split = document["breakdown"]
    assert split["status"] == "ok" and split["sample_s"] > 0 and split["fetch_s"] > 0
    assert split["batch_s"] == pytest.approx(split["sample_s"] + split["fetch_s"] + split["collate_s"])
    advice = document["recommendation"]
    assert {"settings", "env", "speedup", "code"} <= set(advice)
    under_load = advice.get("verdict") == "under-load"  # faster for the load measured only: said so
    assert ("loader-faster-settings" in result.ids()) == (advice["beats_default"] and not under_load)
    assert ("loader-load-decides" in result.ids()) or not under_load
    assert ("loader-default-is-best" in result.ids() or "loader-too-busy-to-tell" in result.ids()) != \
        advice["beats_default"]  # issue 31: on a busy machine it may say it cannot tell
    if not advice["beats_default"]:
        assert advice["settings"] == {} and advice["speedup"] == 1.0
    again = remeasure(advice, SMALL)
    noise = max(again["recommended"]["spread"], again["default"]["spread"])
    assert again["recommended"]["median"] + noise >= again["default"]["median"], again


def test_saved_data_with_seed_mask_and_markdown_report(sampling, inputs):
    completed = subprocess.run([sys.executable, SCRIPT, "--data", str(inputs / "graph.pt"), "--input-nodes",
                                "train_mask", "--format", "markdown", "--budget", "15", "--loader-only"], capture_output=True,
                               text=True, timeout=120, env=clean_env(), stdin=subprocess.DEVNULL)
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = completed.stdout
    assert report.startswith("### Loader profile (profile_loader ")
    assert "| config | settings |" in report and "| default |" in report
    assert "```python\n" in report and "NeighborLoader(data, num_neighbors=[10, 5], input_nodes=data.train_mask" in report


@pytest.mark.finding("loader-config-failed")
def test_store_pair_is_profiled_and_a_configuration_that_fails_is_named(sampling, stores):
    before = tree_state(stores)
    result = profile("--store", "mystores:main_process_only", "--budget", "20", "--loader-only", cwd=stores)
    assert tree_state(stores) == before  # the user's module was imported without a __pycache__
    assert result.returncode == 0, result.stderr[-3000:]
    by_name = {c["name"]: c for c in result.json["configs"]}
    assert by_name["default"]["status"] == "ok"
    # Fetching in the main process keeps the store's client out of the workers: that one works.
    assert by_name["workers-1-filter-in-main"]["status"] == "ok"
    assert result.json["graph"]["kind"] == "store"
    failed = result.findings("loader-config-failed")
    assert failed and all("forked process" in f["evidence"]["error"] for f in failed)
    assert all(f["evidence"]["settings"]["num_workers"] > 0 for f in failed)
    assert "(feature_store, graph_store)" in result.json["recommendation"]["code"]


def test_ranks_per_node_measures_concurrent_link_loaders(sampling):
    result = profile("--synthetic", "10000,100000,16", "--link", "--batch-size", "512", "--ranks-per-node", "2",
                     "--budget", "20", "--loader-only")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "LinkNeighborLoader(data, num_neighbors=[10, 5], batch_size=512" in result.json["recommendation"]["code"]
    measured = [c for c in result.json["configs"] if c["status"] == "ok"]
    assert measured and all(len(c["per_rank_batches_per_s"]) == 2 for c in measured)
    for config in measured:  # the aggregate is the ranks' sum, window by window
        assert config["batches_per_s"] == pytest.approx(sum(config["per_rank_batches_per_s"]), rel=0.5)
    # Two ranks share two cores: one worker each at most.
    assert max(c["settings"]["num_workers"] for c in measured) == 1


@pytest.mark.finding("loader-config-hung")
def test_a_store_that_blocks_is_ended_and_reported(sampling, stores, token):
    result = profile("--store", "mystores:hanging", "--budget", "15", cwd=stores, token=token)
    assert hostile.survivors(token) == []
    found = result.only("loader-config-hung")
    assert found["evidence"]["during"] == "prepare the training step"  # the loop's first read of the store
    assert result.returncode == 1


@pytest.mark.finding("loader-rank-crashed")
def test_a_store_that_segfaults_is_reported(sampling, stores, token):
    result = profile("--store", "mystores:segfaulting", "--budget", "15", cwd=stores, token=token)
    assert hostile.survivors(token) == []
    found = result.only("loader-rank-crashed")
    assert found["evidence"]["signal"] == "SIGSEGV"
    assert result.returncode == 1


# ---------------------------------------------------------------------------
# Rules replayed on facts (cases a 2-core test machine cannot produce on demand)
# ---------------------------------------------------------------------------

class Options:
    argv = ["--synthetic", SMALL]
    budget = 20.0
    bounds = property(lambda self: load_package().run.stage_bounds(self.budget, 0.0))
    ranks = 1
    spec = {"synthetic": [20000, 200000, 32], "num_neighbors": [10, 5], "batch_size": 1024, "shuffle": True,
            "link": False, "input_nodes": None, "input_edges": None, "data": None, "store": None}


def config(name, epoch, spread=1.0, steady=None, **settings):
    base = {"num_workers": 0, "persistent_workers": False, "filter_per_worker": True, "pin_memory": False,
            "torch_threads": 2, "affinity": False, "affinity_cores": None}
    base.update(settings)
    steady = steady if steady is not None else epoch
    return {"name": name, "status": "ok", "settings": base, "epoch_batches_per_s": epoch,
            "epoch_batches_per_s_range": [epoch - spread / 2, epoch + spread / 2], "batches_per_s": steady,
            "batches_per_s_range": [steady - spread / 2, steady + spread / 2], "seeds_per_s": steady * 1024,
            "first_batch_s": 0.2, "restart_s": 0.2, "peak_rss_mb": 300.0, "batches": 50}


def replay(configs, **facts):
    package = load_package()
    facts = dict(facts, configs=configs, graph={"batches_per_epoch": 20, "feature_bytes": 2560000,
                                                "num_edges": 200000})
    facts["recommendation"] = package.advice.recommendation(configs, Options.spec, 1)
    return {f["id"]: f for f in package.rules.diagnose(facts, Options())}, facts["recommendation"]


@pytest.mark.finding("loader-faster-settings")
def test_a_win_beyond_the_noise_is_recommended_with_both_medians():
    found, advice = replay([config("default", 10.0), config("workers-2", 20.0, num_workers=2,
                                                            persistent_workers=True)])
    assert advice["config"] == "workers-2" and advice["speedup"] == 2.0
    assert advice["settings"] == {"num_workers": 2, "persistent_workers": True}
    assert found["loader-faster-settings"]["fix"] == advice["code"]
    assert "num_workers=2, persistent_workers=True" in advice["code"]


def test_of_two_wins_equal_within_the_noise_the_cheaper_is_recommended():
    found, advice = replay([config("default", 10.0), config("workers-2", 20.0, num_workers=2, persistent_workers=True),
                            config("default-threads-1", 19.8, torch_threads=1)])
    assert advice["config"] == "default-threads-1" and advice["settings"] == {}
    assert advice["env"] == {"OMP_NUM_THREADS": "1"} and advice["speedup"] == 1.98
    assert advice["fastest_measured"]["config"] == "workers-2"


@pytest.mark.finding("loader-default-is-best")
def test_a_win_within_the_noise_recommends_the_default():
    found, advice = replay([config("default", 10.0, spread=3.0), config("workers-2", 12.0, spread=3.0,
                                                                        num_workers=2, persistent_workers=True)])
    assert advice["config"] == "default" and advice["speedup"] == 1.0 and advice["settings"] == {}
    assert found["loader-default-is-best"]["evidence"]["fastest_measured"]["ratio_to_default"] == 1.2
    assert "loader-faster-settings" not in found


@pytest.mark.finding("loader-threads-oversubscribed")
def test_fewer_threads_measured_faster_is_oversubscription():
    base = dict(num_workers=2, persistent_workers=True, torch_threads=8)
    found, advice = replay([config("default", 10.0, torch_threads=8), config("workers-2", 14.0, **base),
                            config("workers-2-threads-2", 18.0, **dict(base, torch_threads=2))])
    assert found["loader-threads-oversubscribed"]["fix"].startswith("export OMP_NUM_THREADS=2")
    assert advice["env"] == {"OMP_NUM_THREADS": "2"}


@pytest.mark.finding("loader-affinity-hurts")
def test_affinity_measured_slower_is_reported():
    base = dict(num_workers=2, persistent_workers=True)
    found, advice = replay([config("default", 10.0), config("workers-2", 16.0, **base),
                            config("workers-2-affinity", 12.0, affinity=True, affinity_cores=[[0, 1]], **base)])
    assert found["loader-affinity-hurts"]["evidence"]["loader_cores"] == [[0, 1]]
    assert "enable_cpu_affinity" not in advice["code"]


def test_affinity_that_wins_is_in_the_code_with_its_cores():
    base = dict(num_workers=1, persistent_workers=True)
    found, advice = replay([config("default", 10.0), config("workers-1", 13.0, **base),
                            config("workers-1-affinity", 16.0, affinity=True, affinity_cores=[[1]], **base)])
    assert "with loader.enable_cpu_affinity(loader_cores=cores):" in advice["code"]
    assert "cores = [1]" in advice["code"]


@pytest.mark.finding("loader-worker-startup-unpaid")
def test_workers_faster_per_batch_but_not_per_epoch_need_persistence():
    found, _ = replay([config("default", 10.0), config("workers-2-not-persistent", 9.0, steady=16.0,
                                                       num_workers=2)])
    assert "persistent_workers=True" in found["loader-worker-startup-unpaid"]["fix"]


@pytest.mark.finding("loader-shm-too-small")
def test_small_shared_memory_and_bus_errors_are_named():
    host = {"allowed_cores": [0, 1], "shm": {"total_bytes": 64 << 20, "free_bytes": 1 << 20}}
    found, _ = replay([config("default", 10.0)], host=host)
    assert found["loader-shm-too-small"]["severity"] == "warning"
    failed = dict(config("workers-2", 0, num_workers=2), status="failed",
                  error="RuntimeError: DataLoader worker (pid 7) is killed by signal: Bus error.")
    found, _ = replay([config("default", 10.0), failed], host=host)
    assert found["loader-shm-too-small"]["severity"] == "error"
    assert "loader-config-failed" not in found  # the shared-memory finding explains it
    assert "--shm-size" in found["loader-shm-too-small"]["fix"]


@pytest.mark.finding("loader-fetch-bound")
def test_a_batch_mostly_spent_gathering_features_is_fetch_bound():
    split = {"status": "ok", "sample_s": 0.002, "fetch_s": 0.02, "collate_s": 0.001, "batch_s": 0.023}
    found, _ = replay([config("default", 10.0)], breakdown=split)
    assert found["loader-fetch-bound"]["evidence"]["fetch_share"] > 0.6
    assert "loader-sampler-bound" not in found


@pytest.mark.finding("loader-sampler-bound")
def test_a_batch_mostly_spent_sampling_is_sampler_bound():
    split = {"status": "ok", "sample_s": 0.02, "fetch_s": 0.002, "collate_s": 0.001, "batch_s": 0.023}
    found, advice = replay([config("default", 10.0), config("workers-2", 20.0, num_workers=2,
                                                            persistent_workers=True)], breakdown=split)
    assert found["loader-sampler-bound"]["evidence"]["sample_share"] > 0.6
    assert found["loader-sampler-bound"]["fix"].startswith("loader = NeighborLoader(data, num_neighbors=[10, 5], "
                                                           "batch_size=1024, shuffle=True, num_workers=2, ")
    assert "loader-fetch-bound" not in found
    # Where workers did not pay: pyg-lib when it is missing, else a smaller fan-out.
    found, _ = replay([config("default", 10.0)], breakdown=split, backend={"pyg_lib": False, "torch_sparse": True})
    assert "check_sampling_backends.py --require-neighbor-backend" in found["loader-sampler-bound"]["fix"]
    found, _ = replay([config("default", 10.0)], breakdown=split, backend={"pyg_lib": True, "torch_sparse": False})
    assert "num_neighbors=[5, 2]" in found["loader-sampler-bound"]["fix"]
