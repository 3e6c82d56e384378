"""Store code that fights back, and a check stopped half-way (issue 32, classes 2 and 3), run as an
agent runs check_store_contract.py. The stores are PyG's own LocalFeatureStore/LocalGraphStore with one
method replaced by what a hostile or careless store does: raise KeyboardInterrupt or SystemExit(0),
hand back tensors on the meta device, print, or block while the user presses Ctrl-C."""

import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, clean_env, interrupted_finding, strict_json

CHECKER = ROOT / "scripts" / "check_store_contract.py"

STORES = '''
import os, subprocess, sys, tempfile, time
import torch
from torch_geometric.distributed import LocalFeatureStore, LocalGraphStore

MODE = os.environ["HOSTILE_STORE_MODE"]
N = 12


def make():
    nodes = torch.arange(N)
    edges = torch.stack([nodes, (nodes + 1) % N])
    features = LocalFeatureStore.from_data(nodes, x=torch.randn(N, 4), y=torch.randn(N, 2))
    graph = LocalGraphStore.from_data(torch.arange(N), edges, N)
    get_tensor, get_edge_index = features._get_tensor, graph._get_edge_index

    def hostile_get_tensor(attr):
        print("store-print: reading", attr.attr_name)  # a store that prints on stdout
        if MODE == "hostile" and attr.attr_name == "x":
            raise KeyboardInterrupt("the user's client saw a Ctrl-C")
        if MODE == "hostile" and attr.attr_name == "y":
            return torch.empty(N, 2, device="meta")
        if MODE == "block":
            with open(os.path.join(tempfile.mkdtemp(prefix="store-cache-"), "db"), "w") as handle:
                handle.write("what a store keeps in the temp dir")  # never removed: the store is killed
            daemon = subprocess.Popen(["sleep", "300"])
            with open(os.environ["HOSTILE_STORE_PIDS"], "w") as handle:
                handle.write("%d %d" % (os.getpid(), daemon.pid))
            print("store-print: blocking", file=sys.stderr, flush=True)
            time.sleep(300)
        return get_tensor(attr)

    def hostile_get_tensor_size(attr):
        if MODE == "hostile":
            sys.exit(0)  # a client library that exits "successfully" on a lost connection
        return get_tensor(attr).size()

    def hostile_get_edge_index(attr):
        if MODE == "hostile":
            return tuple(part.to("meta") for part in get_edge_index(attr))
        return get_edge_index(attr)

    features._get_tensor = hostile_get_tensor
    features._get_tensor_size = hostile_get_tensor_size
    graph._get_edge_index = hostile_get_edge_index
    return features, graph
'''


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile_stores")
    (folder / "hostile_stores.py").write_text(STORES)
    return folder


def command(stores, *extra):
    return [sys.executable, str(CHECKER), "hostile_stores:make", "--path", str(stores), "--skip-sampling",
            *extra]


def check(stores, mode, *extra):
    completed = subprocess.run(command(stores, *extra), capture_output=True, timeout=180, stdin=subprocess.DEVNULL,
                               env=clean_env({"HOSTILE_STORE_MODE": mode}))
    document = strict_json(completed.stdout)  # one document, whatever the store printed
    assert document["exit_code"] == completed.returncode
    return completed, document


def ids(document):
    return [f["id"] for f in document["findings"]]


@pytest.fixture(scope="module")
def hostile(stores):
    """One run over a store whose reads of x raise KeyboardInterrupt, whose get_tensor_size calls
    sys.exit(0), and whose reads of y and of the edge index return meta tensors."""
    return check(stores, "hostile")


@pytest.mark.finding("store-call-failed")
@pytest.mark.parametrize("call, attr, error", [
    ("get_tensor(index=None)", "x", "KeyboardInterrupt: the user's client saw a Ctrl-C"),
    ("get_tensor_size()", "x", "SystemExit: 0")])
