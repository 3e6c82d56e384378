"""The profiler's command line, its document and its report, in process: what the parser takes and refuses
(the refusal's finding and line), the registry against its documentation, the envelope and sections the
runner composes from recorded facts, the markdown report, the stderr summary and progress lines."""

import json
import re
from pathlib import Path

import pytest

from diagnostics_core import cli as shared_cli
from diagnostics_core import runner
from loader_profiler import cli, gather, render
from loader_profiler.findings import TOOL

ROOT = Path(__file__).resolve().parents[2]


def refusal(argv):
    """The UsageError a command line gets before anything runs (parse and the checks of several flags)."""
    run = runner.Run(cli.SPEC, list(argv), 0.0)
    with pytest.raises(shared_cli.UsageError) as refused:
        run.options = cli.SPEC.parser().parse_args(run.argv)
        cli.SPEC.check(cli.SPEC.parser(), run.options)
    return refused.value


@pytest.mark.finding("profile-loader-usage-error")
@pytest.mark.parametrize("argv, says", [
    (["--bogus"], "unrecognized arguments"),
    (["--synthetic", "10,5"], "NODES,EDGES,FEATURES"),
    (["--synthetic", "1,5,5"], "NODES >= 2"),
    (["--synthetic", "20000,200000,32", "--budget", "0"], "between 1 and 3600"),
    (["--synthetic", "20000,200000,32", "--budget", "nan"], "between 1 and 3600"),
    ([], "give the graph"),
    (["--data", "/nonexistent/graph.pt"], "no such file"),
    (["--data", "{tmp}"], "is a directory"),
    (["--synthetic", "2000,10000,8", "--input-edges", "a,b,c"], "--input-edges needs --link"),
    (["--synthetic", "2000,10000,8", "--link", "--input-nodes", "m"], "with --link use --input-edges"),
    (["--synthetic", "2000,10000,8", "--input-edges", "a,b", "--link"], "SRC,REL,DST"),
    (["--synthetic", "2000,10000,8", "--ranks-per-node", "999"], "give each rank at least one"),
    (["--synthetic", "2000,10000,8", "--ranks-per-node", "0"], "whole number >= 1"),
    (["--synthetic", "2000,10000,8", "--num-neighbors", "%d,5" % 2 ** 63], "int64"),
    (["--synthetic", "2000,10000,8", "--num-neighbors", "10,0"], "fan-outs"),
    (["--synthetic", "2000,10000,8", "--current", "num_workers=-1"], "num_workers"),
    (["--synthetic", "2000,10000,8", "--current", "workers=2"], "KEY=VALUE"),
    (["--synthetic", "2000,10000,8", "--current", "pin_memory=maybe"], "True or False"),
    (["--synthetic", "2000,10000,8", "--current", "threads=0"], ">= 1"),
    (["--synthetic", "2000,10000,8", "--step", "nocolon"], "MODULE:CALLABLE"),
    (["--synthetic", "2000,10000,8", "--model", "nocolon"], "MODULE:CALLABLE"),
    (["--store", "nocolon"], "MODULE:CALLABLE"),
    (["--synthetic", "2000,10000,8", "--stand-in", "rnn,2,64"], "CONV (one of sage|gcn|gat|gin)"),
    (["--synthetic", "2000,10000,8", "--stand-in", "sage,17,64"], "LAYERS 1-16"),
    (["--synthetic", "2000,10000,8", "--step", "a:b", "--loader-only"], "not allowed with"),
    (["--synthetic", "2000,10000,8", "--data", "x.pt"], "not allowed with"),
    (["--synthetic", "%d,%d,%d" % (10 ** 9, 10 ** 9, 10 ** 4)], "this machine has")])
def test_a_refused_command_line_is_a_usage_error_naming_what_is_wrong(argv, says, tmp_path):
    error = refusal([word.format(tmp=tmp_path) for word in argv])
    assert error.finding_id == "profile-loader-usage-error" and says in error.line
    assert "\n" not in error.line
    document, exit_code = composed(runner.Run(cli.SPEC, argv, 0.0), usage=error)
    assert exit_code == 2 and document["status"] == "usage-error"
    assert [f["id"] for f in document["findings"]] == ["profile-loader-usage-error"]
    assert document["configs"] == [] and document["recommendation"] is None


