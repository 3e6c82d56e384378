"""Reading reports: bounded JSON, one type-checked accessor for every field, who each report is."""

import collections
import os

from diagnostics_core import safe_json
from diagnostics_core.text import sanitise
from .findings import unreadable


RANK_VARIABLES = (("RANK", "WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS"),
                  ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMI_RANK", "PMI_SIZE"))


def report_paths(arguments):
    paths = []
    for argument in arguments:
        if os.path.isdir(argument):
            paths += sorted(os.path.join(argument, name) for name in os.listdir(argument)
                            if name.endswith(".json"))
        else:
            paths.append(argument)
    return paths


REPORT_MAX_BYTES = 16 << 20


REPORT_MAX_DEPTH = 64


def load_report(path):
    """One report, parsed bounded (size, nesting; a FIFO is refused unopened) and made safe text."""
    try:
        document = safe_json.load_file(path, REPORT_MAX_BYTES, REPORT_MAX_DEPTH)
    except safe_json.TooLarge:
        raise
    except safe_json.Refused as error:
        raise unreadable("%s: %s" % (path, error), {"file": path, "error": str(error)})
    # Lone surrogates and endless strings become safe text once, here, so every output stays strict.
    document = sanitise(document)
    if not isinstance(document, dict) or "findings" not in document or "environment" not in document:
        raise unreadable("%s: not a check_sampling_backends.py report" % path,
                         {"file": path, "error": "no 'findings' and 'environment' keys"})
    report = Report(path, document)
    if not isinstance(report.get("schema_version"), str):
        raise Malformed(path, ("schema_version",), "str", report.get("schema_version"))
    return report


MISSING = object()  # a key the report lacks, unlike a fact that is null


class Malformed(Exception):
    """A field of a report has a type the checker never writes there."""

    def __init__(self, path, keys, expected, value):
        Exception.__init__(self, path)
        self.path, self.field, self.expected = path, ".".join(keys), expected
        self.got = "missing" if value is None else type(value).__name__

    def usage_error(self):
        return unreadable("%s: field %s is %s, expected %s" % (self.path, self.field, self.got, self.expected),
                          {"file": self.path, "field": self.field, "expected": self.expected, "got": self.got})


# Every field this tool reads, with the type the checker writes there ("*": any key). null is always
# accepted (a fact the checker could not learn); any other type makes the report unreadable.
TEXT, WHOLE, OBJECT = (str,), (int,), (dict,)


FIELD_TYPES = {
    ("schema_version",): TEXT, ("status",): TEXT,
    ("environment",): OBJECT, ("environment", "hostname"): TEXT, ("environment", "launch"): OBJECT,
    ("environment", "launch", "*"): OBJECT, ("environment", "launch", "*", "raw"): TEXT,
    ("environment", "launch", "*", "value"): (int, str), ("environment", "launch", "*", "error"): TEXT,
    ("environment", "network_interfaces"): ("list of str",),
    ("python",): OBJECT, ("python", "version"): TEXT, ("python", "executable"): TEXT, ("python", "prefix"): TEXT,
    ("torch",): OBJECT, ("torch", "version"): TEXT, ("torch", "cuda"): TEXT, ("torch", "file"): TEXT,
    ("cuda",): OBJECT, ("cuda", "nccl_version"): ("list of int",), ("cuda", "cudnn_version"): WHOLE,
    ("pyg",): OBJECT, ("pyg", "version"): TEXT, ("pyg", "file"): TEXT,
    ("sampling",): OBJECT, ("sampling", "neighbor_backend"): TEXT,
    ("extensions",): OBJECT, ("extensions", "*"): OBJECT, ("extensions", "*", "status"): TEXT,
    ("extensions", "*", "version"): TEXT, ("extensions", "*", "file"): TEXT,
    ("cpu",): OBJECT, ("cpu", "affinity"): OBJECT, ("cpu", "affinity", "count"): WHOLE,
    ("cpu", "logical_cores"): WHOLE,
    ("install",): OBJECT, ("install", "torch_minor"): TEXT, ("install", "variant"): TEXT,
    ("install", "platform"): TEXT, ("install", "index_url"): TEXT,
    ("findings",): (list,),
}


def declared_type(keys):
    for pattern, kinds in FIELD_TYPES.items():
        if len(pattern) == len(keys) and all(p in ("*", k) for p, k in zip(pattern, keys)):
            return kinds
    raise KeyError("compare_reports reads an undeclared field %s" % ".".join(keys))  # a bug here, not input


def has_type(value, kinds):
    if kinds == ("list of str",) or kinds == ("list of int",):
        item = str if kinds == ("list of str",) else int
        return isinstance(value, list) and all(isinstance(v, item) and not isinstance(v, bool) for v in value)
    return isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)


class Report(object):
    """A checker report read through one accessor: get() checks each field's type as it reads it."""

    def __init__(self, path, document):
        self.path, self.document = path, document

    def get(self, *keys, absent=None):
        """The field at `keys`: None when null, `absent` when the report lacks it; Malformed when it
        has a type the checker never writes there."""
        value = self.document
        for depth in range(len(keys)):
            if not isinstance(value, dict) or keys[depth] not in value:
                return absent
            value = value[keys[depth]]
            if value is None:
                return None
            kinds = declared_type(keys[:depth + 1])
            if not has_type(value, kinds):
                raise Malformed(self.path, keys[:depth + 1], " or ".join(
                    k if isinstance(k, str) else k.__name__ for k in kinds), value)
        return value

    def keys(self, *keys):
        """The keys of the object at `keys` (checked like get), sorted."""
        return sorted(self.get(*keys) or {})


def launch_entry(report, name):
    return report.get("environment", "launch", name)


def launch_value(report, name):
    entry = launch_entry(report, name)
    if entry is None or report.get("environment", "launch", name, "error") is not None:
        return None
    return report.get("environment", "launch", name, "value")


def rank_of(report):
    """(rank, world size, variable) from the first launcher that set a rank."""
    for rank_name, world_name in RANK_VARIABLES:
        rank = launch_value(report, rank_name)
        if isinstance(rank, int):
            world = launch_value(report, world_name)
            return rank, world if isinstance(world, int) else None, rank_name
    return None, None, None


def describe_reports(paths, reports):
    """One entry per report; `label` names the host (and rank when several share it)."""
    entries = []
    for path, report in zip(paths, reports):
        rank, world, rank_variable = rank_of(report)
        hostname = report.get("environment", "hostname")
        entries.append({"file": path, "hostname": hostname,
                        "host": hostname or os.path.splitext(os.path.basename(path))[0],
                        "rank": rank, "rank_variable": rank_variable, "world_size": world,
                        "checker_status": report.get("status"), "schema_version": report.get("schema_version")})
    per_host = collections.Counter(e["host"] for e in entries)
    for entry in entries:
        entry["label"] = entry["host"]
        if per_host[entry["host"]] > 1:
            entry["label"] += " rank %s" % entry["rank"] if entry["rank"] is not None else " (%s)" % entry["file"]
    return entries
