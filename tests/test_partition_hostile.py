"""The partition checker against hostile partition folders: files that would run code are never
unpickled, damaged metadata is a finding, and nothing reaches outside the folder."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from support import hostile_fakes as hostile
from conftest import ROOT, fifo_blocked_child, invoke_tool, strict_json
from support.helpers import bash, ids, only, torch_loads_defaultdict_edge_feats


@pytest.mark.finding("partition-pickle-holds-code")
def test_partition_file_that_would_segfault_is_never_unpickled(tmp_path):
    """A map whose unpickling calls into ctypes and crashes: named as code, loaded by nothing, even
    with --allow-pickle (only a file the scan proves free of code is ever unpickled)."""
    from conftest import invoke_tool
    root = hostile.write_crashing_partition(tmp_path / "parts")
    for flags in ((), ("--allow-pickle",)):
        result = invoke_tool("check_partition.py", root, *flags)
        assert result.returncode == 1 and "partition-load-crashed" not in result.ids()
        found = result.only("partition-pickle-holds-code")
        files = {entry["path"]: entry for entry in found["evidence"]["files"]}
        assert "node_map.pt" in files and files["node_map.pt"]["scan"]["refused"], files
        assert result.json["meta"] is not None and result.json["gates"] == {"contract": {"passed": False}}
        assert result.json["checker"]["child"]["signal"] is None  # the child never crashed


@pytest.mark.finding("partition-stack-missing")
def test_without_torch_the_partition_checker_names_the_remedy(tmp_path):
    from conftest import invoke_tool, pyenv_python
    python = pyenv_python("3.12")
    result = invoke_tool("check_partition.py", tmp_path, python=python)
    assert result.returncode == 2 and result.ids() == ["partition-stack-missing"]
    assert result.only("partition-stack-missing")["fix"].startswith("%s -m pip install torch" % python)
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


WRITER = ROOT / "tests" / "support" / "partition_writer.py"


PAYLOAD_TARGET = "%s.system" % os.system.__module__  # what pickle names for os.system


def run_writer(*args):
    process = subprocess.run([sys.executable, str(WRITER), *[str(a) for a in args]], capture_output=True,
                             text=True, timeout=180)
    assert process.returncode == 0, process.stderr[-3000:]
    return json.loads(process.stdout) if process.stdout.strip() else None


@pytest.fixture(scope="module")
def partitions(partition_folders):
    return partition_folders["cases"]


def copy_case(partitions, case, destination):
    shutil.copytree(partitions[case], destination)
    return destination


def check(*args):
    return invoke_tool("check_partition.py", *args)


def every_fix(run):
    return [f["fix"] for f in run.json["findings"] if f["fix"]]


def suggests_allow_pickle(fix):
    """A printed command that runs the checker with --allow-pickle."""
    return re.search(r"check_partition\.py\S* .*--allow-pickle", fix) is not None


def poison(marker, root):
    files = sorted(str(p) for p in root.glob("part_*/edge_feats.pt"))
    run_writer("poison", marker, *files)
    return files


def test_the_poison_is_live(tmp_path, partitions):
    """Control: loading a poisoned file the way the old fix did (weights_only=False) runs the payload.
    Without this the marker tests below could pass on a payload that never worked."""
    root = copy_case(partitions, "homo_edge_attr", tmp_path / "control")
    marker = tmp_path / "control-marker"
    files = poison(str(marker), root)
    subprocess.run([sys.executable, "-W", "ignore", "-c", "import sys, torch; torch.load(sys.argv[1], "
                    "weights_only=False)", files[0]], check=True, capture_output=True, timeout=120)
    assert marker.exists()


@pytest.mark.parametrize("allow_pickle", [False, True])
def test_poisoned_edge_feats_is_code_not_the_defaultdict_case(tmp_path, partitions, allow_pickle):
    root = copy_case(partitions, "homo_edge_attr", tmp_path / "poisoned")
    marker = tmp_path / "marker"
    poison(str(marker), root)
    run = check(root, *(["--allow-pickle"] if allow_pickle else []))
    assert run.returncode == 1
    assert not marker.exists()
    found = only(run, "partition-pickle-holds-code")
    files = {f["path"]: f["scan"] for f in found["evidence"]["files"]}
    assert sorted(files) == ["part_0/edge_feats.pt", "part_1/edge_feats.pt"]
    assert all(PAYLOAD_TARGET in scan["refused"] and not scan["safe"] for scan in files.values())
    assert "partition-edge-feats-unloadable" not in ids(run)
    for fix in every_fix(run):  # nothing printed would load these files
        assert "weights_only=False" not in fix and "rewrite_as_dict" not in fix
        assert not suggests_allow_pickle(fix), fix


def test_rewrite_fix_runs_no_code_even_if_the_file_changed_after_the_check(tmp_path, partitions):
    root = copy_case(partitions, "homo_edge_attr", tmp_path / "clean")
    if torch_loads_defaultdict_edge_feats():
        pytest.skip("this torch loads PyG's defaultdict edge_feats.pt; no rewrite is printed "
                    "(run with torch >= 2.6: ~/.venvs/scalable-distributed/bin/python -m pytest %s)" % __file__)
    run = check(root)
    fix = only(run, "partition-edge-feats-unloadable")["fix"]
    marker = tmp_path / "marker"
    files = poison(str(marker), root)  # swapped between the check and the fix
    before = [open(f, "rb").read() for f in files]
    ran = bash(fix, "/")
    assert ran.returncode != 0 and "not rewritten" in ran.stderr
    assert not marker.exists()
    assert [open(f, "rb").read() for f in files] == before


@pytest.mark.parametrize("how, target", [("subprocess.call", "subprocess.call"), ("os.system", PAYLOAD_TARGET)])
def test_allow_pickle_is_not_suggested_for_a_file_holding_code(tmp_path, partitions, how, target):
    """subprocess.call is what torch names with add_safe_globals, so PyG (and --allow-pickle) would
    retry with weights_only=False; os.system's module torch refuses outright."""
    root = copy_case(partitions, "homo", tmp_path / "code-map")
    marker = tmp_path / "marker"
    run_writer("code-file", marker, root / "node_map.pt", how)
    for args in ([], ["--allow-pickle"]):
        run = check(root, *args)
        assert not marker.exists()
        found = only(run, "partition-pickle-holds-code")
        assert found["evidence"]["files"][0]["path"] == "node_map.pt"
        assert target in found["evidence"]["files"][0]["scan"]["refused"]
        assert "partition-pickle-fallback" not in ids(run) and "partition-file-unloadable" not in ids(run)
        for fix in every_fix(run):
            assert not suggests_allow_pickle(fix), fix


