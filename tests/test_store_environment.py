"""The store checker in a hostile Python environment (issue 39), run as an agent runs it: warnings turned into
errors (PYTHONWARNINGS=error, python -W error -X dev) are named and the check still runs on Python's default
filters, printing no ResourceWarning and no traceback; a stray torch/ package shadowing the installed one on
PYTHONPATH is refused with one document naming it, before any child starts."""

import subprocess
import sys

import pytest

from conftest import ROOT, clean_env, strict_json
from support import hostile_fakes as hostile

SCRIPT = str(ROOT / "scripts" / "check_store_contract.py")
PAIR = "%s:reference_homo" % (ROOT / "tests" / "support" / "store_fixtures.py")


def check(env, flags=()):
    completed = subprocess.run([sys.executable] + list(flags) + [SCRIPT, PAIR, "--skip-sampling"],
                               capture_output=True, timeout=300, env=env, stdin=subprocess.DEVNULL)
    document = strict_json(completed.stdout)  # one document, whatever the environment
    assert document["exit_code"] == completed.returncode
    return completed, document


@pytest.mark.finding("environment-warnings-as-errors")
@pytest.mark.parametrize("how", ["PYTHONWARNINGS=error", "-W error -X dev"])
def test_warnings_made_errors_are_named_and_the_check_still_runs(how):
    extra, flags = hostile.warnings_made_errors(how)
    completed, document = check(clean_env(extra), flags)
    hostile.assert_warnings_named(completed, document)
    assert document["tensor_attrs"]["count"] == 2  # the stores were checked all the same


@pytest.mark.finding("environment-package-shadowed")
def test_a_stray_torch_on_pythonpath_is_refused_naming_it(tmp_path):
    stray = hostile.stray_torch(tmp_path)
    completed, document = check(clean_env({"PYTHONPATH": stray}))
    hostile.assert_refused_as_shadowed(completed, document, stray)
    assert document["setup"] is None  # refused before the stores were imported
