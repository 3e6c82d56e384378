"""The tool's sections of the document (bounded: bounds.py) and the markdown for people."""

import json

from diagnostics_core.markdown import cell, code, finding_block
from . import bounds

MARKDOWN_COLUMNS = 8  # up to this many reports, one column per host; more: one row per value


def render(document, facts, options):
    """reports (the first REPORTS_LISTED), counts, and each fact's groups (the largest GROUPS_LISTED)."""
    nodes = facts.get("nodes") or []
    counts = dict(facts.get("counts") or {"given": 0, "read": 0, "too_large": 0})
    counts["listed"] = min(len(nodes), bounds.REPORTS_LISTED)
    groups, not_listed = {}, {}
    for name, grouped in (facts.get("compared") or {}).items():
        groups[name], rest = bounds.groups(nodes, grouped)
        if rest:
            not_listed[name] = rest
    document.update(reports=[bounds.entry(item) for item in nodes[:bounds.REPORTS_LISTED]], counts=counts,
                    groups=groups, groups_not_listed=not_listed)


def named(group):
    more = group["count"] - len(group["hosts"])
    return ", ".join(group["hosts"]) + (" and %d more" % more if more else "")


def host_columns(document):
    entries = document["reports"]
    lines = ["| fact | " + " | ".join(cell(e["label"]) for e in entries) + " |", "|---|" + "---|" * len(entries)]
    for name, groups in document["groups"].items():
        by_host = dict((h, g["value"]) for g in groups for h in g["hosts"])
        mark = " **(differs)**" if len(groups) > 1 else ""
        lines.append("| %s%s | %s |" % (cell(name), mark, " | ".join(
            cell(by_host[e["label"]]) if e["label"] in by_host else "(not reported)" for e in entries)))
    return lines


def value_rows(document):
    counts = document["counts"]
    lines = ["%d reports read (the JSON lists %d); each fact's values, largest group first:" % (
        counts["read"], counts["listed"]), "", "| fact | value | hosts |", "|---|---|---|"]
    for name, groups in document["groups"].items():
        rest = document["groups_not_listed"].get(name)
        mark = " **(differs)**" if len(groups) > 1 or rest else ""
        for number, group in enumerate(groups):
            lines.append("| %s | %s | %s |" % (cell(name) + mark if number == 0 else "", cell(group["value"]),
                                                cell("%d: %s" % (group["count"], named(group)))))
        if rest:
            lines.append("| | %d more values | %d hosts |" % (rest["values"], rest["hosts"]))
    return lines


def to_markdown(document, options=None):
    lines = ["# Cluster comparison: %s (exit %d)" % (document["status"], document["exit_code"]), ""]
    if document["reports"]:
        few = document["counts"]["read"] <= MARKDOWN_COLUMNS and not document["groups_not_listed"]
        lines += (host_columns if few else value_rows)(document) + [""]
    for item in document["findings"]:
        evidence = item["evidence"] if isinstance(item["evidence"], dict) else {}
        title = "%s differs" % evidence["fact"] if "fact" in evidence else item["title"]
        details = ["- %s: %s" % (cell(group["value"]), cell(named(group))) for group in evidence.get("groups", [])]
        if evidence.get("groups_not_listed"):
            details.append("- %d more values on %d hosts" % (evidence["groups_not_listed"]["values"],
                                                              evidence["groups_not_listed"]["hosts"]))
        if "groups" not in evidence:
            details.append("- evidence: %s" % code(json.dumps(item["evidence"], sort_keys=True)[:600]))
        lines.extend(finding_block(item, title, details))
    return "\n".join(lines).rstrip() + "\n"