@pytest.mark.finding("partition-path-outside-root")
def test_type_names_cannot_reach_outside_the_folder(tmp_path, partitions):
    root = copy_case(partitions, "hetero", tmp_path / "parts" / "root")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # Opening a FIFO with no writer blocks: had the checker opened it, it would report a load timeout.
    os.mkfifo(elsewhere / "author.pt")
    meta_path = root / "META.json"
    meta = json.loads(meta_path.read_text())
    rename = lambda name: "../../../elsewhere/author" if name == "author" else name  # noqa: E731
    meta["node_types"] = [rename(t) for t in meta["node_types"]]
    meta["edge_types"] = [[rename(p) for p in t] for t in meta["edge_types"]]
    meta_path.write_text(json.dumps(meta))
    run = check(root, "--timeout", "5")
    assert run.returncode == 1
    found = only(run, "partition-path-outside-root")
    assert os.path.join("..", "..", "elsewhere", "author.pt") in [f["path"] for f in found["evidence"]["files"]]
    assert "partition-load-timeout" not in ids(run) and "partition-load-crashed" not in ids(run)


@pytest.mark.finding("partition-meta-invalid")
def test_deeply_nested_meta_is_a_finding(tmp_path, partitions):
    root = copy_case(partitions, "homo", tmp_path / "deep")
    (root / "META.json").write_text("[" * 100000 + "]" * 100000)
    run = check(root)
    assert run.returncode == 1 and run.json["status"] != "internal-error"
    assert "nested" in only(run, "partition-meta-invalid")["evidence"]["error"]


@pytest.mark.finding("partition-output-capped", "partition-part-missing")
def test_a_huge_num_parts_is_capped_and_said(tmp_path, partitions):
    root = copy_case(partitions, "homo", tmp_path / "many")
    meta = json.loads((root / "META.json").read_text())
    meta["num_parts"] = 100000
    (root / "META.json").write_text(json.dumps(meta))
    run = check(root)
    assert run.returncode == 1
    assert "partition-load-crashed" not in ids(run)
    capped = only(run, "partition-output-capped")["evidence"]
    examined = run.json["examined"]["examined"]
    assert capped["not_examined"] == 100000 - examined and len(run.json["parts"]) == examined
    missing = only(run, "partition-part-missing")["evidence"]
    assert missing["missing_count"] == 100000 - 2 and len(missing["missing"]) < missing["missing_count"]
    assert len(run.stdout.encode()) < 2 << 20  # what 100000 parts gave before: tens of megabytes


def test_huge_names_in_a_file_are_not_a_crash(tmp_path, partitions):
    root = copy_case(partitions, "homo", tmp_path / "names")
    program = ("import sys, torch; p = sys.argv[1]; v = torch.load(p); "
               "v['feats']['n' * (17 << 20)] = v['feats']['x']; torch.save(v, p)")
    subprocess.run([sys.executable, "-W", "ignore", "-c", program, str(root / "part_0" / "node_feats.pt")],
                   check=True, capture_output=True, timeout=120)
    run = check(root)
    assert "partition-load-crashed" not in ids(run) and run.json["status"] != "internal-error"
    assert [p["index"] for p in run.json["parts"]] == [0, 1]
    assert len(run.stdout.encode()) < 1 << 20
    strict_json(run.stdout.encode())


@pytest.mark.finding("partition-load-crashed")
def test_a_load_that_kills_the_child_is_a_crash_naming_the_file(partitions, tmp_path):
    """A load that dies by a signal (here SIGSEGV, sent to the child while it blocks opening a FIFO, as a
    hung mount blocks) is named with the call it was in; the parent still prints its document."""
    import signal
    import time
    root = copy_case(partitions, "homo", tmp_path / "root")
    os.remove(root / "part_0" / "graph.pt")
    os.mkfifo(root / "part_0" / "graph.pt")
    process = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "check_partition.py"), str(root),
                                "--timeout", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    child, deadline = None, time.time() + 60
    while child is None and time.time() < deadline:
        time.sleep(0.2)
        child = fifo_blocked_child(process.pid)  # blocked in the FIFO's open, not still importing
    assert child is not None, "no blocked load child of %d" % process.pid
    os.kill(child, signal.SIGSEGV)
    stdout, stderr = process.communicate(timeout=60)
    document = strict_json(stdout)
    crashed = [f for f in document["findings"] if f["id"] == "partition-load-crashed"]
    assert process.returncode == 1 and len(crashed) == 1, (document["findings"], stderr[-2000:])
    assert "graph.pt" in json.dumps(crashed[0]["evidence"]) and "SIGSEGV" in json.dumps(crashed[0]["evidence"])
