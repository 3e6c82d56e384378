"""Stopping a long run on SIGINT or SIGTERM: the signal becomes Interrupted, a SystemExit whose code
is 128 + the signal number, raised in the main thread. Every `finally` that ends children runs on the
way up, and the tool can still print one document that says it was interrupted and what it had
measured (facts the interrupted stage attaches to the exception)."""

import signal
import threading

from .contract import EXIT_INTERRUPTED_BASE

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(SystemExit):
    """A stop signal arrived. Uncaught, it exits 128 + signum like a shell's report, without a traceback."""

    def __init__(self, signum):
        SystemExit.__init__(self, EXIT_INTERRUPTED_BASE + signum)
        self.signum = signum
        self.signal = signal.Signals(signum).name
        self.facts = None    # what the interrupted stage had gathered
        self.running = None  # the call that was running, where one was announced

    def evidence(self):
        evidence = {"signal": self.signal, "exit_code": self.code}
        if self.running is not None:
            evidence["running"] = self.running
        return evidence


class StopSignals(object):
    """While installed, the first SIGINT/SIGTERM raises Interrupted; later ones are ignored, so the
    cleanup it starts is not itself cut short. During hold() a signal is only noted; release()
    restores the previous handlers and returns what was noted but not yet raised (or None).
    Off the main thread, where handlers cannot be set, it does nothing."""

    def __init__(self):
        self.pending = None
        self.raised = False
        self.holding = False
        self.previous = []
        if threading.current_thread() is threading.main_thread():
            self.previous = [(number, signal.signal(number, self._stop)) for number in STOP_SIGNALS]

    def _stop(self, signum, frame):
        if self.pending is not None:
            return
        self.pending = signum
        if not self.holding:
            self.raised = True
            raise Interrupted(signum)

    def hold(self):
        self.holding = True

    def release(self):
        for number, previous in self.previous:
            signal.signal(number, previous)
        self.previous = []
        if self.pending is not None and not self.raised:
            self.raised = True
            return Interrupted(self.pending)
        return None
