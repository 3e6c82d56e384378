"""compare_reports.py --format markdown, rendered in process from the document: one column per host for a
few reports, one row per value for many, and whatever a report holds, a well-formed table with no raw HTML
or terminal controls outside code spans."""

import re

import pytest

from cluster_compare import bounds
from cluster_compare.findings import TOOL
from cluster_compare.render import MARKDOWN_COLUMNS, render, to_markdown
from test_compare_reading import document_of, facts_of, report

HTML = "<img src=x onerror=alert(1)>"


def markdown(*documents):
    return to_markdown(document_of(facts_of(*documents)))


def rows(text):
    return [line for line in text.splitlines() if line.startswith("|")]


def well_formed(text):
    """Every table row has as many unescaped | as its header."""
    counts = [len(re.findall(r"(?<!\\)\|", row)) for row in rows(text)]
    return bool(counts) and len(set(counts[:2])) == 1 and all(c == counts[0] for c in counts)


def test_a_few_reports_get_one_column_per_host():
    text = markdown(report("a", MASTER_PORT=29500), report("b", MASTER_PORT=29501), report("c"))
    assert text.startswith("# Cluster comparison: gate-failed (exit 1)\n")
    assert rows(text)[0] == "| fact | a | b | c |"
    assert "| MASTER_PORT **(differs)** | 29500 | 29501 | - |" in text
    assert "| torch | 2.13.0+cpu | 2.13.0+cpu | 2.13.0+cpu |" in text
    assert "## error `cluster-launch-disagrees`: MASTER_PORT differs" in text
    assert "- fix: `export MASTER_PORT=29500 on every node" in text and well_formed(text)


def test_a_fact_a_report_lacks_shows_as_not_reported():
    lacking = report("b")
    del lacking["pyg"]["version"]
    text = markdown(report("a"), lacking)
    assert "| torch_geometric | 2.8.1 | (not reported) |" in text


def test_many_reports_get_one_row_per_value_with_counts():
    count = MARKDOWN_COLUMNS + 30
    documents = [report("n%02d" % i, edits=[("torch.version", "2.%d.0" % (i % (bounds.GROUPS_LISTED + 2)))])
                 for i in range(count)]
    text = markdown(*documents)
    assert "%d reports read (the JSON lists %d)" % (count, bounds.REPORTS_LISTED) in text
    assert rows(text)[0] == "| fact | value | hosts |"
    assert re.search(r"^\| torch \*\*\(differs\)\*\* \| 2\.0\.0 \| 5: n00, n08, n16, n24, n32 \|$", text, re.M)
    assert "| | 2 more values | 8 hosts |" in text
    assert "- 2 more values on 8 hosts" in text and well_formed(text)
    assert len(rows(text)) < 120  # not a column or row per report


def test_a_group_beyond_its_named_hosts_says_how_many_more():
    documents = [report("n%02d" % i) for i in range(MARKDOWN_COLUMNS + 4)] + [report("odd", MASTER_PORT=1)]
    text = markdown(*documents)
    assert "| MASTER_PORT **(differs)** | - | %d: n00, n01, n02, n03, n04, n05, n06, n07 and 4 more |" % (
        MARKDOWN_COLUMNS + 4) in text


@pytest.mark.parametrize("hostile", [HTML, "a|b", "`x`", "\x1b]0;title\x07", "line\nbreak", "*bold* [l](u)",
                                     u"node\udc80"])
@pytest.mark.parametrize("count", [2, MARKDOWN_COLUMNS + 2])
def test_text_from_a_report_never_breaks_the_table_or_reaches_it_raw(hostile, count):
    documents = [report("n%d" % i) for i in range(count - 1)]
    documents.append(report("x" + hostile, MASTER_ADDR=hostile, GLOO_SOCKET_IFNAME="eth9" + hostile,
                            edits=[("pyg.version", hostile), ("environment.network_interfaces", ["lo", hostile])]))
    text = markdown(*documents)
    assert well_formed(text), text[:3000]
    assert "\x1b" not in text and "\x07" not in text and not re.search(u"[\ud800-\udfff]", text)
    for line in text.splitlines():
        outside_code = re.sub(r"(`+).*?\1", "", line)
        assert "<" not in outside_code and ">" not in outside_code, line
    if hostile == HTML:
        assert "&lt;img" in text  # shown, escaped


def test_a_refused_run_renders_its_finding_alone():
    document, _ = TOOL.document([TOOL.finding("cluster-usage-error", {"message": "bad"}, fix="x --help")], {},
                                {"name": "compare_reports.py"}, usage_error=True)
    render(document, {}, None)
    assert document["reports"] == [] and document["groups"] == {}
    text = to_markdown(document)
    assert text.startswith("# Cluster comparison: usage-error (exit 2)") and "cluster-usage-error" in text
    assert not rows(text)


def test_an_interrupted_run_renders_the_reports_it_had_read():
    facts = {"counts": {"given": 5, "read": 1, "too_large": 0}, "nodes": facts_of(report("a"))["nodes"][:1],
             "too_large": []}
    del facts["nodes"][0]["label"]  # the labels come after the last report
    document, _ = TOOL.document([], {}, {"name": "compare_reports.py"}, interrupted={"signal": "SIGTERM",
                                                                                     "exit_code": 143})
    render(document, facts, None)
    assert [entry["label"] for entry in document["reports"]] == ["a"]
    assert document["counts"] == {"given": 5, "read": 1, "too_large": 0, "listed": 1}
    assert to_markdown(document).startswith("# Cluster comparison: interrupted (exit 143)")
