"""The memory model's coefficients: the committed coefficients.json, a --coefficients file (a --calibrate
run's coefficients.values, checked key by key before any arithmetic), or measured here by --calibrate."""

import json
import math
import os

from diagnostics_core.cli import UsageError
from .findings import TOOL

LOADER_DESIGNS = ("private", "private_workers", "sorted", "sorted_workers")
LOADER_KEYS = tuple("%s_%s" % (design, quantity) for design in LOADER_DESIGNS
                    for quantity in ("peak_bytes", "steady_bytes", "shm_bytes"))
PREPROCESS_KEYS = ("sort", "to_undirected", "save")
CONVS = ("sage", "gcn", "gat", "gin", "transformer")
CONV_KEYS = ("saved_per_channel", "gathered_per_channel")
PROVENANCE_KEYS = ("torch", "torch_geometric", "date", "how")
# Anonymous memory per kind of process, the libraries' pages, the batches a rank's loop holds: measured by
# running loaders in each launch shape (maintainers/calibrate_planner.py, measure.calibrate_processes).
PROCESS_KEYS = ("interpreter_anon_bytes", "rank_anon_bytes", "agent_anon_bytes", "resource_tracker_anon_bytes",
                "fork_worker_anon_bytes", "bare_forkserver_anon_bytes", "spawn_worker_extra_anon_bytes",
                "library_file_bytes")
MAX_HELD_BATCHES = 100
MAX_COEFFICIENT = 1e6    # bytes per edge, node or channel: far past any measured value
MAX_BASE_BYTES = 1 << 40  # a process's RSS after importing torch
FILE_LIMIT, DEPTH_LIMIT = 16 << 20, 32


def committed_path():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "coefficients.json")


def load_committed():
    with open(committed_path(), "r", encoding="utf-8") as handle:
        return json.load(handle)


class Invalid(Exception):
    """A coefficients document that is not one: `key` is where (dotted), str() why."""

    def __init__(self, key, why):
        Exception.__init__(self, why)
        self.key = key


def child(value, key, name):
    if not isinstance(value, dict):
        raise Invalid(key or "(the document)", "expected an object, got %s" % type_word(value))
    if name not in value:
        raise Invalid(join(key, name), "missing")
    return value[name]


def join(key, name):
    return "%s.%s" % (key, name) if key else name


def type_word(value):
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false", type(None): "null"}.get(
        type(value), "a number")


def number(value, key, low, high):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Invalid(key, "expected a number, got %s" % type_word(value))
    if not math.isfinite(value):
        raise Invalid(key, "not a finite number (%s)" % value)
    if not low <= value <= high:
        raise Invalid(key, "must be between %g and %g, got %g" % (low, high, value))
    return value


def linear(value, key):
    for name in ("per_edge", "per_node"):
        number(child(value, key, name), join(key, name), -MAX_COEFFICIENT, MAX_COEFFICIENT)


def check(document):
    """Every key the model reads, with its type and range; Invalid names the first that is not."""
    provenance = child(document, "", "provenance")
    for name in PROVENANCE_KEYS:
        if not isinstance(child(provenance, "provenance", name), str):
            raise Invalid("provenance." + name, "expected a string, got %s" % type_word(provenance[name]))
    number(child(document, "", "process_base_bytes"), "process_base_bytes", 0, MAX_BASE_BYTES)
    for group, names in (("loader", LOADER_KEYS), ("preprocess", PREPROCESS_KEYS)):
        table = child(document, "", group)
        for name in names:
            linear(child(table, group, name), join(group, name))
    processes = child(document, "", "processes")
    for name in ("how", "date"):
        if not isinstance(child(child(processes, "processes", "provenance"), "processes.provenance", name), str):
            raise Invalid("processes.provenance." + name, "expected a string")
    for name in PROCESS_KEYS:
        number(child(processes, "processes", name), "processes." + name, 0, MAX_BASE_BYTES)
    number(child(processes, "processes", "main_batch_heap_batches"), "processes.main_batch_heap_batches", 0,
           MAX_HELD_BATCHES)
    conv = child(document, "", "conv")
    for kind in CONVS:
        entry = child(conv, "conv", kind)
        for name in CONV_KEYS:
            linear(child(entry, "conv." + kind, name), "conv.%s.%s" % (kind, name))


def read_file(path, rerun):
    """A --coefficients file, bounded and checked key by key; a usage error naming the file and the key.
    `rerun`: the words of this command line with --calibrate in place of --coefficients (the fix)."""
    from diagnostics_core import safe_json
    try:
        text = safe_json.read_bytes(path, FILE_LIMIT).decode("utf-8")
        if safe_json.nesting_depth(text) > DEPTH_LIMIT:
            raise Invalid("(the document)", "nested more than %d levels deep" % DEPTH_LIMIT)
        # NaN and Infinity parse as floats here, so the check below names the key that holds one
        document = json.loads(text, parse_constant=float)
        check(document)
    except safe_json.Refused as error:
        key, why = None, str(error)
    except UnicodeDecodeError as error:
        key, why = None, "not UTF-8 (byte %d)" % error.start
    except (ValueError, RecursionError) as error:
        key, why = None, "not JSON: %s" % str(error)[:200]
    except Invalid as error:
        key, why = error.key, str(error)
    else:
        return document
    raise UsageError("plan_capacity.py: error: --coefficients %s: %s%s" % (path, "%s: " % key if key else "", why),
                     "plan-coefficients-invalid", {"file": path, "key": key, "error": why},
                     "pass the coefficients.values of a --calibrate run's JSON, unedited, or measure them here: %s"
                     % TOOL.command(*rerun))


def installed_versions():
    """torch and torch_geometric versions from their metadata, without importing them."""
    from importlib import metadata
    found = {}
    for name in ("torch", "torch_geometric"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def version_key(text):
    return (text or "").split("+")[0]


def describe(chosen, used):
    """`used` (what the document's coefficients section says) for coefficients `chosen`, with the label every
    measured figure cites."""
    provenance = chosen["provenance"]
    labelled = dict(chosen, provenance_label="%s on torch %s, PyG %s, %s" % (
        used["used"], provenance["torch"], provenance["torch_geometric"], provenance["date"]),
        processes_label="measured per launch shape on %s" % chosen["processes"]["provenance"]["date"])
    return labelled, used


def given(path, document):
    """-> (coefficients, used) for the committed file (path None) or a --coefficients file."""
    installed = installed_versions()
    used = {"used": "file" if path else "committed", "file": os.path.abspath(path or committed_path()),
            "provenance": document["provenance"], "installed": installed,
            "version_mismatch": any(installed[k] is not None and version_key(installed[k]) !=
                                    version_key(document["provenance"][k]) for k in installed)}
    return describe(document, used)


def calibrated(measured):
    return describe(measured, {"used": "calibrated", "provenance": measured["provenance"],
                               "installed": installed_versions(), "version_mismatch": False, "values": measured})
