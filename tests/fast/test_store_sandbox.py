"""The sandbox the contract checkers run the user's code in (diagnostics_core/sandbox.py) leaves no file
open: each pipe to its child is closed once read to the end, so a run under `python -X dev` (which shows
every ResourceWarning) prints none. The child here is a plain `python -c`, not a tool."""

import gc
import sys
import time
import warnings

import pytest

from diagnostics_core import sandbox

CHILDREN = {
    "records": ('import json, os, sys; print(json.dumps({"event": "done", "pid": os.getpid()})); '
                'print("x", file=sys.stderr)'),
    "silent": "pass",
    "crash": "import os; os.abort()",
    "hang": "import time; time.sleep(30)",
}


@pytest.mark.parametrize("child", sorted(CHILDREN))
def test_a_sandboxed_child_leaves_no_pipe_open(child):
    records = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = sandbox.run_sandboxed([sys.executable, "-c", CHILDREN[child]], sandbox.child_environment(),
                                       time.time() + (0.3 if child == "hang" else 20),
                                       lambda stamp, record: records.append(record))
        del result
        gc.collect()
    leaked = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaked == []
    assert (records == [{"event": "done"}]) is (child == "records")


def test_a_call_child_cut_by_its_deadline_leaves_no_pipe_open():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        facts, done, running, outcome = sandbox.run_call_child(
            [sys.executable, "-c", "import time; time.sleep(30)"], sandbox.child_environment(), time.time() + 0.3)
        assert outcome.killed_for == "deadline" and done is None
        del outcome
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
