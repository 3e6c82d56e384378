"""Rendering: the JSON document and the markdown table for people."""

import json
import sys
import time

from diagnostics_core import markdown
from diagnostics_core.markdown import cell, code, finding_block
from .findings import GATE, TOOL, VERSION


def render(entries, findings, summary, started, internal_error=None, usage_error=False):
    errors = any(f["severity"] == "error" for f in findings)
    # The gate is not applied when the run never started (a usage error) or broke.
    gates = {} if usage_error or internal_error is not None else {GATE: {"passed": not errors}}
    meta = {"name": "compare_reports.py", "version": VERSION, "argv": sys.argv[1:],
            "elapsed_s": round(time.time() - started, 3), "read_only": True}
    document, exit_code = TOOL.document(findings, gates, meta, usage_error=usage_error, internal_error=internal_error)
    document.update(reports=entries, groups=summary)
    return document, exit_code


def to_markdown(document):
    lines = ["# Cluster comparison: %s (exit %d)" % (document["status"], document["exit_code"]), ""]
    entries = document["reports"]
    if entries:
        lines += ["| fact | " + " | ".join(cell(e["label"]) for e in entries) + " |",
                  "|---|" + "---|" * len(entries)]
        for name, groups in document["groups"].items():
            by_host = dict((h, g["value"]) for g in groups for h in g["hosts"])
            mark = " **(differs)**" if len(groups) > 1 else ""
            lines.append("| %s%s | %s |" % (cell(name), mark, " | ".join(
                cell(by_host[e["label"]]) if e["label"] in by_host else "(not reported)" for e in entries)))
        lines.append("")
    for item in document["findings"]:
        evidence = item["evidence"] if isinstance(item["evidence"], dict) else {}
        title = "%s differs" % evidence["fact"] if "fact" in evidence else item["title"]
        details = ["- %s: %s" % (cell(group_entry["value"]), cell(", ".join(group_entry["hosts"])))
                   for group_entry in evidence.get("groups", [])]
        if "groups" not in evidence:
            details.append("- evidence: %s" % code(json.dumps(item["evidence"], sort_keys=True)[:600]))
        lines.extend(finding_block(item, title, details))
    return "\n".join(lines).rstrip() + "\n"


def emit(document, options):
    markdown.emit(document, options, to_markdown)