@pytest.mark.parametrize("text, expected", [
    ("num_workers=6,persistent_workers=False,threads=2", {"num_workers": 6, "persistent_workers": False, "threads": 2}),
    ("OMP_NUM_THREADS=4", {"threads": 4}), ("torch_threads=1,pin_memory=1", {"threads": 1, "pin_memory": True}),
    ("filter_per_worker=false,worker_threads=3", {"filter_per_worker": False, "worker_threads": 3})])
def test_current_settings_are_parsed_into_the_baseline(text, expected):
    assert cli.current_settings(text) == expected


@pytest.mark.parametrize("argv, loop", [
    (["--loader-only"], {"kind": "loader-only"}),
    ([], {"kind": "stand-in", "conv": "sage", "layers": 3, "hidden": 64}),
    (["--stand-in", "GIN,2,16"], {"kind": "stand-in", "conv": "gin", "layers": 2, "hidden": 16})])
def test_the_loop_the_ranks_run_is_plain_data(argv, loop):
    options = cli.SPEC.parser().parse_args(["--synthetic", "20,200,8", "--num-neighbors", "5,5,5"] + argv)
    assert gather.request_spec(options)["loop"] == loop


def registered():
    return json.loads((ROOT / "scripts" / "loader_profiler" / "findings.json").read_text())


def test_every_finding_of_the_registry_is_documented_in_the_profiler_section():
    text = (ROOT / "references" / "troubleshooting.md").read_text(encoding="utf-8")
    block = text.split("\n## Loader profiler (`scripts/profile_loader.py`)\n", 1)[1].split("\n## ", 1)[0]
    sections = re.split(r"^### ", block, flags=re.M)[1:]
    assert {section.split("\n", 1)[0].strip() for section in sections} == set(registered())
    for section in sections:
        name = section.split("\n", 1)[0]
        assert len(section.rstrip().splitlines()) <= 70, name
        for label in ("**Symptom:**", "**Cause:**", "**Fix:**"):
            assert label in section, (name, label)
    assert set(registered()) <= {entry["id"] for entry in TOOL.list_findings()}


def composed(run, usage=None, facts=None, findings=(), stopped=None):
    """The document the runner prints for this run, and its exit code."""
    run.usage, run.findings, run.stopped = usage, list(findings), stopped
    run.facts.update(facts or {})
    if usage is None and run.options is not None:
        run.gates = cli.gates(run.facts, run.findings, run.options)
    return runner.compose(run)


def parsed(argv):
    run = runner.Run(cli.SPEC, list(argv), 0.0)
    run.options = cli.SPEC.parser().parse_args(run.argv)
    run.plan_time()
    return run


CONFIG = {"name": "default", "status": "ok", "rounds": 2, "settings": {"num_workers": 0, "torch_threads": 2},
          "epoch_batches_per_s": 10.0, "epoch_batches_per_s_range": [9.5, 10.5], "ratio_to_baseline": 1.0,
          "ratio_to_baseline_range": [1.0, 1.0], "ratio_to_default": 1.0, "first_batch_s": 0.1,
          "other_cpu_cores": [0.1, 0.2], "peak_rss_mb": 300.0, "batches_per_s": 10.0, "batches_per_s_range": [9, 11],
          "seeds_per_s": 10240.0}


@pytest.mark.parametrize("configs, passed", [([], False), ([dict(CONFIG, status="skipped")], False), ([CONFIG], True)])
def test_the_measured_gate_passes_once_a_configuration_was_measured(configs, passed):
    document, exit_code = composed(parsed(["--synthetic", "20,200,8"]), facts={"configs": configs})
    assert document["gates"] == {"measured": {"passed": passed, "configs_measured": int(passed)}}
    assert exit_code == (0 if passed else 1) and document["tool"]["budget_s"] == 60.0
    assert list(document)[7:] == ["request", "host", "backend", "graph", "breakdown", "plan", "configs", "blocks",
                                  "recommendation", "child"]


