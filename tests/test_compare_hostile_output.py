"""compare_reports.py with one oversized report among many and reports full of raw HTML (issue 32,
class 6). Reports are a real checker report (--static-only), copied per node and then changed."""

import json
import re
import subprocess
import sys

import pytest

from conftest import ROOT, clean_env, strict_json
from test_compare_reports import gather, launch

COMPARE = ROOT / "scripts" / "compare_reports.py"
HTML = '<img src=x onerror=alert(1)>'


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return json.loads(gather(tmp_path_factory.mktemp("report"), "node0", launch(0)).read_text())


def node(document, rank, world):
    copy = json.loads(json.dumps(document))
    copy["environment"]["hostname"] = "node%d" % rank
    copy["environment"]["launch"]["RANK"] = {"raw": str(rank), "value": rank}
    copy["environment"]["launch"]["WORLD_SIZE"] = {"raw": str(world), "value": world}
    return copy


def compare(*args):
    completed = subprocess.run([sys.executable, str(COMPARE), *[str(a) for a in args]], capture_output=True,
                               timeout=120, env=clean_env(), stdin=subprocess.DEVNULL)
    return completed


@pytest.mark.finding("cluster-report-too-large")
def test_one_oversized_report_is_named_and_the_others_are_compared(tmp_path, report):
    world = 6
    for rank in range(world - 1):
        (tmp_path / ("node%d.json" % rank)).write_text(json.dumps(node(report, rank, world)))
    huge = node(report, world - 1, world)
    huge["padding"] = "x" * (17 << 20)  # a --full report gone wrong, over the 16 MiB bound
    (tmp_path / "huge.json").write_text(json.dumps(huge))
    completed = compare(tmp_path)
    document = strict_json(completed.stdout)
    assert completed.returncode == document["exit_code"] == 1, completed.stderr[-2000:]
    assert document["status"] == "gate-failed"
    [large] = [f for f in document["findings"] if f["id"] == "cluster-report-too-large"]
    assert large["evidence"]["files"] == [str(tmp_path / "huge.json")] and large["evidence"]["count"] == 1
    assert [entry["hostname"] for entry in document["reports"]] == ["node%d" % r for r in range(world - 1)]
    # The missing rank is said too: the comparison ran over the five that were read.
    [missing] = [f for f in document["findings"] if f["id"] == "cluster-rank-missing"]
    assert missing["evidence"]["missing"] == [world - 1], missing["evidence"]


def test_only_oversized_reports_remain_a_usage_error(tmp_path, report):
    huge = dict(report, padding="x" * (17 << 20))
    (tmp_path / "huge.json").write_text(json.dumps(huge))
    completed = compare(tmp_path / "huge.json")
    assert completed.returncode == 2
    assert json.loads(completed.stdout)["findings"][0]["id"] == "cluster-report-unreadable"


def poisoned(value):
    """Every key and string of a report section with raw HTML appended."""
    if isinstance(value, dict):
        return dict((key + HTML if key not in ("raw", "value", "error", "status", "version") else key, poisoned(item))
                    for key, item in value.items())
    if isinstance(value, list):
        return [poisoned(item) for item in value]
    return value + HTML if isinstance(value, str) else value


def test_raw_html_from_a_report_never_reaches_the_markdown_outside_a_code_span(tmp_path, report):
    clean = node(report, 0, 2)
    dirty = node(report, 1, 2)
    dirty["environment"]["hostname"] = "node1" + HTML
    for section in ("python", "torch", "pyg", "extensions", "sampling", "install", "cpu"):
        if isinstance(dirty.get(section), dict):
            dirty[section] = poisoned(dirty[section])
    dirty["environment"]["launch"]["MASTER_ADDR"] = {"raw": HTML, "value": HTML}
    dirty["environment"]["launch"]["NCCL_SOCKET_IFNAME"] = {"raw": "eth9" + HTML, "value": "eth9" + HTML}
    dirty["environment"]["network_interfaces"] = ["lo", HTML]
    (tmp_path / "a.json").write_text(json.dumps(clean))
    (tmp_path / (HTML.replace("/", "_") + ".json")).write_text(json.dumps(dirty))
    completed = compare(tmp_path, "--format", "markdown")
    markdown = completed.stdout.decode()
    assert completed.returncode == 1 and "differs" in markdown
    for line in markdown.splitlines():
        outside_code = re.sub(r"(`+).*?\1", "", line)
        assert "<" not in outside_code and ">" not in outside_code, line
    assert "&lt;img" in markdown  # it is shown, escaped
