"""Calling user code from a sandboxed child: each call bounded and announced to the parent, which
ends the child when a call overruns (blocked in C with the GIL held); the parent's side collects the
facts the child published, so a crash or a hard hang still leaves them.

Shared by the tools that run the user's stores, files or PyG's sampler on them.
"""

import json
import os
import re
import sys

from . import sandbox
from .cli import UsageError
from .text import safe_str, sanitise_text


class CallTimeout(Exception):
    """A call exceeded its time bound."""


class CallSkipped(CallTimeout):
    """Not attempted because an earlier call timed out: a call that hangs once usually hangs again,
    and each wait would cost the full bound."""


class BoundedCaller(object):
    """Runs each call in a daemon thread and waits at most its bound.

    Each call is announced to the parent process (reporter), which kills this child if the call
    outlives its bound while holding the GIL, where the thread-based bound cannot fire.
    """

    def __init__(self, timeout, reporter=None, thread_name="user-call"):
        self.timeout = timeout
        self.reporter = reporter
        self.thread_name = thread_name
        self.count = 0
        self.timed_out = None  # {"call": ..., "timeout_s": ...} of the call that hung
        self.skipped = []

    def __call__(self, what, function, *args, timeout=None, **kwargs):
        import threading
        if self.timed_out is not None:
            self.skipped.append(what)
            raise CallSkipped(what)
        bound = timeout or self.timeout
        outcome = {}

        def target():
            try:
                outcome["value"] = function(*args, **kwargs)
            except BaseException as error:  # handed to the caller's thread
                outcome["error"] = error

        self.count += 1
        worker = threading.Thread(target=target, name=self.thread_name, daemon=True)
        if self.reporter:
            self.reporter.begin(what, bound)
        worker.start()
        worker.join(bound)
        if self.reporter:
            self.reporter.end()
        if worker.is_alive():
            self.timed_out = {"call": what, "timeout_s": bound}
            raise CallTimeout(what)
        if "error" in outcome:
            raise outcome["error"]
        return outcome.get("value")

    def state(self):
        return {"count": self.count, "skipped": self.skipped, "timed_out": self.timed_out}


class CallerState(object):
    """What the parent knows of the child's calls (the child's BoundedCaller, or the kill)."""

    def __init__(self, count=0, skipped=(), timed_out=None):
        self.count, self.skipped, self.timed_out = count, list(skipped), timed_out


def error_text(error, limit=700):
    """One line for an exception from user or library code: type, message, no terminal colours."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", "%s: %s" % (type(error).__name__, safe_str(error)))  # torch bolds
    # torch's weights_only errors open with a long preamble; the cause follows "WeightsUnpickler error:".
    cause = re.search(r"WeightsUnpickler error:\s*(.+?)(?:\n\n|$)", text, re.S)
    if cause:
        text = "%s: weights_only load failed: %s" % (type(error).__name__, cause.group(1).strip())
    return sanitise_text(text, limit)


def type_name(value):
    kind = type(value)
    return kind.__qualname__ if kind.__module__ == "builtins" else "%s.%s" % (kind.__module__, kind.__qualname__)


def require_torch_stack(tool, finding_id):
    """UsageError naming what is missing when torch or torch_geometric cannot be imported here."""
    from .text import quote
    missing = sandbox.missing_torch_stack()
    if not missing:
        return
    raise UsageError("%s.py: error: %s not importable by %s (%s)" % (
        tool.name, " and ".join(missing), sys.executable, finding_id), finding_id,
        {"missing": missing, "interpreter": sys.executable, "python": sys.version.split()[0]},
        fix="%s -m pip install torch torch_geometric  # or run this tool with the interpreter of the "
            "training environment" % quote(sys.executable))


def start_child(options_text):
    """First lines of a tool's child: quiet, announced calls; -> (options namespace, CallReporter)."""
    import argparse
    sandbox.quiet_child_process()
    reporter = sandbox.CallReporter()
    return argparse.Namespace(**json.loads(options_text)), reporter


def finish_child(reporter, **record):
    """Publish the last record and leave at once: a call may still be blocked in a daemon thread."""
    reporter.done(**record)
    sys.stderr.flush()
    os._exit(0)


def run_tool_child(script, child_flag, options, stuck):
    """Run `script child_flag OPTIONS` in the sandbox; -> (facts, done record or None, SandboxResult,
    timed_out, crash). `stuck` names what failed to return control ("call", "load")."""
    command = [sys.executable, "-B", os.path.abspath(script), child_flag, json.dumps(vars(options))]
    facts, done, running, outcome = sandbox.run_call_child(command, sandbox.child_environment())
    timed_out = crash = None
    if done is None:
        timed_out, crash = sandbox.call_child_cut_short(outcome, running, stuck)
    return facts, done, outcome, timed_out, crash
