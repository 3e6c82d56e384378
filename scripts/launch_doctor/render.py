"""Rendering: the JSON document, and markdown with the topology as a table."""

import json
import re

from diagnostics_core.markdown import cell, code, terminal_line
from diagnostics_core.text import bounded
from . import reading
from .parse import LINE_MAX_CHARS
from .shell import FIRST_NODE


def public_step(step):
    shown = dict((k, v) for k, v in step.items() if k != "version_shapes")
    return shown


LIMITS = {"script_max_bytes": reading.SCRIPT_MAX_BYTES, "log_window_bytes": reading.LOG_WINDOW_BYTES,
          "log_line_max_chars": reading.LINE_MAX_CHARS, "script_line_max_chars": LINE_MAX_CHARS}


def render(document, facts, options):
    """The doctor's sections: what it read, its limits, and the topology (null when it never got there)."""
    document["inputs"] = facts.get("inputs") or {}
    document["limits"] = LIMITS
    topology = facts.get("topology")
    document["topology"] = None if topology is None else {
        "allocation": topology["allocation"], "components": topology.get("components"),
        "steps": [public_step(s) for s in topology["steps"]]}


def show(value):
    if value is None:
        return "?"
    if isinstance(value, list):
        return "%s-%s" % (value[0], value[1]) if value[0] != value[1] else str(value[0])
    return str(value)


def rendezvous_cell(step):
    rdzv = step.get("rendezvous")
    if not rdzv:
        return "-"
    text = "%s %s" % (rdzv["backend"], rdzv["endpoint"].replace(FIRST_NODE, "(first node)"))
    if rdzv.get("id"):
        text += " id=%s" % rdzv["id"]
    return text


def launcher_cell(step):
    text = "%s > %s" % (step["launcher"], step["program"])
    return text if step.get("het_group") is None else "%s (component %d)" % (text, step["het_group"])


ALLOCATION = "%s node(s), %s task(s) per node, %s CPU(s) per task (%s per node), %s GPU(s) per node"
ALLOCATION_KEYS = ("nodes", "tasks_on_node", "cpus_per_task", "cpus_on_node", "gpus_per_node")


COLUMNS = (("line", lambda s: s["line"]), ("launcher", launcher_cell),
           ("nodes", lambda s: s["nodes"]), ("tasks/node", lambda s: s["tasks_per_node"]),
           ("CPUs/task", lambda s: s["cpus_per_task"] if s["cpus_per_task"] is not None else (
               "by version" if s.get("by_version") else None)),
           ("agents (joined)", lambda s: "%s (%s)" % (show(s["agents"]), show(s["agents_joined"])) if "agents" in s
            else "-"),
           ("ranks/node", lambda s: s.get("ranks_per_node")), ("world", lambda s: s.get("world_size")),
           ("CPUs/rank", lambda s: s.get("cpus_per_rank")),
           ("threads/rank", lambda s: (s.get("threads_per_rank") or {}).get("value") or "default"),
           ("GPUs/rank", lambda s: s.get("gpus_per_rank") if s.get("gpus_per_rank") is not None else "-"),
           ("rendezvous", rendezvous_cell))


def fix_lines(fix):
    """A one-line fix as inline code; a fix of several lines (a corrected line, then another) as a fenced
    block whose fence is longer than any run of backticks in it, each line kept free of control characters."""
    if "\n" not in fix:
        return ["- fix: %s" % code(fix)]
    body = [terminal_line(line) for line in fix.split("\n")]
    longest = max([len(run) for line in body for run in re.findall(r"`+", line)] or [0])
    fence = "`" * max(3, longest + 1)
    return ["- fix:", "", fence + "bash"] + body + [fence, ""]


def to_markdown(document):
    lines = ["# Launch doctor: %s (exit %d)" % (document["status"], document["exit_code"]), ""]
    inputs = document.get("inputs") or {}
    if inputs.get("slurm_version"):
        version = inputs["slurm_version"]
        lines.append("SLURM: %s" % cell(version.get("text") or "not given (CPU figures shown per version range)"))
    topology = document.get("topology")
    if topology:
        alloc = topology["allocation"]
        lines.append("Allocation: " + ALLOCATION % tuple(cell(show(alloc[k])) for k in ALLOCATION_KEYS))
        for index, component in enumerate(topology.get("components") or []):
            lines.append("- Component %d: " % index + ALLOCATION % tuple(cell(show(component[k]))
                                                                        for k in ALLOCATION_KEYS))
        lines.append("")
        if topology["steps"]:
            lines += ["| " + " | ".join(name for name, _ in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
            for step in topology["steps"]:
                lines.append("| " + " | ".join(cell(show(get(step))) for _, get in COLUMNS) + " |")
            lines.append("")
            for step in topology["steps"]:
                for note in step.get("notes") or []:
                    lines.append("- line %s: %s" % (step["line"], cell(note)))
                for label, values in (step.get("by_version") or {}).items():  # oldest range first
                    lines.append("- line %s, SLURM %s: %s CPU(s) per task, %s per rank (%s)" % (
                        step["line"], cell(label), cell(show(values.get("cpus_per_task"))),
                        cell(show(values.get("cpus_per_rank"))), cell(values.get("cpus_source"))))
            lines.append("")
    for item in document["findings"]:
        lines.append("## %s %s: %s" % (cell(item["severity"]), code(item["id"]), cell(item["title"])))
        evidence = item["evidence"] if isinstance(item["evidence"], dict) else {"value": item["evidence"]}
        if "text" in evidence:
            lines.append("- line %s: %s" % (cell(evidence.get("line")), code(evidence["text"])))
        why = evidence.get("why") or "; ".join(evidence.get("problems") or [])
        if why:
            lines.append("- why: %s" % cell(why))
        rest = dict((k, v) for k, v in evidence.items() if k not in ("text", "line", "why", "problems"))
        if rest:
            lines.append("- evidence: %s" % code(bounded(json.dumps(rest, sort_keys=True), 600)))
        if item["fix"]:
            lines += fix_lines(item["fix"])
        lines.append("- docs: %s" % cell(item["docs"]))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
