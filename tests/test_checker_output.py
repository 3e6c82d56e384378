"""The checker's output for agents and people: ok and the exit codes, the compact JSON's budget (long
paths included), markdown that is short and redacted, fixes that run from any folder."""

import json
import os
import shlex
import sys

import pytest

from conftest import (CHECKER, ROOT, invoke_checker, load_schema, make_linked_venv, plain_run,
                      validate)
from support.helpers import BACKENDS


def test_help_schema_and_docs_say_what_ok_and_each_exit_code_mean(run_checker, output_schema):
    text = run_checker("--help", expect_json=False).stdout
    assert '"ok" is true when there is no finding of severity error, no failed gate and' in text
    assert '"ok": false with exit 0 means' in text
    assert output_schema["properties"]["ok"]["description"] == "no error finding, no failed gate, no internal error"
    assert output_schema["properties"]["exit_code"]["enum"] == [0, 1, 2, 3, 130, 143]  # 128 + SIGINT, SIGTERM
    assert "incomplete" in output_schema["properties"]["status"]["enum"]
    assert "MAJOR changes when a key" in output_schema["description"]
    skill = (ROOT / "SKILL.md").read_text()
    assert "`ok` and the exit codes mean the same in every script" in skill


def full_probe(*args, python=None):
    return invoke_checker(*args, python=python, detail="compact")


@pytest.fixture(scope="module")
def compact_probe():
    """One full probe of the test interpreter, the default (compact) document: shared by the tests that read it."""
    return full_probe()


def test_compact_json_fits_agent_harnesses_and_full_keeps_the_bulk(compact_probe, neighbor_backend):
    compact = compact_probe
    assert compact.returncode == 0
    assert compact.json["sampling"]["neighbor_backend"] is not None  # a typical working environment
    assert len(compact.stdout) <= 10000, len(compact.stdout)
    assert list(compact.json)[4] == "findings"  # what is wrong comes first
    full = full_probe("--full")
    assert full.json["checker"]["detail"] == "full" and compact.json["checker"]["detail"] == "compact"
    assert len(full.stdout) > len(compact.stdout)
    assert any("ops" in entry for entry in full.json["extensions"].values())
    assert not any("ops" in entry for entry in compact.json["extensions"].values())


def test_compact_json_without_a_backend_also_fits(compact_probe):
    assert len(compact_probe.stdout) <= 10000, len(compact_probe.stdout)


def test_markdown_report_is_short_redacted_and_has_versions_and_fixes(tmp_path):
    completed = plain_run([sys.executable, CHECKER, "--format", "markdown"], cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    report = completed.stdout
    lines = report.splitlines()
    assert len(lines) < 80, len(lines)
    assert lines[0].startswith("### PyG environment")
    assert "| component | version (state) |" in report and "| torch |" in report and "| PyG |" in report
    assert "#### Findings" in report and "  fix: `" in report
    home, host = os.path.expanduser("~"), os.uname().nodename
    assert home not in report and host not in report
    assert "redacted" in report
    unredacted = plain_run([sys.executable, CHECKER, "--static-only", "--format", "markdown", "--no-redact"],
                           cwd=tmp_path).stdout  # redaction is the same for either mode: the cheaper one
    assert sys.executable in unredacted


def test_a_normal_run_ends_with_a_one_screen_summary_on_stderr(compact_probe):
    result = compact_probe
    summary = result.stderr.split("check_sampling_backends: %s (exit" % result.json["status"], 1)
    assert len(summary) == 2, result.stderr
    assert len(summary[1].splitlines()) <= 20
    for item in result.json["findings"]:
        if item["severity"] == "error":
            assert item["id"] in summary[1]


def test_docs_path_points_at_the_troubleshooting_file(run_checker):
    path = run_checker("--static-only").json["checker"]["docs_path"]
    assert path and os.path.isfile(path) and path.endswith("references/troubleshooting.md")


BUDGET = 10000


def deep_venv(root, length, exclude=()):
    """A real venv (this one's packages, linked) whose bin/python path is exactly `length` characters."""
    tail = "/venv/bin/python"
    folder = str(root)
    need = length - len(tail) - len(folder)
    assert need >= 2, "the temp folder is already longer than the path asked for"
    while need:
        step = min(61, need) - (1 if need - min(61, need) == 1 else 0)  # "/" + at least one character
        folder += "/" + "x" * (step - 1)
        need -= step
    os.makedirs(folder)
    python = make_linked_venv(folder + "/venv", exclude)
    assert len(str(python)) == length, python
    return python


def compact_run(python):
    result = invoke_checker(python=python, detail="compact")
    validate(result.json, load_schema())
    return result


def test_compact_json_fits_with_a_150_character_interpreter_path_without_a_backend(tmp_path):
    python = deep_venv(tmp_path, 150, exclude=BACKENDS)
    result = compact_run(python)
    assert result.json["sampling"]["neighbor_backend"] is None
    assert "neighbor-sampling-unavailable" in result.ids()
    assert len(result.stdout) < BUDGET, len(result.stdout)
    # What the user needs is there: every error and warning with its exact fix, naming this interpreter.
    fix = result.only("neighbor-sampling-unavailable")["fix"]
    assert fix.startswith(str(python) + " -m pip install")


def test_compact_json_fits_with_a_150_character_interpreter_path_with_a_backend(tmp_path, neighbor_backend):
    python = deep_venv(tmp_path, 150)
    result = compact_run(python)
    assert result.json["sampling"]["neighbor_backend"] is not None
    assert len(result.stdout) < BUDGET, len(result.stdout)


def test_a_path_too_long_for_the_whole_document_is_trimmed_visibly(tmp_path):
    """A 1,500-character interpreter path: the document still fits, and says what it cut."""
    python = deep_venv(tmp_path, 1500, exclude=BACKENDS)
    result = compact_run(python)
    assert len(result.stdout) < BUDGET, len(result.stdout)
    trimmed = result.json["checker"]["trimmed"]
    assert trimmed["cut"] and "--full" in trimmed["why"]
    errors = [f for f in result.json["findings"] if f["severity"] == "error"]
    assert errors and all(f["fix"] and f["title"] for f in errors)
    full = invoke_checker("--full", python=python)
    assert "trimmed" not in full.json["checker"] and len(full.stdout) > BUDGET


def test_printed_fixes_name_scripts_by_absolute_path_and_run_from_another_folder(tmp_path):
    result = invoke_checker("--static-only")
    for item in result.json["findings"]:
        fix = item["fix"] or ""
        assert "python scripts/" not in fix and "python3 scripts/" not in fix, item
    deprecated = result.only("pyg-distributed-deprecated")["fix"].split("  #")[0]
    assert deprecated == "python3 %s --help" % (ROOT / "scripts" / "ddp_neighbor_training.py")
    ran = plain_run(["bash", "-c", deprecated], cwd="/")
    assert ran.returncode == 0 and ran.stdout.startswith("usage: ddp_neighbor_training.py"), ran.stderr
    # A usage error's fix, run from / as printed: the checker itself, by absolute path.
    refused = plain_run([sys.executable, CHECKER, "--static-only", "--require-cuda"], cwd=tmp_path)
    fix = json.loads(refused.stdout)["findings"][0]["fix"]
    assert fix == "python3 %s --require-cuda" % CHECKER
    again = plain_run(["bash", "-c", fix.replace("python3", shlex.quote(sys.executable), 1)], cwd="/")
    assert again.returncode in (0, 1) and json.loads(again.stdout)["gates"]["cuda"]["passed"] is False
