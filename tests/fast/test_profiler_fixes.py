"""The profiler's fixes are values: every fix it prints is built from words, each quoted, so a hostile --data
path, module reference or seed attribute (command substitution, backticks, ';', quotes, a newline) runs
nothing when an agent pastes the fix; and a rerun is the same command line again, from any folder. The fixes
are built here, in process, from a parsed command line and facts as a run leaves them; each one runs in bash
with an empty PATH from another folder (tests/fast/test_core_fix_values.py)."""

import os
import sys

import pytest

from diagnostics_core import runner
from loader_profiler import cli
from loader_profiler.request import request_fact
from test_core_fix_values import HOSTILE, run_in_shell


def options_for(argv):
    run = runner.Run(cli.SPEC, list(argv), 0.0)
    run.options = cli.SPEC.parser().parse_args(run.argv)
    run.plan_time()
    return run


SETTINGS = {"num_workers": 2, "persistent_workers": True, "filter_per_worker": True, "pin_memory": False,
            "torch_threads": 1, "worker_threads": 1}
PROBLEMS = ("loader-data-unsafe-pickle", "loader-data-load-failed", "loader-store-failed", "loader-setup-failed",
            "loader-step-failed")
ADVICE = {"config": "current", "verdict": "undecided", "settings": {"num_workers": 2}, "worker_threads": 1,
          "code": "loader = ...", "load": {"other_cpu_cores_median": 1.5}, "decided": {"contenders": []}}


def every_fix(run):
    """The fix of every finding the profiler's rules and its interrupted run can print for this command line."""
    request = request_fact(run.options)
    measured = {"name": "current", "status": "ok", "settings": SETTINGS, "ratio_to_baseline": 2.0}
    failed = {"name": "workers-2-threads-1", "status": "failed", "settings": SETTINGS, "error": "RuntimeError: x"}
    problems = [p for p in PROBLEMS if p != "loader-store-failed" or run.options.store]  # the store's, with a store
    facts = [dict(request=request, input_problem={"finding": problem, "evidence": {}}) for problem in problems]
    facts += [{"request": request, "stopped": {"how": how}, "child": {"stderr_tail": ""}} for how in ("hung", "crashed")]
    facts += [{"request": request, "child": {"killed_for": "deadline"}, "configs": [failed, measured],
               "backend": {"pyg_lib": False, "torch_sparse": False},
               "breakdown": {"status": "ok", "sample_s": 1.0, "fetch_s": 0.0, "collate_s": 0.0, "batch_s": 1.0}}]
    facts += [{"request": request, "configs": [measured], "recommendation": dict(ADVICE, verdict=verdict)}
              for verdict in ("undecided", "under-load", "faster", "baseline")]
    fixes = {}
    for fact in facts:
        for rule in cli.SPEC.rules:
            for finding in rule(fact, run.options):
                fixes.setdefault(finding["id"], finding["fix"])
    evidence = {"signal": "SIGTERM", "exit_code": 143}
    fixes["loader-profile-interrupted"] = cli.interrupted(run, evidence)
    return fixes


HOSTILE_LINES = [
    ("--data", "{h}.pt"), ("--store", "{h}:make"), ("--store", "{h}/stores.py:make"),
    ("--synthetic", "200,2000,8", "--step", "{h}:step"), ("--synthetic", "200,2000,8", "--model", "{h}.py:net"),
    ("--synthetic", "200,2000,8", "--input-nodes", "{h}"), ("--store", "m:f", "--link", "--input-edges", "{h},r,b")]


@pytest.mark.parametrize("hostile", HOSTILE)
@pytest.mark.parametrize("line", HOSTILE_LINES, ids=lambda line: " ".join(w for w in line if "{h}" not in w))
def test_a_fix_built_from_a_hostile_path_or_reference_runs_nothing(line, hostile, tmp_path, monkeypatch):
    marker = tmp_path / "marker"
    text = hostile.format(m=marker)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))  # a fix naming this interpreter runs nothing
    fixes = every_fix(options_for([word.replace("{h}", text) for word in line]))
    assert {"loader-budget-short", "loader-too-busy-to-tell", "loader-load-decides", "loader-step-failed",
            "loader-profile-interrupted", "loader-config-failed"} <= set(fixes)
    assert ("loader-store-failed" in fixes) == ("--store" in line)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for finding_id, fix in sorted(fixes.items()):
        run_in_shell(fix, elsewhere)
        assert not marker.exists(), (finding_id, fix)


def words_of(fix):
    """The words bash reads in a rerun fix (everything before its comment)."""
    import shlex
    return shlex.split(fix.split("  # ", 1)[0].split(" && ", 1)[-1])


@pytest.mark.parametrize("hostile", HOSTILE[:6])
def test_a_hostile_data_path_reaches_the_rerun_whole(hostile, tmp_path):
    path = str(tmp_path / hostile.format(m="m"))
    fix = every_fix(options_for(["--data", path, "--budget", "10"]))["loader-budget-short"]
    words = words_of(fix)
    assert words[words.index("--data") + 1] == path and words[-2:] == ["--budget", "30"]


