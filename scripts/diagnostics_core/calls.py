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


class _Deadline(BaseException):
    """Raised into a call by its alarm. A BaseException, so user code that catches Exception does
    not swallow it."""


class UserBaseException(Exception):
    """A call raised a BaseException that is not an Exception (KeyboardInterrupt, SystemExit(0),
    GeneratorExit, a user class): turned into an Exception at the call, so the code around the call
    reports it as that call's failure instead of unwinding the tool."""

    def __init__(self, original):
        Exception.__init__(self, "%s: %s" % (type(original).__name__, safe_str(original)))
        self.original = original


ENDED_BY_ALARM = "the alarm (SIGALRM) in the child, which interrupted the call"


class BoundedCaller(object):
    """Runs each call in the calling thread, the one that built the user's objects, bounded from
    outside that thread.

    Thread-bound clients (sqlite3 connections, most database drivers, CUDA contexts) work only in
    the thread that created them, as under PyG's loader with num_workers=0, so calls must not move
    to a helper thread. The bound: a SIGALRM timer raises into the call as soon as it runs Python
    code again. A call blocked in C with the GIL held cannot be interrupted that way, so each call
    is also announced to the parent process (reporter), which kills this child when the call
    outlives its bound (sandbox.run_call_child); off the main thread, where signals cannot be
    delivered, that is the only bound. A call made inside another call runs under the outer bound.
    """

    def __init__(self, timeout, reporter=None):
        self.timeout = timeout
        self.reporter = reporter
        self.count = 0
        self.timed_out = None  # {"call": ..., "timeout_s": ...} of the call that hung
        self.skipped = []
        self._armed = False  # an alarm is set for the call running now

    def __call__(self, what, function, *args, timeout=None, **kwargs):
        if self.timed_out is not None:
            self.skipped.append(what)
            raise CallSkipped(what)
        bound = timeout or self.timeout
        self.count += 1
        if self.reporter:
            self.reporter.begin(what, bound)
        alarm = self._arm(bound)
        try:
            try:
                value = function(*args, **kwargs)
            finally:
                self._disarm(alarm)
        except _Deadline:
            self._disarm(alarm)  # the alarm may have rung inside the first _disarm
            if alarm is None:
                raise  # an outer call's bound ran out: that call reports it
            self.timed_out = {"call": what, "timeout_s": bound, "ended_by": ENDED_BY_ALARM}
            raise CallTimeout(what) from None
        except Exception:
            raise
        except BaseException as error:  # KeyboardInterrupt, SystemExit(0): the call's failure, named
            raise UserBaseException(error) from None
        finally:
            if self.reporter:
                self.reporter.end()
        if alarm is not None and alarm["rang"]:  # the call caught the alarm (a bare except) and went on
            self.timed_out = {"call": what, "timeout_s": bound, "ended_by": ENDED_BY_ALARM}
            raise CallTimeout(what)
        return value

    def _arm(self, bound):
        """Set SIGALRM to fire after `bound` seconds; -> the alarm, or None where none is set."""
        import signal
        import threading
        if self._armed or not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
            return None
        alarm = {"rang": False, "set": True}

        def ring(signum, frame):
            alarm["rang"] = True
            raise _Deadline()
        alarm["previous"] = signal.signal(signal.SIGALRM, ring)
        signal.setitimer(signal.ITIMER_REAL, bound)
        self._armed = True
        return alarm

    def _disarm(self, alarm):
        import signal
        if alarm is None or not alarm["set"]:
            return
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, alarm["previous"])
        alarm["set"] = False
        self._armed = False

    def state(self):
        return {"count": self.count, "skipped": self.skipped, "timed_out": self.timed_out}


def retry_timeout(bound):
    """The --timeout a "rerun with a longer bound" fix names for a call that ran past `bound` seconds:
    three times it, within the flag's range."""
    from .cli import TIMEOUT_RANGE
    return int(min(TIMEOUT_RANGE[1], float(bound) * 3))


def error_text(error, limit=700):
    """One line for an exception from user or library code: type, message, no terminal colours."""
    if isinstance(error, UserBaseException):
        error = error.original
    text = re.sub(r"\x1b\[[0-9;]*m", "", "%s: %s" % (type(error).__name__, safe_str(error)))  # torch bolds
    # torch's weights_only errors open with a long preamble; the cause follows "WeightsUnpickler error:".
    cause = re.search(r"WeightsUnpickler error:\s*(.+?)(?:\n\n|$)", text, re.S)
    if cause:
        text = "%s: weights_only load failed: %s" % (type(error).__name__, cause.group(1).strip())
    return sanitise_text(text, limit)


def type_name(value):
    kind = type(value)
    return kind.__qualname__ if kind.__module__ == "builtins" else "%s.%s" % (kind.__module__, kind.__qualname__)


