"""The parent's side of the measurement child (probe.py): one fresh interpreter per probe, in the shared
sandbox, ended at its deadline. What it published comes back with how it ended, as data: the rules decide
on those fields, never on the text of an error."""

import json
import os
import sys

from diagnostics_core import sandbox
from . import CHILD_FLAG


def entry_script():
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "plan_capacity.py")


def run_probe(options, deadline, extra_env=None, on_progress=None):
    """-> (facts, problem) of one probe child: problem is None when it finished, else
    {"error": text, "hung": bool, "call": the call that did not return or None, "ended_by": how}.
    `on_progress` sees each record the child publishes as it arrives."""
    command = [sys.executable, "-B", entry_script(), CHILD_FLAG, json.dumps(options)]
    env = sandbox.child_environment()
    env.update(extra_env or {})
    from diagnostics_core.interrupt import Interrupted
    try:
        facts, done, running, outcome = sandbox.run_call_child(command, env, deadline, on_progress=on_progress)
    except Interrupted as stop:
        # The child's raw records stay out of the document: the callers keep what they need in their own
        # facts as it arrives (the calibration's record, through on_progress).
        stop.facts = None
        raise
    timed_out = facts.get("timed_out")
    if timed_out:  # the child's own alarm ended a call that overran its bound
        return facts, {"error": "%s did not return within %s s" % (timed_out["call"], timed_out["timeout_s"]),
                       "hung": True, "call": timed_out["call"], "ended_by": "the call's alarm in the child"}
    if facts.get("error"):
        return facts, {"error": facts["error"], "hung": False, "call": None, "ended_by": "an exception"}
    if done is not None:
        return facts, None
    if outcome.killed_for:  # the child's deadline ("deadline"), or a call blocked past its bound ("call-timeout")
        what = (running or {}).get("what") or "the %s probe" % options["probe"]
        return facts, {"error": "%s did not finish in time" % what, "hung": True, "call": (running or {}).get("what"),
                       "ended_by": outcome.killed_for}
    return facts, {"error": "the %s probe died (%s): %s" % (options["probe"], outcome.signal() or outcome.returncode,
                                                           outcome.stderr_tail[-400:]),
                   "hung": False, "call": (running or {}).get("what"), "ended_by": "the child died"}
