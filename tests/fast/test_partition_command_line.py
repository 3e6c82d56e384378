"""The partition checker's command line, time bounds and document, in process: what the parser and check
refuse, the bound of every stage (the Spec's stage table, nowhere else), and the document's sections (on
recorded facts, and on none when the command line was refused)."""

import json

import pytest

from support import recorded_facts
from diagnostics_core import cli as core_cli, runner
from partition_checker import cli, run


@pytest.mark.parametrize("argv, message", [
    ([], "ROOT is required"),
    (["/no/such/partition/folder"], "is not a directory"),
    ([".", "--timeout", "soon"], "expected a number of seconds"),
    ([".", "--timeout", "-3"], "must be between 1 and 3600 seconds"),
    ([".", "--labels", "/no/such/label.pt"], "is not a file"),
    ([".", "--max-parts", "0"], "expected a whole number between 1 and 100000"),
    ([".", "--max-parts", "100001"], "expected a whole number between 1 and 100000"),
    ([".", "--bogus"], "unrecognized arguments"),
])
def test_a_refused_command_line_is_one_usage_error_line(argv, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    parser = cli.SPEC.parser()
    with pytest.raises(core_cli.UsageError) as refused:
        cli.SPEC.check(parser, parser.parse_args(argv))
    assert refused.value.finding_id == "partition-usage-error" and message in refused.value.line
    assert "\n" not in refused.value.line


@pytest.mark.parametrize("timeout, bounds", [
    ([], {"load_s": 120.0, "import_s": 120.0}),
    (["--timeout", "5"], {"load_s": 5.0, "import_s": 120.0}),  # importing torch on a busy machine: a floor
    (["--timeout", "600"], {"load_s": 600.0, "import_s": 600.0}),
])
def test_every_stage_bound_comes_from_the_specs_stage_table(timeout, bounds):
    planned = runner.Run(cli.SPEC, ["."] + timeout, 0.0)
    planned.options = cli.SPEC.parser().parse_args(planned.argv)
    planned.plan_time()
    assert planned.bounds == bounds and planned.options.bounds == bounds
    assert planned.deadline is None


def document_for(facts, options):
    return recorded_facts.document_for(cli.SPEC, facts, options)


@pytest.mark.parametrize("case", ["homo", "hetero"])
def test_the_document_carries_the_verdict_and_every_section_in_order(case):
    facts = recorded_facts.load("partition_checker")[case]
    document, code = document_for(facts, cli.SPEC.parser().parse_args(["."]))
    assert code == 0 and document["ok"] is True and document["gates"] == {"contract": {"passed": True}}
    assert list(document) == ["schema_version", "ok", "status", "exit_code", "findings", "gates", "checker",
                              "verdict"] + list(run.FACT_SECTIONS)
    assert document["verdict"] == {"parts_checked": 2, "from_partition_fails": [], "from_partition_unknown": []}
    assert document["checker"]["read_only"] is True
    json.dumps(document, allow_nan=False)


def test_the_verdict_lists_the_parts_pyg_cannot_load():
    facts = recorded_facts.load("partition_checker")["homo"]
    facts["parts"][1]["from_partition"]["LocalGraphStore"] = {"loads": False, "error": "KeyError: 'size'"}
    facts["parts"][0]["from_partition"]["LocalFeatureStore"] = {"loads": None, "error": "not run"}
    document, code = document_for(facts, cli.SPEC.parser().parse_args(["."]))
    assert code == 1 and document["verdict"]["from_partition_fails"] == [1]
    assert document["verdict"]["from_partition_unknown"] == [0]


def test_a_large_meta_json_is_quoted_by_its_size_only():
    facts = recorded_facts.load("partition_checker")["homo"]
    facts["meta"]["content"]["node_types"] = ["t%d" % n for n in range(5000)]
    document, _ = document_for(facts, cli.SPEC.parser().parse_args(["."]))
    assert list(document["meta"]["content"]) == ["not_shown"]


def test_a_refused_command_line_still_renders_every_section_empty():
    document = {}
    cli.SPEC.render(document, {}, None)
    assert list(document) == ["verdict"] + list(run.FACT_SECTIONS)
    assert document["verdict"]["parts_checked"] == 0
