"""Small helpers the tests of several tools share: reading finding ids, one finding, a shell line, a
JSON-printing command."""

import json
import subprocess

# The sampling extensions whose wheels PyG's index publishes per torch build.
BACKENDS = ("pyg_lib", "torch_sparse", "torch_scatter")


def ids(run_or_document):
    """The finding ids, in order, of a tool run (.json) or of a parsed document."""
    document = getattr(run_or_document, "json", run_or_document)
    return [f["id"] for f in document["findings"]]


def only(run, finding_id):
    found = [f for f in run.json["findings"] if f["id"] == finding_id]
    assert len(found) == 1, (finding_id, ids(run), run.stderr[-2000:])
    return found[0]


def bash(command, cwd):
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=180, cwd=cwd)


def run(command, **kwargs):
    """(completed process, its stdout as JSON)."""
    completed = subprocess.run(command, capture_output=True, text=True, timeout=300, **kwargs)
    return completed, json.loads(completed.stdout)