def require_torch_stack(tool, finding_id, extra=()):
    """UsageError naming what is missing when torch or torch_geometric cannot be imported here; its fix
    installs them, and the packages in `extra` the tool also needs."""
    missing = sandbox.missing_torch_stack()
    if not missing:
        return
    raise UsageError("%s.py: error: %s not importable by %s (%s)" % (
        tool.name, " and ".join(missing), sys.executable, finding_id), finding_id,
        {"missing": missing, "interpreter": sys.executable, "python": sys.version.split()[0]},
        fix=stack_fix(missing, extra))


def stack_fix(missing, extra=()):
    """Install what is missing into this interpreter (torch's CPU build), or use the training one."""
    from . import command, wheels
    notes = []
    if "torch" in missing:
        if sys.version_info[:2] < wheels.TORCH_PIN_NEEDS_PYTHON:
            notes.append("torch %s needs Python %d.%d+, this is %d.%d" % (
                (wheels.TORCH_PIN,) + wheels.TORCH_PIN_NEEDS_PYTHON + tuple(sys.version_info[:2])))
        checker = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                               "check_sampling_backends.py")
        notes.append("torch's CPU build; a GPU machine's line: %s" % command.line("python3", checker))
    notes.append("or run this tool with the interpreter of the training environment")
    return "%s  # %s" % (wheels.stack_install_command(sys.executable, missing, extra), "; ".join(notes))


def start_child(options_text):
    """First lines of a tool's child: quiet, announced calls; -> (options namespace, CallReporter)."""
    import argparse
    sandbox.quiet_child_process()
    reporter = sandbox.CallReporter()
    return argparse.Namespace(**json.loads(options_text)), reporter


def finish_child(reporter, **record):
    """Publish the last record and leave at once: threads or processes the user's code started must
    not delay the exit (the parent ends what is left)."""
    reporter.done(**record)
    sys.stderr.flush()
    os._exit(0)


def gather_in_child(script, child_flag, options, stuck, echo_stderr, sections):
    """The parent's side of a contract checker's child, for both checkers: run `script child_flag OPTIONS`
    in the sandbox; -> the facts, however the child ended: done; finished with its last record lost (too
    large for one record: facts["report_lost"], what it published one by one still holds); cut short by a
    crash (facts["crash"], naming its call) or a kill (facts["caller"]["timed_out"]); or interrupted by
    SIGINT/SIGTERM (Interrupted goes up carrying the facts so far). Every section named in `sections`
    ((name, empty value) pairs) is present; facts["child"] summarises the process and facts["caller"] the
    child's calls: {"count", "skipped", "timed_out"}, plain data like every other fact.
    `stuck` names what failed to return control ("call", "load"); `echo_stderr`, a prefix, passes what
    the child and the user's code print on to this tool's stderr."""
    import copy
    from .interrupt import Interrupted

    def complete(facts, outcome, caller=None):
        for key, empty in sections:
            facts.setdefault(key, copy.deepcopy(empty))
        facts["child"] = sandbox.call_child_summary(outcome)
        facts["caller"] = dict(copy.deepcopy(CALLER), **(caller or {}))
        return facts
    command = [sys.executable, "-B", os.path.abspath(script), child_flag, json.dumps(vars(options))]
    try:
        facts, done, running, outcome = sandbox.run_call_child(command, sandbox.child_environment(),
                                                               echo_stderr=echo_stderr)
    except Interrupted as stop:
        stop.facts = complete(dict(stop.facts or {}), stop.result)
        raise
    if done is not None:
        return complete(done["facts"], outcome, done["caller"])
    if outcome.returncode == 0 and outcome.killed_for is None and running is None:
        # exit 0 with no call running: the child finished, only its final record did not arrive whole
        facts["report_lost"] = {"reason": "the child's final record exceeded the record size limit",
                                "child_returncode": 0}
        return complete(facts, outcome)
    timed_out, crash = sandbox.call_child_cut_short(outcome, running, stuck)
    if crash is not None:
        if not crash.get("call"):
            crash["call"] = NO_CALL_RUNNING  # a crash record always names its call
        facts["crash"] = crash
    return complete(facts, outcome, {"timed_out": timed_out})


def rerun_after_signal(tool, rerun_words, what):
    """A contract checker's `interrupted` hook (runner.Spec): the fix is the same command again, rebuilt by
    `rerun_words(options)`; `what` names what evidence.running is (a store call, a file's load)."""
    def interrupted(run, evidence):
        if run.options is None:
            return None
        return ("%s  # run it again and let it finish (evidence.running names the %s a signal cut short); the "
                "sections below hold what was gathered before" % (tool.command(*rerun_words(run.options)), what))
    return interrupted


CALLER = {"count": 0, "skipped": [], "timed_out": None}  # the child's calls, as BoundedCaller.state() says them


NO_CALL_RUNNING = "no announced call (the child died between calls, in the tool's own code)"
