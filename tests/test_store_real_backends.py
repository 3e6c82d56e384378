"""The store checker on stores over real systems, started by the tests: SQLite (stdlib), memory-mapped
files (torch.load(mmap=True), numpy.memmap), Debian's redis-server on a loopback port, and Kuzu with its
own PyG backend. Each in a correct form (the checker passes it) and broken the way real clients break
(tests/support/real_stores.py says how). The copyable store the references link, references/examples/sqlite_store.py,
is checked too.

Every case is the checker as a subprocess, judged by its exit code and finding ids. The forked-worker
batch needs a sampling backend (pyg-lib or torch-sparse); cases that break only there skip without one.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import strict_json
from support.helpers import live_processes

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "scripts", "check_store_contract.py")
STORES = "tests/support/real_stores.py"
DOC_STORE = os.path.join(REPO, "references", "examples", "sqlite_store.py")
REDIS_ENABLE = "apt-get install -y redis-server && pip install redis"
KUZU_ENABLE = "pip install kuzu==0.11.3"
BACKEND_PROBE = ("import torch_geometric.typing as t; "
                 "print('pyg-lib' if t.WITH_PYG_LIB else 'torch-sparse' if t.WITH_TORCH_SPARSE else '')")
MARK = "REAL_STORES_RUN_MARK"  # in every checker's environment, to find anything it left running

# case -> (checker arguments, what it needs)
CASES = {
    "sqlite_id_order": ([STORES + ":sqlite_id_order"], None),
    "sqlite_fixed": ([STORES + ":sqlite_fixed"], None),
    "sqlite_deduplicated": ([STORES + ":sqlite_deduplicated"], None),
    "sqlite_blob_dtype": ([STORES + ":sqlite_blob_dtype"], None),
    "mmap_torch_load": ([STORES + ":mmap_torch_load"], None),
    "mmap_sorted_reads": ([STORES + ":mmap_sorted_reads"], None),
    "redis_store": ([STORES + ":redis_store"], "redis"),
    "redis_loop_thread": ([STORES + ":redis_loop_thread"], "redis"),
    "kuzu_own_backend": ([STORES + ":kuzu_own_backend"], "kuzu"),
    "kuzu_own_graph_store": (["--feature-store", STORES + ":kuzu_query_feature_store",
                              "--graph-store", STORES + ":kuzu_own_graph_store"], "kuzu"),
    "kuzu_query_stores": ([STORES + ":kuzu_query_stores"], "kuzu"),
    "kuzu_inherited_connection": ([STORES + ":kuzu_inherited_connection"], "kuzu"),
    "doc_store": (["./doc_store.py:make_stores"], "doc"),
}


def importable(module):
    return subprocess.run([sys.executable, "-c", "import " + module], capture_output=True).returncode == 0


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_redis(folder):
    """redis-server on 127.0.0.1 and a free port, persisting nothing; -> (process, port)."""
    port = free_port()
    process = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "no", "--dir", str(folder)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return process, port
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("redis-server did not listen on port %d" % port)


def doc_store_source():
    """The SQLite store the scaling reference links ("A store over a real database")."""
    with open(DOC_STORE, encoding="utf-8") as handle:
        return handle.read()


class Run:
    def __init__(self, name, process):
        self.name, self.returncode = name, process.returncode
        self.stderr = process.stderr.decode("utf-8", "replace")
        self.document = strict_json(process.stdout)

    def problems(self):
        """Error and warning ids, less the one that only says this machine has no sampling backend."""
        return sorted({f["id"] for f in self.document["findings"] if f["severity"] in ("error", "warning")}
                      - {"store-sampling-unavailable"})

    def finding(self, finding_id):
        matches = [f for f in self.document["findings"] if f["id"] == finding_id]
        assert matches, "%s: no %s in %s\n%s" % (self.name, finding_id, self.document["findings"], self.stderr[-2000:])
        return matches[0]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from support import real_stores as _real_stores
    data = tmp_path_factory.mktemp("real_stores")
    _real_stores.write_all(str(data))
    available = {"doc": True}
    available["kuzu"] = importable("kuzu")
    if available["kuzu"]:
        _real_stores.write_kuzu(str(data))
    doc = tmp_path_factory.mktemp("doc_store")
    (doc / "doc_store.py").write_text(doc_store_source())
    built = subprocess.run([sys.executable, "doc_store.py"], cwd=str(doc), capture_output=True, text=True,
                           timeout=240)
    assert built.returncode == 0, built.stderr[-3000:]
    redis, token = None, uuid.uuid4().hex
    env = dict(os.environ, REAL_STORES_DIR=str(data), **{MARK: token})
    available["redis"] = shutil.which("redis-server") is not None and importable("redis")
    try:
        if available["redis"]:
            redis, port = start_redis(tmp_path_factory.mktemp("redis"))
            _real_stores.write_redis(port)
            env["REAL_STORES_REDIS_PORT"] = str(port)
        jobs = {name: args for name, (args, needs) in CASES.items() if needs is None or available[needs]}

        def check(name):
            cwd = str(doc) if name == "doc_store" else REPO
            process = subprocess.run([sys.executable, SCRIPT, *jobs[name], "--timeout", "5"], cwd=cwd, env=env,
                                     capture_output=True, timeout=300, stdin=subprocess.DEVNULL)
            return Run(name, process)

        with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
            backend = pool.submit(subprocess.run, [sys.executable, "-c", BACKEND_PROBE], capture_output=True,
                                  text=True)
            results = dict(zip(jobs, pool.map(check, jobs)))
        results["backend"] = backend.result().stdout.strip()
        results["survivors"] = processes_with(token)
    finally:
        if redis is not None:
            redis.terminate()
            redis.wait(timeout=30)
    results["available"] = available
    return results


def processes_with(token):
    """Live processes whose environment carries `token`: anything a checker run left behind."""
    return [pid for pid, environ, _ in live_processes() if token.encode() in environ]


def case(runs, name):
    needs = CASES[name][1]
    if needs == "redis" and not runs["available"]["redis"]:
        pytest.skip("redis-server or the redis client is missing; enable with: %s" % REDIS_ENABLE)
    if needs == "kuzu" and not runs["available"]["kuzu"]:
        pytest.skip("kuzu is not installed; enable with: %s" % KUZU_ENABLE)
    return runs[name]


def needs_backend(runs):
    if not runs["backend"]:
        pytest.skip("no neighbour-sampling backend: the forked-worker batch needs one (python "
                    "scripts/check_sampling_backends.py --require-neighbor-backend prints the install line)")


# Correct stores pass, in the main process and in a forked worker ------------------------

@pytest.mark.parametrize("name", ["sqlite_fixed", "mmap_torch_load", "redis_store", "kuzu_query_stores",
                                  "doc_store"])
def test_correct_store_on_a_real_system_passes(runs, name):
    run = case(runs, name)
    assert run.problems() == [], run.document["findings"]
    assert run.returncode == 0 and run.document["ok"] is True
    if runs["backend"]:
        assert run.document["sampling"]["status"] == "ok", run.document["sampling"]
        assert run.document["worker_sampling"]["status"] == "ok", run.document["worker_sampling"]
        assert run.document["worker_sampling"]["start_method"] == "fork"


@pytest.mark.finding("store-indexed-read-wrong")
def test_thread_bound_sqlite_store_in_id_order_gets_exactly_the_ordering_finding(runs):
    run = case(runs, "sqlite_id_order")
    assert run.returncode == 1 and run.problems() == ["store-indexed-read-wrong"], run.document["findings"]
    assert "same thread" not in json.dumps(run.document)  # no thread errors: calls run where the store lives
    misread = {f["evidence"]["misread"] for f in run.document["findings"] if f["id"] == "store-indexed-read-wrong"}
    assert misread == {"rows in id order, repeated ids collapsed (what SELECT ... WHERE id IN (...) returns)"}
    assert run.finding("store-indexed-read-wrong")["evidence"]["index"] == [39, 0, 20, 0]


# Broken the way real clients break ---------------------------------------------------------

@pytest.mark.parametrize("name, finding_id, evidence", [
    ("sqlite_deduplicated", "store-indexed-read-wrong", {"attr": "x", "misread": "repeated ids collapsed"}),
    ("mmap_sorted_reads", "store-indexed-read-wrong", {"attr": "x", "misread": "rows in id order"}),
    ("sqlite_blob_dtype", "store-tensor-size-mismatch", {"attr": "x", "get_tensor_size": [40, 4],
                                                         "tensor_shape": [40, 2]}),
    ("kuzu_own_backend", "store-call-crashed", {"call": 'feature_store.get_tensor(["paper", "id"], index=None)',
                                                "signal": "SIGSEGV"}),
    ("kuzu_own_graph_store", "store-call-failed", {"call": "get_edge_index()",
                                                   "error": "IndexError: unordered_map::at"}),
])
@pytest.mark.finding("store-call-failed", "store-tensor-size-mismatch")
def test_broken_real_store_gets_its_finding(runs, name, finding_id, evidence):
    run = case(runs, name)
    assert run.returncode == 1
    expected = [finding_id]
    if name == "kuzu_own_graph_store" and runs["backend"]:
        # the loader's own read of the edges then crashes the process (SIGSEGV), reported as such
        crashed = run.finding("store-sampling-failed")["evidence"]["crashed"]
        assert crashed["signal"] == "SIGSEGV" and crashed["call"].startswith("NeighborLoader")
        expected = sorted([finding_id, "store-sampling-failed"])
    assert run.problems() == expected, run.document["findings"]
    matches = [f for f in run.document["findings"] if f["id"] == finding_id
               and all(f["evidence"].get(k) == v for k, v in evidence.items())]
    assert matches, (evidence, run.document["findings"])


@pytest.mark.parametrize("name, error", [
    ("redis_loop_thread", "DataLoader timed out"),       # the event-loop thread did not survive fork()
    ("kuzu_inherited_connection", "DataLoader timed out"),  # Kuzu's Database is not fork-safe
])
@pytest.mark.finding("store-fork-unsafe")
def test_store_that_breaks_only_in_a_forked_worker_is_named_as_such(runs, name, error):
    run = case(runs, name)
    needs_backend(runs)
    assert run.document["sampling"]["status"] == "ok"  # the same batch passes in the main process
    assert run.problems() == ["store-fork-unsafe"], run.document["findings"]
    found = run.finding("store-fork-unsafe")
    assert error in found["evidence"]["error"]
    assert "os.getpid()" in found["fix"] and "worker_init_fn" in found["fix"]


def test_no_checker_leaves_anything_running(runs):
    assert runs["survivors"] == []


def test_every_real_backend_run_is_one_json_document_with_the_exit_code(runs):
    for name in CASES:
        run = runs.get(name)
        if run is None:
            continue
        assert run.document["exit_code"] == run.returncode in (0, 1), (name, run.stderr[-2000:])
        assert run.document["checker"]["read_only"] is True