@pytest.mark.finding("loader-profile-interrupted")
def test_an_interrupted_run_says_what_was_measured_and_how_to_run_it_again():
    from diagnostics_core.interrupt import Interrupted
    import signal
    run = parsed(["--synthetic", "20,200,8", "--budget", "30"])
    blocks = [{"config": "default", "round": 0}, {"config": "current", "round": 0}]
    document, exit_code = composed(run, facts={"blocks": blocks, "host": {"allowed_cores": [0, 1]}},
                                   stopped=Interrupted(signal.SIGTERM))
    assert exit_code == 143 and document["status"] == "interrupted" and document["gates"] == {}
    [stopped] = [f for f in document["findings"] if f["id"] == "loader-profile-interrupted"]
    assert stopped["evidence"]["blocks_measured"] == 2 and stopped["evidence"]["configs_measured"] == 0
    assert stopped["fix"].endswith("--budget 30  # run it again to the end; --budget bounds its time")
    assert document["blocks"] == blocks and document["host"] == {"allowed_cores": [0, 1]}


ADVICE = {"config": "default-threads-1", "verdict": "faster", "baseline": "current", "speedup": 1.5,
          "speedup_range": [1.4, 1.6], "speedup_over_default": 1.03, "epoch_s": 3.2, "baseline_epoch_s": 4.8,
          "rounds": 3, "epochs": 10, "load": {"other_cpu_cores_median": 0.1, "other_cpu_cores_range": [0.0, 0.2],
                                               "busy_blocks": 0, "blocks": 9, "busy_threshold_cores": 0.5},
          "decided": {"contenders": ["default-threads-1"], "leader": "default-threads-1", "tied": ["default-threads-1"],
                      "unsettled": [], "against": {}},
          "code": "# before Python starts: export OMP_NUM_THREADS=1\nloader = NeighborLoader(data)"}


@pytest.mark.parametrize("redacted", [True, False])
def test_the_markdown_report_shows_the_rounds_the_choice_and_the_code(redacted):
    run = parsed(["--synthetic", "20,200,8", "--format", "markdown"])
    facts = {"configs": [CONFIG, {"name": "workers-2-threads-1", "status": "skipped", "settings": {"num_workers": 2}}],
             "graph": {"kind": "synthetic", "num_nodes": 20, "num_edges": 200, "batches_per_epoch": 12, "seeds": 20},
             "plan": {"baseline": "current"}, "recommendation": ADVICE, "request": {"loop": {"kind": "stand-in"}}}
    document, _ = composed(run, facts=facts)
    report = render.markdown(document, redacted=redacted)
    assert report.startswith("### Loader profile (profile_loader 1.0.0)")
    assert "| default | num_workers=0, torch_threads=2 | 10.0 (9.5-10.5) |" in report
    assert "| workers-2-threads-1 | num_workers=2 | skipped |" in report
    assert "#### Recommendation: default-threads-1 (beats current in every round)" in report
    assert "```python\n# before Python starts: export OMP_NUM_THREADS=1\n" in report
    assert report.endswith("(--no-redact shows them)</sub>\n") is redacted


def test_the_summary_names_the_verdict_and_every_warning():
    run = parsed(["--synthetic", "20,200,8"])
    warning = TOOL.finding("loader-budget-short", {})
    document, _ = composed(run, facts={"configs": [CONFIG], "recommendation": ADVICE}, findings=[warning])
    lines = render.summary(document)
    assert lines[0].startswith("warning (exit 0) in ")
    assert lines[1] == "  recommended: default-threads-1, speedup 1.5x over current (faster)"
    assert lines[2].split() == ["warning", "loader-budget-short:"] + warning["title"].split()


@pytest.mark.parametrize("event, key, value, line", [
    ("append", "blocks", {"config": "default", "round": 0, "steps_per_s": 12.0, "epoch_steps_per_s": 10.0,
                          "first_batch_s": 0.5, "other_cpu_cores": None},
     "  default round 1: 12.0 steps/s (epoch 10.0), first batch 0.50 s, other processes ? cores"),
    ("append", "configs", {"name": "workers-1-threads-1", "status": "failed"}, "workers-1-threads-1: failed"),
    ("facts", "graph", {"num_nodes": 20, "num_edges": 200, "seeds": 20, "batches_per_epoch": 1},
     "graph loaded: 20 nodes, 200 edges, 20 seeds in 1 batches per epoch"),
    ("facts", "host", {"allowed_cores": [0]}, None), ("append", "blocks", "not a dict", None)])
def test_what_the_child_publishes_is_kept_as_facts_and_said_on_one_line(event, key, value, line):
    said = []
    run = runner.Run(cli.SPEC, [], 0.0)
    run.say = said.append
    gather.progress(run, {"event": event, "key": key, "value": value})
    assert said == ([line] if line else [])
    assert (run.facts[key][0] if event == "append" else run.facts[key]) == value
