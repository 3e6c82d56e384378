"""compare_reports.py's fixes are values: a report is input (a hostile or broken node writes it), so its host
name, interpreter path, module file, launch values, world size, versions and install fields enter a fix only
as quoted words. Every fix each rule prints, for reports carrying command substitution, backticks, ;, |,
quotes and a newline, is run in bash with an empty PATH from another folder: no marker appears, and the
text arrives in the fix whole, as one word."""

import pytest

from cluster_compare.rules import RULES
from diagnostics_core import command
from test_compare_reading import facts_of, findings_of, report
from test_core_fix_values import HOSTILE, run_in_shell


def rejected_world(document, raw):
    document["environment"]["launch"]["WORLD_SIZE"] = {"raw": raw, "value": raw, "error": None}
    return document


def launch_error(document, fix):
    document["findings"].append({"id": "launch-master-incomplete", "severity": "error", "fix": fix})
    return document


# Each scenario: (hostile text) -> (reports, the word of it a fix must carry, or None where none may).
SCENARIOS = {
    "hostname needing an install": lambda text: (
        [report("a"), report("b"), report(text, edits=[("torch.version", "2.12.0")])], command.word(text)),
    "hostname where a variable is unset": lambda text: (
        [report("a", MASTER_ADDR="192.0.2.1"), report("b", MASTER_ADDR="192.0.2.1"), report(text)],
        command.word(text)),
    "hostname where a variable is set": lambda text: (
        [report("a"), report("b"), report(text, MASTER_ADDR="192.0.2.1")], command.word(text)),
    "hostname of duplicate ranks": lambda text: (
        [report(text, rank=0, world=2), report(text + "2", rank=0, world=2)], None),
    "interpreter path": lambda text: (
        [report("a"), report("b"), report("c", edits=[("torch.version", "2.12.0"), ("python.executable", text)])],
        command.word(text)),
    "interpreter of an extension install": lambda text: (
        [report("a"), report("b"), report("c", edits=[("extensions.pyg_lib", {"status": "ok", "version": "0.4.0"}),
                                                      ("python.executable", text)])], command.word(text)),
    "module file outside the prefix": lambda text: (
        [report("a"), report("b"), report("c", edits=[("pyg.version", "2.7.0"),
                                                      ("pyg.file", "/x/" + text + "/torch_geometric/__init__.py")])],
        command.word("/x/" + text)),
    "interpreter prefix": lambda text: (
        [report("a"), report("b"), report("c", edits=[("pyg.version", "2.7.0"), ("python.prefix", text),
                                                      ("pyg.file", "/x/torch_geometric/__init__.py")])],
        command.word(text)),
    "MASTER_ADDR value": lambda text: (
        [report("a", MASTER_ADDR=text), report("b", MASTER_ADDR=text), report("c", MASTER_ADDR="192.0.2.1")],
        command.word("MASTER_ADDR=" + text)),
    "MASTER_PORT value": lambda text: (
        [report("a", MASTER_PORT=text), report("b", MASTER_PORT=text), report("c", MASTER_PORT=29500)],
        command.word("MASTER_PORT=" + text)),
    "WORLD_SIZE value": lambda text: (
        [rejected_world(report("a", rank=0), text), rejected_world(report("b", rank=1), text),
         report("c", rank=2, world=3)], command.word("WORLD_SIZE=" + text)),
    "torch version of the largest group": lambda text: (
        [report("a", edits=[("torch.version", text)]), report("b", edits=[("torch.version", text)]), report("c")],
        None),
    "extension version of the largest group": lambda text: (
        [report(h, edits=[("extensions.torch_sparse", {"status": "ok", "version": text})]) for h in "ab"]
        + [report("c")], None),
    "install fields of the model node": lambda text: (
        [report(h, edits=[("extensions.pyg_lib", {"status": "ok", "version": "0.8.0+pt213cpu"}),
                          ("install.index_url", text)]) for h in "ab"] + [report("c")], command.word(text)),
    "torch build of a source build": lambda text: (
        [report(h, edits=[("extensions.torch_sparse", {"status": "ok", "version": "0.6.18"}),
                          ("install.torch_minor", text)]) for h in "ab"]
        + [report("c", edits=[("extensions.torch_sparse", {"status": "not-installed"})])], command.word(text)),
    "a node's own launch error": lambda text: (
        [report("a"), launch_error(report(text), text)], None),
    "interface variable and names": lambda text: (
        [report("a"), report(text, GLOO_SOCKET_IFNAME=text, edits=[("environment.network_interfaces", [text + "x"])])],
        None),
    "core counts": lambda text: (
        [report("a"), report(text, edits=[("cpu.affinity.count", 64)])], None),
    "schema version": lambda text: (
        [report("a"), report(text, edits=[("schema_version", text)])], None),
    "a report lacking facts": lambda text: (
        [report("a"), report(text, edits=[("torch", {"status": "not-probed"})])], None),
}


def fixes(findings):
    return [item["fix"] for item in findings if item["fix"]]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("hostile", HOSTILE, ids=range(len(HOSTILE)))
def test_no_fix_runs_text_from_a_report(scenario, hostile, tmp_path):
    marker = tmp_path / "marker"
    text = hostile.format(m=marker)
    documents, carried = SCENARIOS[scenario](text)
    printed = fixes(findings_of(facts_of(*documents, too_large=[text + ".json"])))
    assert printed, scenario
    for fix in printed:
        run_in_shell(fix, tmp_path)
        assert not marker.exists(), fix
        assert "#" not in fix.replace(text, ""), fix  # no comment: a newline in one would end it
    if carried is not None:
        assert any(carried in fix for fix in printed), (carried, printed)


def test_every_rule_that_prints_a_fix_is_reached_by_a_scenario():
    reached = set()
    for scenario in SCENARIOS.values():
        documents, _ = scenario("x$(:>m)")
        facts = facts_of(*documents, too_large=["x.json"])
        reached.update(rule.__name__ for rule in RULES if any(item["fix"] for item in rule(facts, None)))
    reached.update(rule.__name__ for rule in RULES if any(item["fix"] for item in rule(facts_of(report()), None)))
    assert reached == set(rule.__name__ for rule in RULES)


def test_a_quoted_launch_value_exports_exactly_what_the_nodes_had(tmp_path):
    value = "$(:>m)`:>m`;'\"\n|x"
    findings = findings_of(facts_of(report("a", MASTER_ADDR=value), report("b", MASTER_ADDR=value),
                                    report("c", MASTER_ADDR="192.0.2.1")))
    [fix] = [item["fix"] for item in findings if item["evidence"].get("fact") == "MASTER_ADDR"]
    export = fix.split(" on every node")[0]
    ran = run_in_shell(export + ' && printf %s "$MASTER_ADDR"', tmp_path)
    assert ran.stdout == value and not (tmp_path / "m").exists()
