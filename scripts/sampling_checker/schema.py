"""The JSON Schema of the checker's output (--schema), and its fact sections: one table, FACT_SCHEMAS, from
which the document's order (render), --schema and the committed schema file
(scripts/check_sampling_backends.schema.json, written by maintainers/build_bundle.py) all come."""

import signal

from diagnostics_core.contract import EXIT_GATE_FAILED, EXIT_INTERNAL, EXIT_INTERRUPTED_BASE, EXIT_OK, EXIT_USAGE
from .findings import FINDINGS, SCHEMA_VERSION

OBJECT_OR_NULL = {"type": ["object", "null"]}

# The document's fact sections in the order it prints them, each with its schema.
FACT_SCHEMAS = (
    ("interpreter", {"type": ["object", "null"], "required": ["chosen_by", "probed", "running"],
                     "properties": {"chosen_by": {"enum": ["--python", "active-environment", "running"]}}}),
    ("python", {"type": ["object", "null"], "required": ["version", "executable", "machine", "libc"]}),
    ("distributions", {"type": ["object", "null"], "required": ["packages", "module_claims"]}),
    ("torch_build", {"type": ["object", "null"], "required": ["found"]}),
    ("pyg_source", {"type": ["object", "null"], "required": ["found"]}),
    ("cpu", {"type": ["object", "null"], "required": ["logical_cores"]}),
    ("environment", {"type": ["object", "null"], "required": ["threads", "launch"]}),
    # What a container or cgroup limits (diagnostics_core.container); a part it cannot read is null.
    ("container", {"type": ["object", "null"], "required": ["shm", "cgroup_cpu", "cgroup_memory", "host_memory_bytes",
                                                            "cores", "open_files"]}),
    ("probe", OBJECT_OR_NULL),
    ("torch", OBJECT_OR_NULL),
    ("cuda", OBJECT_OR_NULL),
    ("distributed", OBJECT_OR_NULL),
    ("pyg", OBJECT_OR_NULL),
    ("extensions", {"type": ["object", "null"], "additionalProperties": {
        "type": "object", "required": ["status", "distribution"],
        "properties": {"status": {"enum": [
            "ok", "not-installed", "import-error", "crashed", "hung", "blocked", "not-run",
            "probe-error", "not-probed"]}}}}),
    ("sampling", {"type": ["object", "null"], "properties": {
        "neighbor_backend": {"enum": ["pyg-lib", "torch-sparse", None]}}}),
    ("install", OBJECT_OR_NULL),
)
FACT_SECTIONS = tuple(name for name, _ in FACT_SCHEMAS)


def json_schema():
    """The output contract. Sections hold plain facts; their inner keys may grow.

    A fact section is null when the checker stopped before gathering it: a
    usage error (exit 2) or an internal error (exit 3).
    """
    finding_schema = {
        "type": "object",
        "required": ["id", "severity", "title", "evidence", "fix", "docs"],
        "additionalProperties": False,
        "properties": {
            "id": {"enum": sorted(FINDINGS)},
            "severity": {"enum": ["error", "warning", "info"]},
            "title": {"type": "string", "minLength": 1},
            "evidence": {"type": "object"},
            "fix": {"type": ["string", "null"]},
            "docs": {"type": "string", "pattern": "^references/troubleshooting\\.md#[a-z0-9-]+$"},
        },
    }
    gate_schema = {"type": "object", "required": ["passed"], "properties": {"passed": {"type": "boolean"}}}
    properties = {
        "schema_version": {"const": SCHEMA_VERSION},
        "ok": {"type": "boolean", "description": "no error finding, no failed gate, no internal error"},
        "status": {"enum": ["ok", "warning", "error", "incomplete", "gate-failed", "usage-error",
                            "internal-error", "interrupted"]},
        "exit_code": {"enum": [EXIT_OK, EXIT_GATE_FAILED, EXIT_USAGE, EXIT_INTERNAL]
                      + [EXIT_INTERRUPTED_BASE + number for number in (signal.SIGINT, signal.SIGTERM)]},
        "findings": {"type": "array", "items": finding_schema},
        "gates": {"type": "object", "additionalProperties": gate_schema,
                  "propertyNames": {"enum": ["neighbor_backend", "cuda", "distributed"]}},
        "checker": {"type": "object", "required": ["version", "mode", "detail", "elapsed_s", "read_only"],
                    "properties": {"detail": {"enum": ["compact", "full"]}}},
    }
    properties.update(FACT_SCHEMAS)
    order = ["schema_version", "ok", "status", "exit_code", "findings", "gates", "checker"] + list(FACT_SECTIONS)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "check_sampling_backends.schema.json",
        "title": "check_sampling_backends.py output",
        "description": "One JSON document printed on stdout. Keys appear in this order: " + ", ".join(order)
                       + ". schema_version is MAJOR.MINOR: MAJOR changes when a key of the default output is "
                         "removed or renamed or a value changes type or meaning, MINOR when keys, enum values "
                         "or finding ids are added. Bulky facts (every install record, operator lists, all "
                         "PyG flags, child stderr) appear only with --full.",
        "type": "object",
        "required": order,
        "additionalProperties": False,
        "properties": properties,
    }
