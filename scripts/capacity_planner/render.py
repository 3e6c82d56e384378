"""Rendering: the JSON document, and a markdown table of the designs for people."""

from diagnostics_core import text
from diagnostics_core.markdown import cell, code, finding_block
from .calibrate import step_text

GIB = float(1 << 30)
SECTIONS = ("request", "read_sizes", "coefficients", "calibration", "cheapest_fit", "fits_all_gpus", "designs",
            "preprocessing")


def render(document, facts, options):
    """The plan's sections after the envelope, those the run got to (an interrupted or refused run has fewer).
    A finished calibration's measurements are in coefficients.values.runs; one cut short shows them here."""
    for key in SECTIONS:
        if key in facts:
            document[key] = facts[key]
    calibration = document.get("calibration")
    if calibration and calibration["state"] == "finished":
        document["calibration"] = dict((k, v) for k, v in calibration.items() if k != "measured")


def gib(value):
    return "%.1f GiB" % (value / GIB)


def to_markdown(document):
    lines = ["# Capacity plan: %s (exit %d)" % (document["status"], document["exit_code"]), ""]
    used = document.get("coefficients")
    if used:
        lines += ["Coefficients: %s (%s)." % (used["used"], cell(text.bounded(used["provenance"]["how"], 600))), ""]
    calibration = document.get("calibration")
    if calibration and calibration["state"] != "finished":
        lines += ["Calibration %s after %d of %d steps%s." % (
            calibration["state"], len(calibration["finished"]), len(calibration["planned"]),
            ", cut at %s" % cell(step_text(calibration["cut"])) if calibration.get("cut") else ""), ""]
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

