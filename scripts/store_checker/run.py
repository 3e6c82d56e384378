"""The parent side: run the child in the sandbox, then render the document."""

import os
import sys
import time

from diagnostics_core import calls, sandbox
from diagnostics_core.calls import CallerState
from diagnostics_core.contract import SCRIPTS
from diagnostics_core.interrupt import Interrupted
from . import CHILD_FLAG
from .findings import VERSION, TOOL


FACT_SECTIONS = ("setup", "tensor_attrs", "tensors", "edge_attrs", "edges", "graph_meta", "missing_keys",
                 "sampling", "worker_sampling", "write_check")


def render(facts, findings, options, caller, started, internal_error=None, usage_error=False, interrupted=None):
    # The gate "contract" fails on any error finding; it is not applied when the run never started.
    has_error = any(f["severity"] == "error" for f in findings)
    gates = {} if usage_error or internal_error is not None else {"contract": {"passed": not has_error}}
    meta = {
        "name": TOOL.name,
        "version": VERSION,
        "argv": sys.argv[1:],
        "timeout_s": getattr(options, "timeout", None),
        "setup_timeout_s": getattr(options, "setup_timeout", None),
        "write_check": bool(getattr(options, "write_check", False)),
        "calls": caller.count,
        "skipped_calls": len(caller.skipped),
        "elapsed_s": round(time.time() - started, 3),
        "read_only": not getattr(options, "write_check", False),
        "child": facts.get("child"),
    }
    document, exit_code = TOOL.document(findings, gates, meta, usage_error=usage_error, internal_error=internal_error,
                                        interrupted=interrupted)
    document["versions"] = facts.get("versions")
    for section in FACT_SECTIONS:
        document[section] = facts.get(section)
    return document, exit_code


def run_child(options):
    """Gather the facts in a sandboxed child; -> (facts, CallerState). What the stores print is
    passed on to stderr. Interrupted (SIGINT/SIGTERM) goes up with the facts published so far."""
    try:
        facts, done, outcome, timed_out, crash = calls.run_tool_child(
            os.path.join(SCRIPTS, "check_store_contract.py"), CHILD_FLAG, options, "call", echo_stderr="[store] ")
    except Interrupted as stop:
        stop.facts = with_every_section(dict(stop.facts or {}))
        stop.facts["child"] = sandbox.call_child_summary(stop.result)
        raise
    if done is not None:
        facts = done["facts"]
        state = CallerState(**done["caller"])
    else:
        state = CallerState(timed_out=timed_out)
        if crash:
            facts["crash"] = crash
            for key in ("sampling", "worker_sampling"):
                if (facts.get(key) or {}).get("status") == "running":
                    facts[key]["status"] = "crashed"
    facts = with_every_section(facts)
    facts["child"] = sandbox.call_child_summary(outcome)
    return facts, state


def with_every_section(facts):
    """Sections a crash, kill or signal cut short, present and empty."""
    for key, value in (("setup", None), ("tensor_attrs", None), ("tensors", []), ("edge_attrs", None),
                       ("edges", []), ("graph_meta", None), ("missing_keys", None), ("sampling", None),
                       ("worker_sampling", None), ("write_check", {"performed": False})):
        facts.setdefault(key, value)
    return facts
