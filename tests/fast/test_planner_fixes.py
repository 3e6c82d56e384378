"""Every fix the planner prints is a value: a --store reference, a --path folder, a --data file or any other word
of the command line that carries shell syntax ($(...), backticks, ;, quotes, a newline) enters a fix only as a
quoted word. Each fix built from such input runs in bash with an empty PATH from another folder, and no marker
appears; a rerun command keeps the run's words, its paths absolute."""

import shlex
import shutil
import subprocess
import time

import pytest

from capacity_planner import calibrate, cli, coefficients, designs, measure, rules, spec
from diagnostics_core import runner
from diagnostics_core.cli import UsageError
from diagnostics_core.interrupt import Interrupted

BASH = shutil.which("bash")
HOSTILE = ["$(:>{m})", "`:>{m}`", "a;:>{m}", "a'; :>{m}; '", 'a"; :>{m}; "', "a\n:>{m}", "a|:>{m}",
           "x' $(:>{m}) 'y", "-- ;:>{m}", "a && :>{m}"]


def run_pasted(fix, folder):
    """Paste the fix as an agent would: bash -c, from another folder, PATH empty (no command the fix names runs,
    only the shell itself could write a marker)."""
    return subprocess.run([BASH, "-c", fix], cwd=str(folder), env={"PATH": str(folder / "no-commands")},
                          capture_output=True, text=True, timeout=20)


def prepared(argv):
    run = runner.Run(cli.SPEC, argv, time.time())
    runner.prepare(run)
    run.facts.update(request=run.options.request, rerun=cli.rerun_words(run.argv))
    return run


def store_fixes(hostile):
    """The fixes built from a hostile store reference and --path: the usage error of a missing --edges, a size
    the store reports refused, the store that failed or hung, the rerun fixes and the interrupted run's."""
    argv = ["--store", "m%s:f" % hostile, "--path", hostile, "--edges", "10"]
    parser = cli.SPEC.parser()
    fixes = []
    with pytest.raises(UsageError) as missing:
        cli.SPEC.check(parser, parser.parse_args(argv[:4]))
    fixes.append(missing.value.fix)
    run = prepared(argv)
    sizes = {"kind": "store", "features": [{"group": "None", "attr": "x", "shape": [-5, 4]}], "edges": []}
    with pytest.raises(UsageError) as negative:
        spec.from_probed(sizes, run.options)
    fixes.append(negative.value.fix)
    for hung in (True, False):
        run.facts["store_problem"] = {"store": run.options.store, "path": hostile, "error": "x", "hung": hung,
                                      "call": None, "ended_by": "deadline", "timeout_s": 3.0}
        fixes += [found["fix"] for found in rules.store_unread(run.facts, run.options)]
    return fixes + rerun_fixes(run)


def rerun_fixes(run):
    """Fixes that rerun the command line: other coefficient versions, a calibration that failed, an interrupted
    run (its calibration cut)."""
    facts = dict(run.facts, coefficients={"used": "file", "version_mismatch": True, "provenance": {},
                                          "installed": {}, "calibration_problems": ["x"]})
    record = calibrate.new_record()
    record.update(state="failed", cut=record["planned"][0])
    facts["calibration"] = record
    fixes = [found["fix"] for found in rules.coefficient_versions(facts, run.options)]
    fixes += [found["fix"] for found in rules.calibration_failed(facts, run.options)]
    fixes.append(cli.interrupted(run, {"signal": "SIGTERM"}))
    run.facts["calibration"] = dict(record, state="interrupted")
    fixes.append(cli.interrupted(run, {"signal": "SIGTERM"}))
    return fixes


def data_fixes(hostile):
    run = prepared(["--data", hostile, "--host-ram", "64GB"])
    fixes = rerun_fixes(run)
    with pytest.raises(UsageError) as refused:
        spec.from_probed({"kind": "homo", "nodes": -5, "attrs": {}}, run.options)
    return fixes + [refused.value.fix]


def coefficients_fix(hostile, tmp_path):
    from capacity_planner import coefficients
    path = tmp_path / "c.json"
    path.write_text("not json")
    with pytest.raises(UsageError) as refused:
        coefficients.read_file(str(path), cli.rerun_words(["--data", hostile, "--coefficients", str(path)]))
    return [refused.value.fix]


def launch_fixes(hostile):
    """The fixes of a CPU plan and its --measure whose --data path is hostile: the graph pickled to the workers
    (the plan with forked workers), a measure past its deadline (a longer --timeout), a refused one (a smaller
    graph), an interrupted one (the same line), and every launch line."""
    run = prepared(["--data", hostile, "--gpus-per-node", "0", "--launch", "spawn", "--num-workers", "2",
                    "--host-ram", "64GB", "--cores", "4", "--shm", "1GB", "--measure"])
    run.facts["command"] = cli.command_words(run.argv)
    run.facts["request"]["graph"] = spec.make_homo(100000, 1000000, 16, 4)
    chosen, _ = coefficients.given(None, coefficients.load_committed())
    run.facts.update(designs.verdicts(run.facts["request"], chosen))
    fixes = [found["fix"] for found in rules.graph_pickled(run.facts, run.options)]
    fixes += [design["launch"] for design in run.facts["designs"]]
    design = designs.by_name(run.facts["designs"], "cpu-ddp-private-copies")
    record = measure.new_record(design["design"], design, measure.job_settings(
        run.facts["request"], design, run.options), run.options)
    record.update(state="failed", failure={"kind": "deadline", "detail": "cut"})
    run.facts["measure"] = record
    fixes += [found["fix"] for found in rules.measure_failed(run.facts, run.options)]
    refused = measure.refusal({"memory_bytes": 1 << 50, "processes": 7, "cores": 1}, run.facts["command"],
                              run.facts["request"], run.options)
    record["state"] = "interrupted"
    return fixes + [refused.fix, cli.interrupted(run, {"signal": "SIGTERM"})]


@pytest.mark.parametrize("hostile", HOSTILE)
@pytest.mark.parametrize("build", ["store", "data", "coefficients", "launch"])
def test_a_fix_built_from_hostile_input_runs_nothing_when_pasted(build, hostile, tmp_path):
    marker = tmp_path / "marker"
    text = hostile.format(m=marker)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    fixes = {"store": lambda: store_fixes(text), "data": lambda: data_fixes(text),
             "coefficients": lambda: coefficients_fix(text, tmp_path), "launch": lambda: launch_fixes(text)}[build]()
    assert fixes and all(fixes)
    if build == "launch":
        assert len(fixes) == 7 and sum(str(marker) in fix for fix in fixes) >= 3  # the path is there, quoted
    for fix in fixes:
        run_pasted(fix, elsewhere)
        assert not marker.exists(), fix


@pytest.mark.parametrize("hostile", HOSTILE)
def test_the_hostile_word_reaches_the_rerun_command_whole(hostile, tmp_path):
    text = hostile.format(m=tmp_path / "marker")
    run = prepared(["--store", "m:f", "--path", text, "--edges", "10"])
    fix = cli.interrupted(run, {"signal": "SIGINT"})
    words = shlex.split(fix.split("  #")[0])
    assert words[words.index("--path") + 1] == cli.command_words(["--path", text])[1]


def test_an_interrupted_runs_fix_repeats_the_command_line_with_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = prepared(["--data", "graph.pt", "--format", "markdown"])
    run.stopped = Interrupted(2)
    fix = cli.interrupted(run, run.stopped.evidence())
    assert shlex.split(fix.split("  #")[0])[2:] == ["--data", str(tmp_path / "graph.pt"), "--format", "markdown"]
