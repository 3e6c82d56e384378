"""The one runner, called in process on a small Spec: stage bounds, the document of each way a run ends, the
scratch folder, and the user's warning settings contained."""

import json
import os
import sys
import warnings

import pytest

from diagnostics_core import cli, environment, runner
from diagnostics_core.contract import Tool

TOOL = Tool("check_sample", "1.0.0", "1.0", {
    "sample-said": ("info", "the sample said something"), "sample-usage-error": ("error", "bad command line"),
    "sample-internal-error": ("error", "the sample broke"), "sample-interrupted": ("error", "a signal stopped it"),
    "environment-warnings-as-errors": ("warning", "warnings are errors"),
    "environment-package-shadowed": ("error", "a stray copy")},
    usage_id="sample-usage-error", internal_id="sample-internal-error", meta_key="tool",
    interrupted_id="sample-interrupted")


def parser():
    made = cli.make_parser(TOOL)
    made.add_argument("--say", default="hello")
    made.add_argument("--timeout", type=float, default=10.0)
    return made


def gather(run):
    if run.options.say == "crash":
        raise RuntimeError("asked to")
    if run.options.say == "refuse":
        raise cli.UsageError("check_sample.py: error: refused", "sample-usage-error", {"why": "asked"}, fix=None)
    run.facts["said"] = run.options.say


def render(document, facts, options):
    document["said"] = facts.get("said")


SPEC = runner.Spec(TOOL, parser, gather, render, rules=(
    lambda facts, options: [TOOL.finding("sample-said", {"said": facts["said"]})],),
    gates=runner.error_gate("said"), budget="timeout",
    stages={"half": runner.Stage(share=0.5), "floored": runner.Stage(share=0.1, floor=3.0),
            "capped": runner.Stage(share=2.0, cap=15.0), "reserve": runner.Stage(plus=-1.5)}, watch=())


def run_main(capfd, *argv):
    code = runner.main(SPEC, list(argv))
    out, err = capfd.readouterr()
    return code, json.loads(out), err


@pytest.mark.parametrize("stage, value, expected", [
    (runner.Stage(), 10, 10), (runner.Stage(share=0.4, floor=2, cap=20), 1, 2),
    (runner.Stage(share=0.4, floor=2, cap=20), 30, 12), (runner.Stage(share=0.4, floor=2, cap=20), 100, 20),
    (runner.Stage(plus=-0.5), 10, 9.5), (runner.Stage(share=2, floor=30, cap=3600), 5, 30),
    (runner.Stage(share=2, floor=30, cap=3600), 3000, 3600)])
def test_a_stage_bound_is_the_flag_clamped(stage, value, expected):
    assert stage.seconds(value) == pytest.approx(expected)


def test_a_run_prints_its_findings_gates_and_sections(capfd):
    code, document, err = run_main(capfd, "--say", "hi", "--timeout", "20")
    assert (code, document["status"], document["said"]) == (0, "ok", "hi")
    assert [f["id"] for f in document["findings"]] == ["sample-said"]
    assert document["gates"] == {"said": {"passed": True}} and document["tool"]["name"] == "check_sample.py"
    assert err == ""


def test_the_bounds_come_from_the_stage_table(capfd, monkeypatch):
    seen = {}
    monkeypatch.setattr(SPEC, "gather", lambda run: seen.update(run.bounds, left=run.left()) or gather(run))
    run_main(capfd, "--timeout", "20")
    assert (seen["half"], seen["floored"], seen["capped"], seen["reserve"]) == (10.0, 3.0, 15.0, 18.5)
    assert 19 < seen["left"] <= 20


@pytest.mark.parametrize("argv, code, status, finding", [
    (["--no-such-flag"], 2, "usage-error", "sample-usage-error"),
    (["--say", "refuse"], 2, "usage-error", "sample-usage-error"),
    (["--say", "crash"], 3, "internal-error", "sample-internal-error")])
def test_each_way_a_run_ends_is_one_document(capfd, argv, code, status, finding):
    got, document, err = run_main(capfd, *argv)
    assert (got, document["status"], document["exit_code"]) == (code, status, code)
    assert [f["id"] for f in document["findings"]][-1] == finding and document["gates"] == {}
    assert document["said"] is None
    assert len(err.splitlines()) == (1 if code == 2 else 0)


def test_an_interrupted_gather_renders_what_it_had(capfd, monkeypatch):
    from diagnostics_core.interrupt import Interrupted

    def stopped(run):
        run.facts["said"] = "half"
        stop = Interrupted(15)
        stop.facts = {"extra": 1}
        raise stop
    monkeypatch.setattr(SPEC, "gather", stopped)
    code, document, _ = run_main(capfd)
    assert (code, document["status"], document["said"]) == (143, "interrupted", "half")
    assert document["findings"][0]["evidence"]["signal"] == "SIGTERM"


def test_the_scratch_folder_is_short_private_and_removed(tmp_path, monkeypatch):
    long_temp = tmp_path / ("t" * 80)
    long_temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(long_temp))
    run = runner.Run(SPEC, [], 0.0)
    folder = run.scratch()
    assert os.path.dirname(folder) == "/tmp" and len(folder) <= 107 - len("/pymp-XXXXXXXX/listener-XXXXXXXX")
    assert os.environ["TMPDIR"] == folder and os.path.isdir(folder)
    open(os.path.join(folder, "left-by-a-child"), "w").close()
    run.remove_scratch()
    assert not os.path.exists(folder) and os.environ["TMPDIR"] == str(long_temp)


def test_a_short_temp_dir_holds_the_scratch_folder(temp_dir, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(temp_dir))
    run = runner.Run(SPEC, [], 0.0)
    assert os.path.dirname(run.scratch()) == str(temp_dir)
    run.remove_scratch()
    assert list(temp_dir.iterdir()) == []


def test_warnings_made_errors_are_contained_and_reported(monkeypatch):
    monkeypatch.setenv("PYTHONWARNINGS", "error")
    monkeypatch.setattr(sys, "warnoptions", ["error", "error::DeprecationWarning"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        facts = environment.contain_warnings()
        with pytest.warns(UserWarning):  # a warning again, not an exception
            warnings.warn("a torch-like warning", UserWarning)
        assert sys.warnoptions == (["default"] if sys.flags.dev_mode else [])
    assert facts["as_errors"] == ["error", "error::DeprecationWarning"] and facts["PYTHONWARNINGS"] == "error"
    assert "PYTHONWARNINGS" not in os.environ


def test_a_stray_package_on_pythonpath_is_found_first_and_named(tmp_path, monkeypatch):
    for folder in ("stray", "installed"):
        (tmp_path / folder / "somepkg").mkdir(parents=True)
        (tmp_path / folder / "somepkg" / "__init__.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "stray"))
    monkeypatch.setattr(sys, "path", [str(tmp_path / "stray"), str(tmp_path / "installed")])
    [found] = environment.shadowed(["somepkg"])
    assert found["origin"] == "PYTHONPATH" and found["path_entry"] == str(tmp_path / "stray")
    assert found["installed"] == [str(tmp_path / "installed" / "somepkg" / "__init__.py")]
    assert runner.shadow_fix([found]).startswith("unset PYTHONPATH")
    assert environment.shadowed(["no_such_pkg_here"]) == []
