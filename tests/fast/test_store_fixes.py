"""Every fix the store checker prints is a value: a store reference, a --path folder or the working folder that
carries shell syntax ($(...), backticks, ;, quotes, a newline) enters a fix only as a quoted word. Each fix
built from such input runs in bash with an empty PATH from another folder, and no marker appears; a rerun
command keeps every option of the run, by absolute path."""

import argparse
import os
import shlex
from pathlib import Path

import pytest

from support import recorded_facts
from support.hostile_fakes import HOSTILE_NAMES as HOSTILE, hostile_folder, markers, run_pasted
from store_checker import cli, run


def hostile_project(tmp_path, name):
    """A project folder and a store file both named `name` (empty: harmless to import), and a folder to paste
    fixes in; -> (folder, stores file, paste folder), as paths."""
    return [Path(path) for path in hostile_folder(tmp_path, name, ".py")]


def every_fix(reference, folder):
    """The fixes the checker builds from this input: the usage error, the rules on facts that name it, the
    interrupted document."""
    options = cli.build_parser().parse_args([reference, "--path", str(folder), "--timeout", "5"])
    fixes = [run.reference_not_found({"references": {"pair": reference}, "failed_reference": reference,
                                      "error": "module not found"}, options).fix]
    facts = recorded_facts.load("store_checker")["homo"]
    facts["setup"].update(status="error", error="ImportError: x", failed_reference=reference)
    facts["caller"]["timed_out"] = {"call": reference + "()", "timeout_s": 5.0, "ended_by": "the alarm"}
    fixes += [found["fix"] for found in recorded_facts.findings_of(cli.SPEC, facts, options)]
    fixes.append(cli.SPEC.interrupted(argparse.Namespace(options=options), {"signal": "SIGTERM"}))
    return fixes


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_reference_path_and_folder_run_nothing_when_pasted(name, tmp_path, monkeypatch):
    folder, stores, paste = hostile_project(tmp_path, name)
    monkeypatch.chdir(folder)  # the working folder is named like it too: the reproduce command cds there
    fixes = every_fix(str(stores) + ":make_stores", folder)
    assert len(fixes) >= 4
    for fix in fixes:
        run_pasted(fix, paste)
        assert markers(tmp_path) == [], fix


@pytest.mark.parametrize("name", HOSTILE[:4])
def test_the_rerun_command_carries_each_word_whole(name, tmp_path, monkeypatch):
    folder, stores, _ = hostile_project(tmp_path, name)
    monkeypatch.chdir(folder)
    options = cli.build_parser().parse_args([str(stores) + ":make", "--path", str(folder), "--write-check",
                                             "--setup-timeout", "30"])
    words = shlex.split(cli.SPEC.interrupted(argparse.Namespace(options=options), {}).split("  # ")[0])
    assert words[2:] == [str(stores) + ":make", "--path", str(folder), "--write-check", "--setup-timeout", "30"]


def parsed(*argv):
    return cli.build_parser().parse_args(list(argv))


@pytest.mark.parametrize("argv, changed, words", [
    (["pkg.mod:make"], {}, ["pkg.mod:make", "--path", "{cwd}"]),
    (["./stores.py:make"], {}, ["{cwd}/stores.py:make"]),
    (["pkg.mod:make", "--path", "/", "--skip-sampling"], {"timeout": 30}, [
        "pkg.mod:make", "--path", "/", "--path", "{cwd}", "--skip-sampling", "--timeout", "30"]),
    (["--feature-store", "./fs.py:F", "--graph-store", "./gs.py:G", "--timeout", "12"], {"setup_timeout": 360},
     ["--feature-store={cwd}/fs.py:F", "--graph-store={cwd}/gs.py:G", "--timeout", "12", "--setup-timeout", "360"]),
])
def test_a_rerun_keeps_the_runs_options_and_works_from_any_folder(argv, changed, words, tmp_path, monkeypatch):
    for name in ("stores.py", "fs.py", "gs.py"):
        (tmp_path / name).write_text("")
    monkeypatch.chdir(tmp_path)
    expected = [word.replace("{cwd}", os.getcwd()) for word in words]
    assert run.rerun_words(parsed(*argv), **changed) == expected


@pytest.mark.parametrize("bound, flags", [(10.0, ["--timeout", "30"]), (120.0, ["--setup-timeout", "360"])])
def test_a_timeout_fix_lengthens_the_bound_the_call_ran_out_of(bound, flags):
    from store_checker.rules import rule_timeout
    facts = recorded_facts.load("store_checker")["homo"]
    facts["caller"]["timed_out"] = {"call": "feature_store.get_all_tensor_attrs()", "timeout_s": bound}
    [found] = rule_timeout(facts, parsed("pkg.mod:make"))
    assert found["id"] == "store-call-timeout"
    assert shlex.split(found["fix"].split(": ", 1)[1])[-2:] == flags