@pytest.mark.parametrize("argv, expected", [
    (["--data", "graph.pt"], ["--data", os.path.abspath("graph.pt"), "--budget", "60"]),
    (["--synthetic", "20,200,8", "--num-neighbors", "15,10", "--batch-size", "512"],
     ["--synthetic", "20,200,8", "--num-neighbors", "15,10", "--batch-size", "512", "--budget", "60"]),
    (["--synthetic", "20,200,8", "--current", "num_workers=6,persistent_workers=False,threads=2"],
     ["--synthetic", "20,200,8", "--current", "num_workers=6,persistent_workers=False,threads=2", "--budget", "60"]),
    (["--store", "dir/s.py:make", "--link", "--input-edges", "a,r,b", "--no-shuffle", "--ranks-per-node", "2"],
     ["--store", os.path.abspath("dir/s.py") + ":make", "--link", "--input-edges", "a,r,b", "--no-shuffle",
      "--ranks-per-node", "2", "--budget", "60"]),
    (["--synthetic", "20,200,8", "--stand-in", "GAT,3,32", "--epochs", "4", "--max-workers", "3", "--budget", "12.5"],
     ["--synthetic", "20,200,8", "--stand-in", "gat,3,32", "--epochs", "4", "--max-workers", "3", "--budget", "12.5"]),
    (["--synthetic", "20,200,8", "--format", "markdown", "--no-redact", "--pretty"],
     ["--synthetic", "20,200,8", "--budget", "60", "--format", "markdown", "--no-redact", "--pretty"])])
def test_the_interrupted_rerun_is_the_same_command_line_from_any_folder(argv, expected):
    fix = every_fix(options_for(argv))["loader-profile-interrupted"]
    assert words_of(fix)[:2] == ["python3", os.path.join(cli.__file__.rsplit("/", 2)[0], "profile_loader.py")]
    assert words_of(fix)[2:] == expected and "--budget bounds its time" in fix
    assert not fix.startswith("cd ")  # nothing is imported by module name: no folder to run it from


@pytest.mark.parametrize("argv", [["--store", "mystores:make"], ["--synthetic", "2,1,1", "--step", "train:step"],
                                  ["--synthetic", "2,1,1", "--model", "nets:make"]])
def test_a_module_reference_reruns_from_the_folder_it_was_imported_from(argv):
    fix = every_fix(options_for(argv))["loader-profile-interrupted"]
    import shlex
    assert shlex.split(fix.split(" && ", 1)[0]) == ["cd", os.getcwd()] and argv[1] in words_of(fix)


def test_a_step_that_failed_reruns_without_it_and_the_seeds_fix_names_a_placeholder():
    fixes = every_fix(options_for(["--synthetic", "2,1,1", "--step", "train:broken", "--input-nodes", "mask"]))
    assert "--loader-only" in words_of(fixes["loader-step-failed"])
    assert "train:broken" not in fixes["loader-step-failed"]
    setup = words_of(fixes["loader-setup-failed"])
    assert setup[setup.index("--input-nodes") + 1] == "NAME"
    link = words_of(every_fix(options_for(["--store", "m.py:f", "--link"]))["loader-setup-failed"])
    assert link[link.index("--input-edges") + 1] == "SRC,REL,DST" and "--input-nodes" not in link


@pytest.mark.parametrize("budget, retry, quiet", [(1.0, 30, 60), (20.0, 40, 60), (45.0, 90, 90), (60.0, 120, 120),
                                                  (2000.0, 3600, 3600)])
def test_the_longer_budgets_the_fixes_name_come_from_the_stage_table(budget, retry, quiet):
    run = options_for(["--synthetic", "2,1,1", "--budget", str(budget)])
    assert (run.bounds["retry"], run.bounds["quiet_retry"]) == (retry, quiet)
    fixes = every_fix(run)
    assert words_of(fixes["loader-budget-short"])[-2:] == ["--budget", "%g" % retry]
    assert words_of(fixes["loader-too-busy-to-tell"])[-2:] == ["--budget", "%g" % quiet]
    # A budget the fix names is one the command line takes.
    cli.SPEC.parser().parse_args(words_of(fixes["loader-budget-short"])[2:])


@pytest.mark.parametrize("budget", [1.0, 8.0, 60.0])
def test_the_child_is_ended_before_the_budget_leaving_time_to_render(budget):
    run = options_for(["--synthetic", "2,1,1", "--budget", str(budget)])
    assert run.deadline == budget
    assert run.by("measure") <= run.by("ranks") < run.by("child") < run.deadline
    assert run.by("child") == budget - cli.RENDER_RESERVE_S and run.bounds["measure"] >= 0


def test_the_store_checker_fix_takes_the_store_and_the_folder_as_words():
    fix = every_fix(options_for(["--store", "dir/s.py:make"]))["loader-store-failed"]
    words = words_of(fix)
    assert words[1].endswith("check_store_contract.py") and words[2] == os.path.abspath("dir/s.py") + ":make"
    assert words[3:6] == ["--path", os.getcwd(), "--skip-sampling"] and "import " not in fix
