"""Facts the contract checkers gathered from real runs, recorded once so that the fast tier can replay the
rules, the rendering and the fixes on them (and on edited copies) without starting a child or importing torch.

    tests/fast/store_facts.json       the store checker on PyG's own stores (tests/support/store_fixtures.py)
    tests/fast/partition_facts.json   the partition checker on PyG's own Partitioner output (partition_writer.py)

The real tier (tests/test_store_contract.py, tests/test_partition_layout.py) runs the same cases and fails when
a recording no longer has the shape of the sections a real run prints; with RECORD_FACTS=1 in the environment
it gathers and writes the facts instead (then review the diff)."""

import json
import os
import time
from pathlib import Path

FAST = Path(__file__).resolve().parents[1] / "fast"
ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = {"store_checker": FAST / "store_facts.json", "partition_checker": FAST / "partition_facts.json"}
DATA = "/data"  # where a recording says its test folder was
VOLATILE = ("child",)  # how the child ended: timings and pids, not facts about the input


def load(package):
    """{case: facts} recorded for the tool in `package`; each call gives fresh copies to edit."""
    return json.loads(RECORDINGS[package].read_text())


def gathered(package, argv):
    """The facts the tool's own gather gives for `argv`: the parent in this process, as the runner runs it
    (command line, stack check, bounds), the child as always."""
    import importlib
    import sys
    writes_bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # the skill's folder stays clean
    if str(ROOT / "scripts") not in sys.path:
        sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from diagnostics_core import runner
        spec = importlib.import_module(package + ".cli").SPEC
        run = runner.Run(spec, list(argv), time.time())
        assert runner.prepare(run) is None
        try:
            spec.gather(run)
        finally:
            run.remove_scratch()
    finally:
        sys.dont_write_bytecode = writes_bytecode
    return run.facts


def normalized(facts, folder):
    """`facts` as recorded: the test's folder written as DATA, the skill's as /skill, volatile sections out."""
    text = json.dumps(dict((k, v) for k, v in facts.items() if k not in VOLATILE), sort_keys=True)
    for path, placeholder in ((str(folder), DATA), (str(ROOT), "/skill")):
        text = text.replace(json.dumps(path)[1:-1], placeholder)
    return json.loads(text)


def shape(value):
    """What a value looks like without its figures: a dict's keys and their shapes, a list's first item."""
    if isinstance(value, dict):
        return dict((key, shape(item)) for key, item in value.items())
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    if isinstance(value, bool) or value is None:
        return type(value).__name__
    return "number" if isinstance(value, (int, float)) else type(value).__name__


def differing_sections(package, case, document):
    """-> (the sections of a real run's `document` compared with the recording of `case`, those whose shape
    differs)."""
    recorded = load(package)[case]
    compared = [name for name in recorded if name in document]
    return compared, [name for name in compared if shape(recorded[name]) != shape(document[name])]


def record(package, cases, folder):
    """Gather each of `cases` ({case: argv}) and write the recording, `folder` written as DATA."""
    fresh = dict((case, normalized(gathered(package, argv), folder)) for case, argv in cases.items())
    RECORDINGS[package].write_text(json.dumps(fresh, indent=1, sort_keys=True) + "\n")


def recording_asked():
    return os.environ.get("RECORD_FACTS") == "1"


# Replaying the rules on recorded facts (the fast tier) ------------------------------------------------------

def assign(path, value):
    """An edit setting the value at `path` (keys and list positions) of the facts."""
    def edit(facts):
        target = facts
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return edit


def each(*edits):
    """One edit made of several."""
    def edit(facts):
        for one in edits:
            one(facts)
    return edit


def edited(package, case, edit):
    """The recorded facts of `case`, changed by `edit`."""
    facts = load(package)[case]
    edit(facts)
    return facts


class Replay(object):
    """A tool's rules replayed in process on its recorded facts: the options of a command line (`argv` when none is
    given), the findings of facts, a recorded case."""

    def __init__(self, package, cli, argv):
        self.package, self.cli, self.argv = package, cli, list(argv)

    def options(self, *argv):
        return self.cli.build_parser().parse_args(list(argv) or self.argv)

    def findings(self, facts, parsed=None):
        return findings_of(self.cli.SPEC, facts, parsed or self.options())

    def recorded(self, case="homo"):
        return load(self.package)[case]


def findings_of(spec, facts, options):
    """Every rule of the tool's Spec on `facts`, in order."""
    return [found for rule in spec.rules for found in rule(facts, options)]


def assert_found(found, finding_id, severity, evidence, tool):
    """`found` holds `finding_id` at `severity` whose evidence holds each of `evidence`'s key/values, with a fix
    and its docs anchor, and only ids of the tool's registry."""
    matching = [f for f in found if f["id"] == finding_id and f["severity"] == severity
                and all(f["evidence"].get(key) == value for key, value in evidence.items())]
    assert matching, json.dumps(found, indent=1)[:3000]
    assert matching[0]["fix"] and matching[0]["docs"] == "references/troubleshooting.md#" + finding_id
    assert {f["id"] for f in found} <= set(tool.findings)


def assert_edit_found(package, spec, options, case, edit, expected):
    """The tool's recorded `case` facts edited by `edit`: its rules find `expected` = (finding id, severity,
    evidence it holds), as assert_found checks."""
    assert_found(findings_of(spec, edited(package, case, edit), options), *expected, tool=spec.tool)


def document_for(spec, facts, options):
    """-> (the document, exit code) the runner composes for a finished run on `facts`."""
    findings = findings_of(spec, facts, options)
    meta = dict(name=spec.tool.name + ".py", **spec.meta(facts, options))
    document, code = spec.tool.document(findings, spec.gates(facts, findings, options), meta)
    spec.render(document, facts, options)
    return document, code


def broken_rule_run(package, argv):
    """The tool's runner in a child whose gather hands over the recorded "homo" facts and whose rules end in
    one that raises; -> its document, checked to be the internal-error document that names the rule's error."""
    import subprocess
    import sys
    code = ("import json, sys; sys.dont_write_bytecode = True; sys.path.insert(0, %r)\n"
            "from diagnostics_core import runner\n"
            "from %s import cli\n"
            "facts = json.load(open(%r))['homo']\n"
            "def broken(facts, options):\n    raise KeyError('rule bug')\n"
            "cli.SPEC.gather = lambda run: run.facts.update(facts)\n"
            "cli.SPEC.rules = cli.SPEC.rules + (broken,)\n"
            "sys.exit(runner.main(cli.SPEC, %r))" % (str(ROOT / "scripts"), package, str(RECORDINGS[package]),
                                                    list(argv)))
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, cwd=str(ROOT))
    document = json.loads(completed.stdout)
    # The tool's own failure path: exit 3, its internal-error finding last, the error named, one document.
    assert completed.returncode == 3 and document["status"] == "internal-error"
    assert document["findings"][-1]["id"].endswith("internal-error")
    assert "rule bug" in json.dumps(document["findings"][-1]["evidence"]["error"])
    return document
