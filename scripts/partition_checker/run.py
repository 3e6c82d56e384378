"""The parent side: run the child in the sandbox, then render the document."""

import json
import os
import sys
import time

from diagnostics_core import calls, sandbox
from diagnostics_core.calls import CallerState
from diagnostics_core.contract import SCRIPTS
from diagnostics_core.interrupt import Interrupted
from . import CHILD_FLAG
from .findings import VERSION, META_SHOWN_BYTES, TOOL


def shown_meta(content):
    """META.json as quoted in the JSON: whole when small, else its size (the file is the evidence)."""
    size = len(json.dumps(content))
    return content if size <= META_SHOWN_BYTES else {"not_shown": "%d bytes of JSON" % size}


FACT_SECTIONS = ("root", "loading", "meta", "layout", "examined", "maps", "parts", "coverage", "labels")


def render(facts, findings, options, started, internal_error=None, usage_error=False, interrupted=None):
    # The gate "contract" fails on any error finding; it is not applied when the run never started.
    has_error = any(f["severity"] == "error" for f in findings)
    gates = {} if usage_error or internal_error is not None else {"contract": {"passed": not has_error}}
    parts = facts.get("parts") or []
    meta = {"name": TOOL.name, "version": VERSION, "argv": sys.argv[1:],
            "timeout_s": getattr(options, "timeout", None), "elapsed_s": round(time.time() - started, 3),
            "read_only": True, "child": facts.get("child")}
    document, exit_code = TOOL.document(findings, gates, meta, usage_error=usage_error, internal_error=internal_error,
                                        interrupted=interrupted)
    document["verdict"] = {
        "parts_checked": len(parts),
        "from_partition_fails": sorted(p["index"] for p in parts if any(
            v["loads"] is False for v in p.get("from_partition", {}).values())),
        "from_partition_unknown": sorted(p["index"] for p in parts if any(
            v["loads"] is None for v in p.get("from_partition", {}).values()))}
    for section in FACT_SECTIONS:
        document[section] = facts.get(section)
    if isinstance(document["meta"], dict) and "content" in document["meta"]:
        document["meta"] = dict(document["meta"], content=shown_meta(document["meta"]["content"]))
    return document, exit_code


def run_child(options):
    """Gather the facts in a sandboxed child; -> (facts, CallerState)."""
    try:
        facts, done, outcome, timed_out, crash = calls.run_tool_child(
            os.path.join(SCRIPTS, "check_partition.py"), CHILD_FLAG, options, "load", echo_stderr="[partition] ")
    except Interrupted as stop:
        stop.facts = with_every_section(dict(stop.facts or {}), options)
        stop.facts["child"] = sandbox.call_child_summary(stop.result)
        raise
    if done is not None:
        facts, state = done["facts"], CallerState(**done["caller"])
    elif outcome.returncode == 0 and outcome.killed_for is None:
        # The child finished, but its last record never arrived whole (too large for one record):
        # a bound on output, not a crash. The facts it published one by one still hold.
        state = CallerState()
        facts["report_lost"] = {"reason": "the child's final record exceeded the record size limit",
                                "child_returncode": 0}
    else:
        state = CallerState(timed_out=timed_out)
        if crash:
            facts["crash"] = crash
    facts = with_every_section(facts, options)
    facts["child"] = sandbox.call_child_summary(outcome)
    return facts, state


def with_every_section(facts, options):
    """Sections a crash, kill or signal cut short, present and empty."""
    for key, value in (("root", os.path.abspath(options.root)), ("loading", None), ("meta", None),
                       ("layout", None), ("examined", None), ("maps", None), ("parts", []), ("coverage", None),
                       ("labels", None)):
        facts.setdefault(key, value)
    return facts
