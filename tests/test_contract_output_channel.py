"""The output channel itself, for every tool (issue 32, class 1 and the shared part of class 4): a
stdout that cannot take the document (full disk, closed) ends the tool with exit 3 and at most one
stderr line, never a traceback or a verdict's code; a closed stderr changes nothing else; whatever
the command line repeats back is bounded. Each case runs the tool as an agent's shell would."""

import json
import subprocess
import sys

import pytest

from conftest import ROOT, clean_env
from test_contract_every_tool import TOOLS, usage_id

SCRIPTS = ROOT / "scripts"
NOT_WRITTEN = 3
def shell(tool, args, redirect, timeout=60):
    """`python TOOL ARGS REDIRECT` through bash, so `>&-`, `2>&-` and `>/dev/full` are the shell's own."""
    words = " ".join("'%s'" % word for word in [sys.executable, str(SCRIPTS / (tool + ".py"))] + list(args))
    return subprocess.run(["bash", "-c", "%s %s" % (words, redirect)], capture_output=True, timeout=timeout,
                          env=clean_env(), stdin=subprocess.DEVNULL, cwd=str(ROOT))


def assert_one_line_no_traceback(completed):
    stderr = completed.stderr.decode("utf-8", "replace")
    assert "Traceback" not in stderr and "Error:" not in stderr.replace("error:", ""), stderr[-2000:]
    lines = stderr.splitlines()
    assert len(lines) == 1, lines
    assert "could not be written" in lines[0] and "exit 3" in lines[0], lines


# The metadata answer (before argparse), a refused command line, and --explain of a real id.
CASES = {"list-findings": ["--list-findings"], "usage-error": ["--no-such-flag"]}


@pytest.mark.parametrize("redirect, said", [(">/dev/full", "No space left on device"), (">&-", "stdout is closed")])
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_stdout_that_cannot_take_the_document_exits_3_with_one_line(tool, case, redirect, said):
    """A full disk or a closed stdout: exit 3, one stderr line saying why, no traceback."""
    completed = shell(tool, CASES[case], redirect)
    assert completed.returncode == NOT_WRITTEN, completed.stderr[-2000:]
    assert_one_line_no_traceback(completed)
    assert said in completed.stderr.decode()


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_a_closed_stderr_changes_nothing_else(tool):
    completed = shell(tool, ["--no-such-flag"], "2>&-")
    assert completed.returncode == 2
    document = json.loads(completed.stdout)  # exactly one document: no progress line leaked into stdout
    assert [f["id"] for f in document["findings"]] == [usage_id(tool)]
    assert completed.stdout.count(b"\n") == 1


def test_compare_that_cannot_write_a_real_verdict_exits_3(tmp_path):
    """Not only refusals: a comparison that ran loses its verdict when stdout is full, and says so."""
    report = subprocess.run([sys.executable, str(SCRIPTS / "check_sampling_backends.py"), "--static-only"],
                            capture_output=True, timeout=120, env=clean_env())
    assert report.returncode == 0, report.stderr[-2000:]
    for name in ("a", "b"):
        (tmp_path / (name + ".json")).write_bytes(report.stdout)
    completed = shell("compare_reports", [str(tmp_path)], ">/dev/full")
    assert completed.returncode == NOT_WRITTEN
    assert_one_line_no_traceback(completed)
    completed = shell("compare_reports", [str(tmp_path)], "2>&-")
    assert completed.returncode == 0 and json.loads(completed.stdout)["status"] in ("ok", "warning")


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_a_huge_explain_id_is_not_echoed_whole(tool):
    huge = "x" * 100000
    completed = shell(tool, ["--explain", huge], "")
    assert completed.returncode == 2
    stderr = completed.stderr.decode()
    assert len(stderr.splitlines()) == 1 and len(stderr) < 1000, len(stderr)
    assert "characters cut" in stderr
    document = json.loads(completed.stdout)
    assert len(json.dumps(document["findings"])) < 2000  # argv in the tool's section keeps its own bound
    assert len(completed.stdout) < 20000


def test_help_says_what_exit_3_and_an_interrupt_mean_once_for_every_tool():
    shared = None
    for tool in sorted(TOOLS):
        completed = subprocess.run([sys.executable, str(SCRIPTS / (tool + ".py")), "--help"],
                                   capture_output=True, text=True, timeout=60, env=clean_env())
        assert completed.returncode == 0
        section = completed.stdout[completed.stdout.index("when the document cannot be written"):]
        assert "3 " in section and "130" in section and "143" in section
        shared = shared or section
        assert section == shared, tool  # one text, from diagnostics_core.contract.EXIT_OUTPUT_HELP
