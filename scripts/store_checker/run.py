"""The parent side: run the child in the sandbox, then render the document."""

import os
import sys
import time

from diagnostics_core import calls
from diagnostics_core.contract import SCRIPTS
from . import CHILD_FLAG
from .budget import stage_bounds
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


# Each fact section, empty as a crash, kill or signal leaves it.
EMPTY_SECTIONS = (("setup", None), ("tensor_attrs", None), ("tensors", []), ("edge_attrs", None), ("edges", []),
                  ("graph_meta", None), ("missing_keys", None), ("sampling", None), ("worker_sampling", None),
                  ("write_check", {"performed": False}))


def run_child(options):
    """Gather the facts in a sandboxed child; -> (facts, CallerState). What the stores print is
    passed on to stderr. Interrupted (SIGINT/SIGTERM) goes up with the facts published so far."""
    options.bounds = stage_bounds(options.timeout, options.setup_timeout)
    facts, state = calls.gather_in_child(os.path.join(SCRIPTS, "check_store_contract.py"), CHILD_FLAG, options,
                                         "call", "[store] ", EMPTY_SECTIONS)
    if facts.get("crash"):  # a loader batch that was running when the child died died with it
        for key in ("sampling", "worker_sampling"):
            if (facts.get(key) or {}).get("status") == "running":
                facts[key]["status"] = "crashed"
    return facts, state
