"""Rendering: the JSON document, and a markdown table of the designs for people."""

import sys
import time

from diagnostics_core import markdown, text
from diagnostics_core.markdown import cell, code, finding_block
from .findings import TOOL, VERSION

GIB = float(1 << 30)


def render(facts, findings, gates, started, internal_error=None, usage_error=False):
    meta = {"name": "plan_capacity.py", "version": VERSION, "argv": sys.argv[1:],
            "elapsed_s": round(time.time() - started, 3)}
    document, exit_code = TOOL.document(findings, gates, meta, usage_error=usage_error,
                                        internal_error=internal_error)
    for key in ("request", "read_sizes", "coefficients", "cheapest_fit", "fits_all_gpus", "designs",
                "preprocessing"):
        if key in facts:
            document[key] = facts[key]
    return document, exit_code


def gib(value):
    return "%.1f GiB" % (value / GIB)


def to_markdown(document):
    lines = ["# Capacity plan: %s (exit %d)" % (document["status"], document["exit_code"]), ""]
    used = document.get("coefficients")
    if used:
        lines += ["Coefficients: %s (%s)." % (used["used"], cell(text.bounded(used["provenance"]["how"], 600))), ""]
    if document.get("designs"):
        lines += ["| design | GPUs | host RAM per node (peak) | /dev/shm per node | GPU per rank (worst / expected) "
                  "| fits |", "|---|---|---|---|---|---|"]
        for design in document["designs"]:
            expected = design.get("gpu_expected", design["gpu"])
            failed = [k for k, v in design["fits"].items() if k != "all" and not v]
            lines.append("| %s | %s | %s | %s | %s / %s | %s |" % (
                cell(design["design"]), design["gpus"], gib(design["host"]["per_node_peak"]["bytes"]),
                gib(design["host"]["shm_per_node"]["bytes"]), gib(design["gpu"]["bytes"]), gib(expected["bytes"]),
                "yes" if design["fits"]["all"] else "not needed" if design.get("applies") is False
                else "no (%s)" % ", ".join(failed)))
        lines.append("")
        lines.append("Cheapest that fits: %s; the first that uses every GPU: %s." % (
            code(document["cheapest_fit"]) if document["cheapest_fit"] else "none",
            code(document["fits_all_gpus"]) if document.get("fits_all_gpus") else "none"))
        lines.append("")
    for step in document.get("preprocessing", []):
        lines.append("- one-off %s: peak %s" % (code(step["step"]), gib(step["peak"]["bytes"])))
    lines.append("")
    for item in document["findings"]:
        lines.extend(finding_block(item))
    return "\n".join(lines).rstrip() + "\n"


def emit(document, options):
    markdown.emit(document, options, to_markdown)
