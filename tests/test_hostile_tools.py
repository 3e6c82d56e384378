"""Hostile inputs for compare_reports.py and check_partition.py (issue 21), run as an agent runs them.

Reports are real checker reports (--static-only), then damaged the way a hostile or broken node
would damage them. Partition folders are PyG's own (tests/_partition_writer.py), then poisoned:
pickles whose payload would create a marker file. Every test asserts the marker never appears,
after the tool ran and after its printed fix ran.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, invoke_tool, strict_json
from test_compare_reports import gather, launch

WRITER = ROOT / "tests" / "_partition_writer.py"
PAYLOAD_TARGET = "%s.system" % os.system.__module__  # what pickle names for os.system


def run_writer(*args):
    process = subprocess.run([sys.executable, str(WRITER), *[str(a) for a in args]], capture_output=True,
                             text=True, timeout=180)
    assert process.returncode == 0, process.stderr[-3000:]
    return json.loads(process.stdout) if process.stdout.strip() else None


def ids(run):
    return [f["id"] for f in run.json["findings"]]


def only(run, finding_id):
    found = [f for f in run.json["findings"] if f["id"] == finding_id]
    assert len(found) == 1, (finding_id, ids(run), run.stderr[-2000:])
    return found[0]


def bash(command, cwd):
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=180, cwd=cwd)


# ---------------------------------------------------------------------------
# compare_reports.py
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """One real static report (the checker's own JSON), as a dict to derive damaged copies from."""
    path = gather(tmp_path_factory.mktemp("report"), "node0", launch(0))
    return json.loads(path.read_text())


def write_report(folder, name, document, raw=None):
    path = folder / ("%s.json" % name)
    path.write_text(raw if raw is not None else json.dumps(document))
    return path


def variant(document, change):
    copy = json.loads(json.dumps(document))
    change(copy)
    return copy


def compare(*args):
    return invoke_tool("compare_reports.py", *args)


def test_deeply_nested_report_is_unreadable_not_a_crash(tmp_path, report):
    good = write_report(tmp_path, "node0", report)
    deep = write_report(tmp_path, "node1", None,
                        raw='{"findings": [], "environment": %s%s}' % ("[" * 100000, "]" * 100000))
    run = compare(good, deep)
    assert run.returncode == 2 and ids(run) == ["cluster-report-unreadable"]
    evidence = run.json["findings"][0]["evidence"]
    assert evidence["file"] == str(deep) and "nested" in evidence["error"]
    assert len(run.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("field, value", [
    ("environment.launch.RANK.value", [0]),
    ("environment.hostname", 7),
    ("extensions", ["pyg_lib"]),
    ("extensions.pyg_lib.status", {"ok": True}),
    ("cpu.affinity.count", "2"),
    ("environment.network_interfaces", [1, 2]),
    ("python.version", 3.11),
    ("schema_version", 2),
])
def test_a_field_of_the_wrong_type_names_the_file_and_the_field(tmp_path, report, field, value):
    def change(document):
        keys = field.split(".")
        target = document
        for key in keys[:-1]:
            target = target.setdefault(key, {})
        target[keys[-1]] = value
    good = write_report(tmp_path, "node0", report)
    bad = write_report(tmp_path, "node1", variant(report, change))
    run = compare(good, bad)
    assert run.returncode == 2, run.json["findings"]
    assert ids(run) == ["cluster-report-unreadable"]
    evidence = run.json["findings"][0]["evidence"]
    assert evidence["file"] == str(bad)
    assert evidence["field"] == field or field.startswith(evidence["field"] + "."), evidence


def table_is_well_formed(markdown):
    """Every row of the table has as many unescaped | as its header."""
    rows = [line for line in markdown.splitlines() if line.startswith("|")]
    cells = [len(re.findall(r"(?<!\\)\|", row)) for row in rows]
    return rows and len(set(cells)) == 1


def test_lone_surrogates_give_strict_json_and_a_well_formed_table(tmp_path, report):
    hostile = u"node\udc80|<img src=x>`\x1b]0;title\x07\n"
    document = variant(report, lambda d: d["environment"].update(hostname=hostile))
    document["environment"]["launch"]["MASTER_ADDR"] = {"raw": u"\ud800x|y", "value": "x", "error": None}
    # json.dumps writes the lone surrogates as \ud800 escapes, as a broken encoder on a node would
    bad = write_report(tmp_path, "node1", document)
    good = write_report(tmp_path, "node0", report)
    run = compare(good, bad)  # invoke_tool parses stdout strictly: no lone surrogate may come out
    assert run.returncode in (0, 1) and run.json["status"] != "internal-error"
    hosts = [r["hostname"] for r in run.json["reports"]]
    assert not any(re.search(u"[\ud800-\udfff]", h or "") for h in hosts)
    completed = subprocess.run([sys.executable, str(ROOT / "scripts" / "compare_reports.py"), str(good), str(bad),
                                "--format", "markdown"], capture_output=True, timeout=120)
    text = completed.stdout.decode("utf-8")  # strict: fails on anything that is not UTF-8
    assert completed.returncode == run.returncode, completed.stderr[-2000:]
    assert table_is_well_formed(text), text[:2000]
    assert "\x1b" not in text and "\x07" not in text
    outside_code = re.sub(r"(`+).*?\1", "", text)  # a code span shows HTML as text
    assert "<img" not in outside_code, outside_code[:2000]


def test_reports_of_different_schema_majors_are_a_finding(tmp_path, report):
    major = int(report["schema_version"].split(".")[0])
    other = variant(report, lambda d: d.update(schema_version="%d.0" % (major + 1)))
    a, b = write_report(tmp_path, "node0", report), write_report(tmp_path, "node1", other)
    run = compare(a, b)
    assert run.returncode == 1
    found = only(run, "cluster-schema-mismatch")
    assert found["evidence"]["schema_majors"] == {str(major): [str(a)], str(major + 1): [str(b)]}


def launch_fix(run, name):
    return [f for f in run.json["findings"] if f["id"] == "cluster-launch-disagrees"
            and f["evidence"]["fact"] == name][0]["fix"]


def test_an_unset_variable_is_never_printed_as_a_value(tmp_path):
    a = gather(tmp_path, "node0", launch(0, world=3))
    b = gather(tmp_path, "node1", launch(1, world=3))
    c = gather(tmp_path, "node2", {"RANK": "2", "WORLD_SIZE": "3", "MASTER_PORT": "29500"})  # no MASTER_ADDR
    fix = launch_fix(compare(a, b, c), "MASTER_ADDR")
    assert "(unset)" not in fix and "None" not in fix
    assert fix.startswith("export MASTER_ADDR=192.0.2.1 ")
    assert "node2" in fix or "rank 2" in fix  # the host that lacks it is named
    # Most hosts unset: the fix says to unset it where it is set, exporting nothing.
    d = gather(tmp_path, "node3", {"RANK": "0", "WORLD_SIZE": "3"})
    fix = launch_fix(compare(d, c, a), "MASTER_ADDR")
    assert "export MASTER_ADDR=" not in fix and "unset it on" in fix


def test_a_launch_value_from_a_report_cannot_run_as_shell_code(tmp_path):
    marker = tmp_path / "marker-from-report"
    value = "$(touch %s)`touch %s`" % (marker, marker)
    a = gather(tmp_path, "node0", launch(0, world=3, MASTER_ADDR=value))
    b = gather(tmp_path, "node1", launch(1, world=3, MASTER_ADDR=value))
    c = gather(tmp_path, "node2", launch(2, world=3))
    fix = launch_fix(compare(a, b, c), "MASTER_ADDR")
    export = fix.split(" on every node")[0]
    ran = bash(export + ' && printf %s "$MASTER_ADDR"', tmp_path)
    assert ran.returncode == 0 and ran.stdout == value
    assert not marker.exists()


def test_no_fix_acts_on_an_extension_state_that_is_not_known(tmp_path, report):
    """Two hosts never ran the import (not-run), one has pyg_lib: nothing is uninstalled."""
    def state(status, version=None):
        def change(document):
            document["extensions"]["pyg_lib"] = {"status": status, "version": version, "distribution": "pyg-lib"}
        return change
    a = write_report(tmp_path, "node0", variant(report, state("not-run")))
    b = write_report(tmp_path, "node1", variant(report, state("not-run")))
    c = write_report(tmp_path, "node2", variant(report, state("ok", "0.4.0")))
    run = compare(a, b, c)
    found = [f for f in run.json["findings"] if f["id"] == "cluster-stack-drift"
             and f["evidence"]["fact"] == "pyg_lib"][0]
    assert "uninstall" not in found["fix"] and "= not-run" not in found["fix"]
    assert "check_sampling_backends.py" in found["fix"]
    # A state that is known (not installed on most hosts) does give the uninstall, on the host that has it.
    d = write_report(tmp_path, "node3", variant(report, state("not-installed")))
    e = write_report(tmp_path, "node4", variant(report, state("not-installed")))
    run = compare(d, e, c)
    found = [f for f in run.json["findings"] if f["id"] == "cluster-stack-drift"
             and f["evidence"]["fact"] == "pyg_lib"][0]
    assert "-m pip uninstall -y pyg-lib" in found["fix"]


def test_a_fifo_report_is_refused_without_blocking(tmp_path, report):
    good = write_report(tmp_path, "node0", report)
    fifo = tmp_path / "node1.json"
    os.mkfifo(fifo)
    run = compare(good, fifo)  # invoke_tool's own timeout ends a hang as a test failure
    assert run.returncode == 2 and ids(run) == ["cluster-report-unreadable"]
    assert run.json["findings"][0]["evidence"]["file"] == str(fifo)


# ---------------------------------------------------------------------------
# check_partition.py
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def partitions(tmp_path_factory):
    out = tmp_path_factory.mktemp("partitions")
    return run_writer("write", out)["cases"]


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
    run = check(root)
    if "partition-edge-feats-unloadable" not in ids(run):
        pytest.skip("this torch loads PyG's defaultdict edge_feats.pt; no rewrite is printed "
                    "(run with torch >= 2.6: ~/.venvs/scalable-distributed/bin/python -m pytest %s)" % __file__)
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


def test_deeply_nested_meta_is_a_finding(tmp_path, partitions):
    root = copy_case(partitions, "homo", tmp_path / "deep")
    (root / "META.json").write_text("[" * 100000 + "]" * 100000)
    run = check(root)
    assert run.returncode == 1 and run.json["status"] != "internal-error"
    assert "nested" in only(run, "partition-meta-invalid")["evidence"]["error"]


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
