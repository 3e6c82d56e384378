"""Rendering: the JSON document, and a markdown table of the designs for people."""

from diagnostics_core import text
from diagnostics_core.markdown import cell, code, finding_block
from .calibrate import step_text

SECTIONS = ("request", "read_sizes", "coefficients", "calibration", "cheapest_fit", "fits_all_gpus", "designs",
            "preprocessing", "measure")


def render(document, facts, options):
    """The plan's sections after the envelope, those the run got to (an interrupted or refused run has fewer).
    A finished calibration's measurements are in coefficients.values.runs; one cut short shows them here."""
    for key in SECTIONS:
        if key in facts:
            document[key] = facts[key]
    calibration = document.get("calibration")
    if calibration and calibration["state"] == "finished":
        document["calibration"] = dict((k, v) for k, v in calibration.items() if k != "measured")


def size(value):
    if value is None:
        return "-"
    return "%.1f GiB" % (value / float(1 << 30)) if value >= 1 << 30 else "%.0f MiB" % (value / float(1 << 20))


def shape_cell(design):
    shape = design["launch_shape"]
    threads = " x %d threads" % shape["threads_per_rank"] if "threads_per_rank" in shape else ""
    return "%s, %d%s; %d workers (%s)" % (shape["launch"], shape["ranks"], threads, shape["workers"],
                                          shape["worker_start_method"])


def design_rows(designs):
    lines = ["| design | GPUs | launch, ranks per node; workers (start) | node memory (peak) | /dev/shm per node "
             "(per rank) | GPU per rank (worst / expected) | fits |", "|---|---|---|---|---|---|---|"]
    for design in designs:
        host, gpu = design["host"], design["gpu"]
        expected = design.get("gpu_expected", gpu)
        failed = [k for k, v in design["fits"].items() if k != "all" and not v]
        lines.append("| %s | %s | %s | %s (%s) | %s (%s) | %s | %s |" % (
            cell(design["design"]), design["gpus"], cell(shape_cell(design)), size(host["per_node_peak"]["bytes"]),
            host["per_node_peak"]["stage"], size(host["shm_per_node"]["bytes"]), size(host["shm_per_rank"]["bytes"]),
            "%s / %s" % (size(gpu["bytes"]), size(expected["bytes"])) if gpu else "-",
            "yes" if design["fits"]["all"] else "not needed" if design.get("applies") is False
            else "no (%s)" % ", ".join(failed)))
    return lines


def measure_lines(record):
    measured = record.get("measured") or {}
    peak = measured.get("peak") or {}
    ratio = record.get("ratio") or {}
    private = record.get("private_shm") or {}
    lines = ["## Measured: %s (%s)" % (code(record["design"]), record["state"]), "",
             "| per node | model | measured | model / measured |", "|---|---|---|---|",
             "| /dev/shm peak | %s | %s | %s |" % (size(record["model"]["shm_per_node_bytes"]),
                                                  size(peak.get("shm_bytes")), ratio.get("shm_per_node")),
             "| node memory peak | %s | %s | %s |" % (size(record["model"]["node_memory_peak_bytes"]),
                                                     size(peak.get("node_bytes")), ratio.get("node_memory")), ""]
    lines.append("/dev/shm: %s." % ("a private tmpfs" if private.get("private") else "the host's, as a difference "
                                    "(%s)" % cell(private.get("why_not") or "not started")))
    if record.get("failure"):
        lines.append("Failed: %s." % cell(text.bounded(record["failure"]["kind"], 200)))
    return lines + [""]


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
        lines += design_rows(document["designs"]) + [""]
        lines.append("Cheapest that fits: %s; the first that uses every GPU: %s." % (
            code(document["cheapest_fit"]) if document["cheapest_fit"] else "none",
            code(document["fits_all_gpus"]) if document.get("fits_all_gpus") else "none"))
        lines.append("")
    for step in document.get("preprocessing", []):
        lines.append("- one-off %s: peak %s" % (code(step["step"]), size(step["peak"]["bytes"])))
    lines.append("")
    if document.get("measure"):
        lines += measure_lines(document["measure"])
    for item in document["findings"]:
        lines.extend(finding_block(item))
    return "\n".join(lines).rstrip() + "\n"
