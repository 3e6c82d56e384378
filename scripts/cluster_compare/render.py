"""Rendering for people: the markdown table (the JSON document is the runner's)."""

import json

from diagnostics_core.markdown import cell, code, finding_block


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
