"""The parent side: the folder is read in a sandboxed child (gather), the document's sections (render, meta),
and this run's command line rebuilt from its parsed options, for the fixes that rerun it (rerun_words)."""

import json
import os

from diagnostics_core import calls
from diagnostics_core.contract import SCRIPTS
from . import CHILD_FLAG
from .findings import TOOL

DEFAULT_TIMEOUT = 120.0  # seconds per file load
DEFAULT_MAX_PARTS = 256  # parts examined; each adds a few kilobytes of JSON and its files' load time
META_SHOWN_BYTES = 8192  # META.json content quoted in the JSON up to this size

FACT_SECTIONS = ("root", "loading", "meta", "layout", "examined", "maps", "parts", "coverage", "labels")


def gather(run):
    """Gather the facts in a sandboxed child; Interrupted (SIGINT/SIGTERM) goes up with what it published.
    The child loads files and replays PyG's from_partition, which write nothing to the temp dir."""
    options = run.options
    sections = (("root", os.path.abspath(options.root)), ("loading", None), ("meta", None), ("layout", None),
                ("examined", None), ("maps", None), ("parts", []), ("coverage", None), ("labels", None))
    run.facts.update(calls.gather_in_child(os.path.join(SCRIPTS, TOOL.name + ".py"), CHILD_FLAG, options, "load",
                                           "[partition] ", sections))


def shown_meta(content):
    """META.json as quoted in the JSON: whole when small, else its size (the file is the evidence)."""
    size = len(json.dumps(content))
    return content if size <= META_SHOWN_BYTES else {"not_shown": "%d bytes of JSON" % size}


def render(document, facts, options):
    parts = facts.get("parts") or []
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


def meta(facts, options):
    return {"timeout_s": options.timeout, "read_only": True, "child": facts.get("child")}


def rerun_words(options, **changed):
    """This run's command line as words (each one argument, unquoted: Tool.command quotes them), with absolute
    paths so that it works from any folder; `changed`: allow_pickle=, timeout=, max_parts=."""
    value = lambda name: changed.get(name, getattr(options, name))  # noqa: E731
    words = [os.path.abspath(options.root)]
    if options.labels:
        words += ["--labels", os.path.abspath(options.labels)]
    if options.label_node_type:
        words += ["--label-node-type=" + options.label_node_type]  # one word, whatever the type's name starts with
    words += ["--allow-pickle"] * bool(value("allow_pickle"))
    if value("timeout") != DEFAULT_TIMEOUT:
        words += ["--timeout", "%g" % value("timeout")]
    if value("max_parts") != DEFAULT_MAX_PARTS:
        words += ["--max-parts", str(value("max_parts"))]
    return words