def test_a_base_exception_from_a_store_call_is_that_calls_failure(hostile, call, attr, error):
    completed, document = hostile
    assert completed.returncode == 1 and document["status"] == "gate-failed"
    assert "store-call-crashed" not in ids(document) and "store-checker-internal-error" not in ids(document)
    failed = [f["evidence"] for f in document["findings"] if f["id"] == "store-call-failed"]
    assert {"call": call, "attr": attr, "error": error} in [
        dict((k, e.get(k)) for k in ("call", "attr", "error")) for e in failed], failed
    assert document["checker"]["child"]["returncode"] == 0  # the child lived on and finished its checks


def test_what_a_store_prints_reaches_stderr_marked_and_never_stdout(hostile):
    completed, _ = hostile
    assert "[store] store-print: reading x" in completed.stderr.decode()
    assert b"store-print" not in completed.stdout


@pytest.mark.finding("store-tensor-on-meta-device")
def test_meta_tensors_are_named_per_call_not_a_checker_crash(hostile):
    completed, document = hostile
    meta = dict((f["evidence"]["call"], f) for f in document["findings"] if f["id"] == "store-tensor-on-meta-device")
    assert set(meta) == {"get_tensor(index=None)", "get_edge_index()"}, ids(document)
    assert meta["get_tensor(index=None)"]["evidence"]["attr"] == "y"
    assert meta["get_tensor(index=None)"]["evidence"]["returned"]["device"] == "meta"
    assert "store-edge-index-dtype" not in ids(document)  # the meta edge index is not misread as a dtype problem


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.finding("store-interrupted")
@pytest.mark.parametrize("signum", [signal.SIGTERM], ids=["SIGTERM"])  # SIGINT: the partition test
def test_a_signal_ends_the_stores_and_prints_one_document_with_what_was_gathered(stores, tmp_path, temp_dir,
                                                                                 signum):
    """...and removes every temporary folder the stores made (they run with the run's own TMPDIR)."""
    pids_file, temp = tmp_path / "pids", temp_dir
    process = subprocess.Popen(command(stores, "--timeout", "200"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, env=clean_env({"HOSTILE_STORE_MODE": "block",
                                                                       "HOSTILE_STORE_PIDS": str(pids_file),
                                                                       "TMPDIR": str(temp)}))
    try:
        lines = []
        for line in iter(process.stderr.readline, b""):  # until the store blocks in its first read
            lines.append(line)
            if b"store-print: blocking" in line:
                break
        assert pids_file.exists(), b"".join(lines)[-2000:]
        assert list(temp.glob("*/store-cache-*/db")), list(temp.rglob("*"))  # in the run's scratch folder
        process.send_signal(signum)
        stdout, rest = process.communicate(timeout=30)
    finally:
        process.kill()
    document, stopped = interrupted_finding(process, stdout, signum, "store-interrupted")
    assert document["gates"] == {}
    assert stopped["evidence"]["running"]["what"].startswith("feature_store.get_tensor")
    assert document["tensor_attrs"]["count"] == 2 and document["edge_attrs"]["count"] == 1  # gathered before
    assert document["setup"]["status"] == "ok"
    store_pid, daemon_pid = (int(word) for word in pids_file.read_text().split())
    deadline = time.time() + 5
    while (alive(store_pid) or alive(daemon_pid)) and time.time() < deadline:
        time.sleep(0.1)
    assert not alive(store_pid) and not alive(daemon_pid), "the stores' processes outlived the checker"
    assert b"Traceback" not in rest
    assert list(temp.iterdir()) == []  # the scratch folder went, and what the stores wrote in it


def test_a_full_stdout_after_a_real_check_exits_3_and_leaves_nothing_running(stores):
    words = " ".join("'%s'" % word for word in command(stores))
    completed = subprocess.run(["bash", "-c", words + " >/dev/full"], capture_output=True, timeout=180,
                               env=clean_env({"HOSTILE_STORE_MODE": "plain"}))
    assert completed.returncode == 3
    lines = [line for line in completed.stderr.decode().splitlines() if not line.startswith("[store] ")]
    assert len(lines) == 1 and "could not be written" in lines[0] and "Traceback" not in completed.stderr.decode()
