"""The store checker's command line, time bounds and document, in process: what the parser and check refuse,
the bound of every stage (the Spec's stage table, nowhere else), and the sections the document carries
(on recorded facts, and on none when the command line was refused)."""

import json

import pytest

from support import recorded_facts
from diagnostics_core import cli as core_cli, runner
from store_checker import cli, run


def refusal(argv):
    parser = cli.SPEC.parser()
    with pytest.raises(core_cli.UsageError) as refused:
        cli.SPEC.check(parser, parser.parse_args(argv))
    return refused.value


@pytest.mark.parametrize("argv, message", [
    (["--timeout", "abc", "pkg.mod:make"], "expected a number of seconds"),
    (["--timeout", "0", "pkg.mod:make"], "must be between 1 and 3600 seconds"),
    (["--setup-timeout", "nan", "pkg.mod:make"], "must be between"),
    (["no_colon_here"], "expected MODULE:CALLABLE"),
    (["pkg.mod:1bad"], "expected MODULE:CALLABLE"),
    (["pkg-mod:make"], "is neither a dotted module name nor a .py file"),
    (["missing_file.py:make"], "no such file"),
    (["pkg.mod:make", "--path", "/no/such/folder"], "is not a directory"),
    ([], "give MODULE:CALLABLE, or both --feature-store and --graph-store"),
    (["pkg.mod:make", "--feature-store", "pkg.fs:make"], "not both"),
    (["--feature-store", "pkg.fs:make"], "give MODULE:CALLABLE, or both"),
    (["--no-such-flag"], "unrecognized arguments"),
])
def test_a_refused_command_line_is_one_usage_error_line(argv, message):
    refused = refusal(argv)
    assert refused.finding_id == "store-usage-error" and message in refused.line
    assert "\n" not in refused.line and refused.fix.endswith("--help")


def test_an_accepted_command_line_passes_check():
    parser = cli.SPEC.parser()
    assert cli.SPEC.check(parser, parser.parse_args(["--feature-store", "a.b:c", "--graph-store", "a.b:d"])) is None


@pytest.mark.parametrize("argv, bounds", [
    ([], {"call_s": 10.0, "import_s": 120.0, "setup_s": 120.0, "worker_loader_s": 20.0}),
    (["--timeout", "3"], {"call_s": 3.0, "import_s": 120.0, "setup_s": 120.0, "worker_loader_s": 13.0}),
    (["--setup-timeout", "30", "--timeout", "60"], {"call_s": 60.0, "import_s": 30.0, "setup_s": 30.0,
                                                    "worker_loader_s": 70.0}),
])
def test_every_stage_bound_comes_from_the_specs_stage_table(argv, bounds):
    planned = runner.Run(cli.SPEC, ["pkg.mod:make"] + argv, 0.0)
    planned.options = cli.SPEC.parser().parse_args(planned.argv)
    planned.plan_time()
    assert planned.bounds == bounds and planned.options.bounds == bounds  # the child gets them with its options
    assert planned.deadline is None  # no whole-run deadline: each call is bounded


def document_for(facts, options):
    return recorded_facts.document_for(cli.SPEC, facts, options)


@pytest.mark.parametrize("case", ["homo", "hetero"])
def test_the_document_carries_every_section_in_order(case):
    facts = recorded_facts.load("store_checker")[case]
    options = cli.SPEC.parser().parse_args(["pkg.mod:make", "--write-check"])
    document, code = document_for(facts, options)
    assert code == 0 and document["ok"] is True and document["gates"] == {"contract": {"passed": True}}
    assert list(document) == ["schema_version", "ok", "status", "exit_code", "findings", "gates", "checker",
                              "versions"] + list(run.FACT_SECTIONS)
    assert document["checker"]["calls"] == facts["caller"]["count"] and document["checker"]["read_only"] is False
    json.dumps(document, allow_nan=False)


def test_an_error_finding_fails_the_contract_gate():
    facts = recorded_facts.load("store_checker")["homo"]
    facts["edges"][0]["integer"] = False
    document, code = document_for(facts, cli.SPEC.parser().parse_args(["pkg.mod:make"]))
    assert document["gates"] == {"contract": {"passed": False}} and document["status"] == "gate-failed"
    assert code == 1


def test_a_refused_command_line_still_renders_every_section_empty():
    document = {}
    cli.SPEC.render(document, {}, None)
    assert list(document) == ["versions"] + list(run.FACT_SECTIONS) and set(document.values()) == {None}
