"""Reading reports: bounded JSON, one type-checked accessor for every field, and each report turned into a
node: plain data holding what the rules compare, read once here (a field of the wrong type is a refused
input, never a rule's crash)."""

import functools
import os

from diagnostics_core import safe_json
from diagnostics_core.netenv import SOCKET_IFNAME_VARIABLES
from diagnostics_core.text import sanitise, sanitise_text
from diagnostics_core.wheels import EXTENSIONS
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
    """One report file, parsed bounded (size, nesting; a FIFO is refused unopened); TooLarge passes through."""
    try:
        document = safe_json.load_file(path, REPORT_MAX_BYTES, REPORT_MAX_DEPTH)
    except safe_json.TooLarge:
        raise
    except safe_json.Refused as error:
        raise unreadable("%s: %s" % (path, error), {"file": path, "error": str(error)})
    return report_of(path, document)


def report_of(path, document):
    """A parsed document as a Report; a document that is no checker report is refused."""
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


@functools.lru_cache(maxsize=None)
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
    """A checker report read through one accessor: get() checks each field's type as it reads it, and makes
    the text it returns safe (lone surrogates, endless strings), so every output stays strict."""

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
        return sanitise(value) if isinstance(value, str) or kinds == ("list of str",) else value


# Facts compared across reports: (name, where in the report, the finding a difference gives).
STACK_FACTS = (
    ("python", ("python", "version"), "cluster-stack-drift"),
    ("torch", ("torch", "version"), "cluster-stack-drift"),
    ("torch CUDA", ("torch", "cuda"), "cluster-stack-drift"),
    ("NCCL", ("cuda", "nccl_version"), "cluster-stack-drift"),
    ("cuDNN", ("cuda", "cudnn_version"), "cluster-cudnn-drift"),
    ("torch_geometric", ("pyg", "version"), "cluster-stack-drift"),
    ("neighbor backend", ("sampling", "neighbor_backend"), "cluster-stack-drift"),
)
EXTENSION_MODULES = tuple(module for module, _ in EXTENSIONS)  # the ones the checker reports, no others
LAUNCH_AGREED = ("WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
# name -> the finding a difference in it gives; the order facts are shown in
FACTS = tuple((name, finding_id) for name, _, finding_id in STACK_FACTS) + tuple(
    (module, "cluster-stack-drift") for module in EXTENSION_MODULES) + tuple(
    (name, "cluster-launch-disagrees") for name in LAUNCH_AGREED) + (("usable cores", "cluster-cpu-count-differs"),)
MODULE_FILES = {"torch": ("torch", "file"), "torch_geometric": ("pyg", "file")}
LAUNCH_READ = LAUNCH_AGREED + tuple(SOCKET_IFNAME_VARIABLES) + ("LOCAL_WORLD_SIZE",)

HOST_CHARS = 128  # of a host name or file name in a label: real host names are at most 64
LAUNCH_IDS_KEPT = 64  # distinct launch error ids kept per report (the checker has far fewer)


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


def usable_cores(report):
    count = report.get("cpu", "affinity", "count")
    if count:
        return count
    return report.get("cpu", "logical_cores")


def compared_values(report):
    """name -> value for every compared fact the report has (a fact it lacks is left out; null stays None)."""
    values = {}
    for name, path, _ in STACK_FACTS:
        value = report.get(*path, absent=MISSING)
        if name == "python" and value and value is not MISSING:
            value = ".".join(value.split(".")[:2])  # patch releases interoperate
        if value is not MISSING:
            values[name] = value
    for module in EXTENSION_MODULES:
        status = report.get("extensions", module, "status")
        if status is not None:
            version = report.get("extensions", module, "version")
            values[module] = status + (" " + version if status == "ok" and version else "")
    for name in LAUNCH_AGREED:
        # None: not set on that node (shown as null, never as a value to export)
        values[name] = report.get("environment", "launch", name, "raw") if launch_entry(report, name) else None
    values["usable cores"] = usable_cores(report)
    return values


def launch_errors(report):
    """[(id, fix)] of the error findings about the launch in the node's own report."""
    found = []
    for item in report.get("findings") or []:
        if isinstance(item, dict) and item.get("severity") == "error":
            finding_id, fix = item.get("id"), item.get("fix")
            if isinstance(finding_id, str) and finding_id.startswith("launch-") and len(found) < LAUNCH_IDS_KEPT:
                found.append({"id": sanitise(finding_id), "fix": sanitise(fix) if isinstance(fix, str) else None})
    return found


def node(path, report):
    """One report as plain data: who it is and every fact a rule reads."""
    rank, world, rank_variable = rank_of(report)
    hostname = report.get("environment", "hostname")
    files = dict((name, report.get(*keys)) for name, keys in MODULE_FILES.items())
    extensions = {}
    for module in EXTENSION_MODULES:
        files[module] = report.get("extensions", module, "file")
        extensions[module] = {"status": report.get("extensions", module, "status"),
                              "version": report.get("extensions", module, "version")}
    local = launch_value(report, "LOCAL_WORLD_SIZE")
    return {
        "file": path, "hostname": hostname,
        "host": sanitise_text(hostname or os.path.splitext(os.path.basename(path))[0], HOST_CHARS),
        "rank": rank, "rank_variable": rank_variable, "world_size": world,
        "checker_status": report.get("status"), "schema_version": report.get("schema_version"),
        "values": compared_values(report),
        "files": dict((name, path) for name, path in files.items() if path),
        "extensions": extensions,
        "python": report.get("python", "executable"), "prefix": report.get("python", "prefix"),
        "python_version": report.get("python", "version"),
        "install": dict((key, report.get("install", key)) for key in ("torch_minor", "variant", "platform",
                                                                       "index_url")),
        "launch": dict((name, {"raw": report.get("environment", "launch", name, "raw"),
                               "error": report.get("environment", "launch", name, "error")})
                       for name in LAUNCH_READ if launch_entry(report, name) is not None),
        "local_processes": local if isinstance(local, int) and local > 0 else 1,
        "interfaces": report.get("environment", "network_interfaces"),
        "launch_errors": launch_errors(report),
        "cores": usable_cores(report),
    }


def label_nodes(nodes):
    """Each node's `label` names its host, and its rank (or file) when several reports share the host."""
    per_host = {}
    for item in nodes:
        per_host[item["host"]] = per_host.get(item["host"], 0) + 1
    for item in nodes:
        item["label"] = item["host"]
        if per_host[item["host"]] > 1:
            item["label"] += " rank %s" % item["rank"] if item["rank"] is not None else \
                " (%s)" % sanitise_text(item["file"], HOST_CHARS)
    return nodes
