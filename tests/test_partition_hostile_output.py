"""A partition folder whose data fights back, and a check stopped half-way (issue 32, classes 2 and 3
applied to check_partition.py). Folders are PyG's own (tests/support/partition_writer.py), then changed."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, clean_env, fifo_blocked_child, interrupted_finding, strict_json

CHECKER = ROOT / "scripts" / "check_partition.py"
WRITER = ROOT / "tests" / "support" / "partition_writer.py"


@pytest.fixture(scope="module")
def homo(tmp_path_factory):
    out = tmp_path_factory.mktemp("partitions")
    completed = subprocess.run([sys.executable, str(WRITER), "write", str(out)], capture_output=True, text=True,
                               timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout)["cases"]["homo"]


def copy(root, destination):
    shutil.copytree(root, str(destination))
    return destination


@pytest.mark.finding("partition-tensor-on-meta-device")
def test_meta_tensors_in_the_files_are_named_not_a_crash(homo, tmp_path):
    import torch
    root = copy(homo, tmp_path / "meta")
    torch.save(torch.load(str(root / "node_map.pt")).to("meta"), str(root / "node_map.pt"))
    feats = torch.load(str(root / "part_0" / "node_feats.pt"))
    feats["feats"] = dict((k, v.to("meta")) for k, v in feats["feats"].items())
    torch.save(feats, str(root / "part_0" / "node_feats.pt"))
    completed = subprocess.run([sys.executable, str(CHECKER), str(root)], capture_output=True, timeout=180,
                               env=clean_env(), stdin=subprocess.DEVNULL)
    document = strict_json(completed.stdout)
    assert completed.returncode == document["exit_code"] == 1
    found = [f["id"] for f in document["findings"]]
    assert "partition-load-crashed" not in found and "partition-checker-internal-error" not in found
    [meta] = [f for f in document["findings"] if f["id"] == "partition-tensor-on-meta-device"]
    named = dict((entry["path"], entry["error"]) for entry in meta["evidence"]["files"])
    assert set(named) == {"node_map.pt", os.path.join("part_0", "node_feats.pt")}
    assert "[feats][x]" in named[os.path.join("part_0", "node_feats.pt")]


@pytest.mark.finding("partition-interrupted")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_a_load_ends_the_child_and_prints_one_document(homo, tmp_path, temp_dir, signum):
    """...and leaves nothing in the temp dir (neither the checker nor its child makes anything there)."""
    root = copy(homo, tmp_path / "stalled")
    graph = root / "part_1" / "graph.pt"
    graph.unlink()
    os.mkfifo(str(graph))  # a stalled network mount: the load blocks in open() while no writer comes
    temp = temp_dir
    process = subprocess.Popen([sys.executable, str(CHECKER), str(root), "--timeout", "200"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env({"TMPDIR": str(temp)}),
                               stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while fifo_blocked_child(process.pid) is None and time.monotonic() < deadline:
            assert process.poll() is None, "the checker ended before it opened the stalled file"
            time.sleep(0.05)
        assert fifo_blocked_child(process.pid) is not None, "the checker never opened the stalled file"
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
    document, stopped = interrupted_finding(process, stdout, signum, "partition-interrupted")
    assert "part_1" in stopped["evidence"]["running"]["what"] and "graph.pt" in stopped["evidence"]["running"]["what"]
    assert document["meta"] is not None and document["maps"] is not None  # gathered before the signal
    assert document["checker"]["child"]["signal"] == "SIGKILL"
    assert b"Traceback" not in stderr
    assert list(temp.iterdir()) == []
