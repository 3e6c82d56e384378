"""The recipe in a /dev/shm too small for its job, for real (issue 40): a private tmpfs mounted on /dev/shm in a
mount namespace of its own (root: `unshare -m`; the machine's /dev/shm is untouched). Self-spawn hands the
graph loaded in the parent to the ranks through /dev/shm; a graph larger than the mount is named
(ddp-shm-too-small) with the mount's size, the graph's bytes and the two fixes, and the second fix (each rank
loads its graph, no loader workers) trains in the same small mount."""

import json
import os
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import clean_env
from test_recipe_training import RUN_TIMEOUT, SCRIPT, free_port

MOUNT_MIB = 16


def require_private_shm():
    reason = None
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        reason = "a private /dev/shm needs root (unshare -m, mount -t tmpfs); run the tests as root, as CI does"
    elif shutil.which("unshare") is None:
        reason = "`unshare` (util-linux) is not installed: apt-get install -y util-linux"
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


def in_small_shm(command, tmp_path):
    """`command` (a shell line) in a mount namespace whose /dev/shm is a MOUNT_MIB tmpfs; -> CompletedProcess."""
    inner = 'mount -t tmpfs -o size=%dm tmpfs /dev/shm && exec bash -c "$1"' % MOUNT_MIB
    return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", inner, "sh", command],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT, cwd=tmp_path, stdin=subprocess.DEVNULL,
                          env=clean_env(drop=("TMP", "TEMP")))


@pytest.fixture
def large_graph(tmp_path):
    """A graph whose tensors (about 25 MB, mostly 1024 features a node) do not fit the mount."""
    import torch
    from torch_geometric.data import Data
    generator = torch.Generator().manual_seed(3)
    nodes = 6000
    data = Data(x=torch.randn(nodes, 1024, generator=generator), y=torch.arange(nodes) % 4,
                edge_index=torch.randint(nodes, (2, 4 * nodes), generator=generator))
    path = tmp_path / "large graph.pt"  # a space: the fix must quote it
    torch.save(data, path)
    return path


@pytest.mark.finding("ddp-shm-too-small")
def test_a_graph_larger_than_dev_shm_is_named_and_the_per_rank_fix_trains(neighbor_backend, large_graph, tmp_path):
    require_private_shm()
    args = ["--nprocs", "2", "--master-port", str(free_port()), "--data", str(large_graph), "--epochs", "1",
            "--batch-size", "2048", "--num-neighbors", "2"]
    failed = in_small_shm(shlex.join([sys.executable, str(SCRIPT), *args]), tmp_path)
    assert failed.returncode == 1, failed.stderr[-3000:]
    document = json.loads(failed.stdout)
    assert [f["id"] for f in document["findings"]] == ["ddp-shm-too-small"], document["findings"]
    [short] = document["findings"]
    evidence = short["evidence"]
    assert evidence["dev_shm"]["size_bytes"] == MOUNT_MIB << 20
    assert evidence["graph_bytes"] > MOUNT_MIB << 20 and evidence["needed_bytes_at_least"] == evidence["graph_bytes"]
    assert [(f["kind"], f["rank"], f["while"]) for f in evidence["failures"]] == [
        ("no-space", None, "starting the ranks")]
    assert "docker run --shm-size=%s" % evidence["suggested_shm_size"] in short["fix"]
    assert document["gates"] == {"trained": {"passed": False}}

    # The second fix, pasted as printed (its python3 is this interpreter here), in the same small /dev/shm.
    command = short["fix"].split("without loader workers: ", 1)[1]
    words = shlex.split(command)
    assert words[1:] == [str(SCRIPT), "--nprocs", "2", "--master-port", args[3], "--epochs", "1", "--batch-size",
                         "2048", "--num-neighbors", "2", "--data", str(large_graph), "--load-per-rank",
                         "--num-workers", "0"]
    trained = in_small_shm(shlex.join([sys.executable] + words[1:]), tmp_path)
    assert trained.returncode == 0, trained.stderr[-3000:]
    report = json.loads(trained.stdout)
    assert report["ok"] is True and report["findings"] == [] and report["graph"]["num_nodes"] == 6000
