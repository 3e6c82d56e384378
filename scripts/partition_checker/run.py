"""The parent side: run the child in the sandbox, then render the document."""

import json
import os
import sys
import time

from diagnostics_core import calls
from diagnostics_core.contract import SCRIPTS
from . import CHILD_FLAG
from .budget import stage_bounds
from .findings import VERSION, TOOL

META_SHOWN_BYTES = 8192  # META.json content quoted in the JSON up to this size


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
    sections = (("root", os.path.abspath(options.root)), ("loading", None), ("meta", None), ("layout", None),
                ("examined", None), ("maps", None), ("parts", []), ("coverage", None), ("labels", None))
    options.bounds = stage_bounds(options.timeout)
    return calls.gather_in_child(os.path.join(SCRIPTS, "check_partition.py"), CHILD_FLAG, options, "load",
                                 "[partition] ", sections)
