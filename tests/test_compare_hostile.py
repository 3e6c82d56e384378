"""compare_reports.py against hostile reports: real checker reports (--static-only), then damaged
the way a hostile or broken node would damage them, run as an agent runs the tool.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT, invoke_tool
from test_compare_reports import gather, launch
from support.helpers import bash, ids, only


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


@pytest.mark.finding("cluster-schema-mismatch")
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


@pytest.mark.finding("cluster-stack-drift")
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


@pytest.mark.finding("cluster-stack-drift")
def test_a_torch_build_tag_is_matched_from_its_own_index(tmp_path, report):
    """torch 2.13.0+cpu on most hosts: the host that differs gets PyTorch's CPU index in its line, since
    PyPI has no +cpu build (a bare `pip install torch==2.13.0+cpu` finds nothing there)."""
    def torch_version(version):
        def change(document):
            document["torch"]["version"] = version
        return change
    a = write_report(tmp_path, "node0", variant(report, torch_version("2.13.0+cpu")))
    b = write_report(tmp_path, "node1", variant(report, torch_version("2.13.0+cpu")))
    c = write_report(tmp_path, "node2", variant(report, torch_version("2.14.1")))
    run = compare(a, b, c)
    [found] = [f for f in run.json["findings"] if f["id"] == "cluster-stack-drift" and f["evidence"]["fact"] == "torch"]
    assert "-m pip install torch==2.13.0+cpu --index-url https://download.pytorch.org/whl/cpu" in found["fix"]
