"""Small helpers the tests of several tools share: reading finding ids, one finding, a shell line, a
JSON-printing command."""

import json
import os
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


def one(findings, finding_id):
    """The one finding `finding_id` in a list of findings."""
    found = [f for f in findings if f["id"] == finding_id]
    assert len(found) == 1, (finding_id, [f["id"] for f in findings])
    return found[0]


def first(document, finding_id, case=None):
    """The first finding `finding_id` of a parsed document, which must have one (`case` names the input)."""
    found = [f for f in document["findings"] if f["id"] == finding_id]
    assert found, (case, finding_id, ids(document))
    return found[0]


def bash(command, cwd):
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=180, cwd=cwd)


def run(command, **kwargs):
    """(completed process, its stdout as JSON)."""
    completed = subprocess.run(command, capture_output=True, text=True, timeout=300, **kwargs)
    return completed, json.loads(completed.stdout)


def live_processes():
    """(pid, environment bytes, command line bytes) of every live process (zombies left out), read from /proc."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as handle:
                if handle.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
            with open("/proc/%s/environ" % name, "rb") as handle:
                environ = handle.read()
            with open("/proc/%s/cmdline" % name, "rb") as handle:
                command = handle.read()
        except (OSError, IndexError):
            continue  # it ended meanwhile
        yield int(name), environ, command


def torch_loads_defaultdict_edge_feats():
    """torch before 2.6 loads PyG's defaultdict edge_feats.pt with its default weights_only=False: no fix then."""
    from importlib.metadata import version
    return tuple(int(part) for part in version("torch").split("+")[0].split(".")[:2]) < (2, 6)
