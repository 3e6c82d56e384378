"""compare_reports.py against hostile reports, run as an agent runs the tool: a real checker report
(--static-only), damaged the way a hostile or broken node would damage it. What only needs the rules or
the rendering is tested in process (tests/fast/test_compare_*.py); here, what the process itself must do:
strict output, one stderr line, no hang."""

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT, invoke_tool
from test_compare_reports import gather, launch
from support.helpers import ids


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


def test_a_field_of_the_wrong_type_is_one_stderr_line_and_a_usage_document(tmp_path, report):
    """Each field's type is checked in process (tests/fast/test_compare_reading.py); the process says it once."""
    good = write_report(tmp_path, "node0", report)
    bad = write_report(tmp_path, "node1", variant(report, lambda d: d["environment"].update(hostname=7)))
    run = compare(good, bad)
    assert run.returncode == 2 and ids(run) == ["cluster-report-unreadable"]
    assert run.json["findings"][0]["evidence"] == {"file": str(bad), "field": "environment.hostname",
                                                   "expected": "str", "got": "int"}
    assert len(run.stderr.strip().splitlines()) == 1 and "node1.json" in run.stderr


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


def test_a_fifo_report_is_refused_without_blocking(tmp_path, report):
    good = write_report(tmp_path, "node0", report)
    fifo = tmp_path / "node1.json"
    os.mkfifo(fifo)
    run = compare(good, fifo)  # invoke_tool's own timeout ends a hang as a test failure
    assert run.returncode == 2 and ids(run) == ["cluster-report-unreadable"]
    assert run.json["findings"][0]["evidence"]["file"] == str(fifo)
