"""Running code we do not control: a child in its own session, bounded in wall time, whose every
descendant is found and ended, reporting JSON records on a private pipe."""

import json
import os
import sys
import time

from .text import safe_str, sanitise_text


def signal_name(returncode):
    if returncode is None or returncode >= 0:
        return None
    import signal
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return "signal %d" % -returncode


PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
EXIT_GRACE_S = 0.5  # how long output is still read after the direct child exited
RECORD_LIMIT = 1 << 24  # bytes per record line; longer lines are split and dropped


def become_subreaper():
    """Make orphaned descendants (double fork, setsid) re-parent to this process.

    Linux only; elsewhere, or when prctl is refused, returns False and ending
    descendants falls back to killing the child's process group.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def process_table():
    """{pid: (ppid, state, command)} from /proc, or None where there is no /proc."""
    if not os.path.isdir("/proc/self"):
        return None
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as handle:
                stat = handle.read().decode("utf-8", "replace")
        except OSError:
            continue  # it exited meanwhile
        command = stat[stat.find("(") + 1:stat.rfind(")")]
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) >= 2:
            table[int(name)] = (int(fields[1]), fields[0], command)
    return table


def descendants_of(root, table):
    """Every pid below `root` in the parent tree of `table`."""
    children = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, stack = [], list(children.get(root, []))
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, []))
    return found


def reap_orphans():
    """Collect the exit status of re-parented descendants (they would stay zombies)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except (ChildProcessError, OSError, AttributeError):
            return
        if pid == 0:
            return


def end_descendants(exclude=(), rounds=50):
    """SIGKILL every live descendant of this process; return what was found.

    Repeats until a walk finds none, because a descendant may fork while the
    walk runs. `exclude` names pids not to report (the direct child).
    """
    import signal
    ended, seen = [], set()
    for _ in range(rounds):
        table = process_table()
        if table is None:
            return ended
        live = [pid for pid in descendants_of(os.getpid(), table) if table[pid][1] != "Z"]
        for pid in live:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                continue
            if pid not in seen and pid not in exclude:
                seen.add(pid)
                ended.append({"pid": pid, "command": sanitise_text(table[pid][2], 64)})
        reap_orphans()
        if not live:
            break
        time.sleep(0.01)
    return ended


class SandboxResult(object):
    """How a sandboxed child ended."""

    def __init__(self):
        self.returncode = None
        self.killed_for = None  # a reason given by `watch`, or "deadline"
        self.stderr_tail = ""
        self.descendants_ended = []  # processes left behind by the child, ended by us
        self.subreaper = False
        self.seconds = None

    def signal(self):
        return signal_name(self.returncode)


ECHO_LIMIT = 1 << 20  # bytes of a child's stderr passed on to the tool's stderr; the rest is counted


def run_sandboxed(command, env, deadline, on_record, watch=None, stderr_limit=8192, echo_stderr=None):
    """Run `command`; each JSON record line it prints goes to on_record(stamp, record).

    With `echo_stderr` (a prefix such as "[store] "), what the child writes to stderr (and the user's
    code to stdout, which a ChildReporter points there) is also passed on to this tool's stderr, line
    by line, each line escaped and bounded (markdown.stderr_line), the first ECHO_LIMIT bytes of it.

    Records carry the sender's pid (see ChildReporter); lines from any other
    process (a fork of the child) or that are not JSON objects are dropped.

    The child gets its own session; this process becomes a child subreaper.
    It ends when the child has exited (plus EXIT_GRACE_S for output still in
    flight: a grandchild holding the pipe open is never waited for), when
    watch(now) returns a reason, or at `deadline` (wall time, time.time()).
    Then the child's process group and every descendant are killed and reaped.
    """
    import subprocess
    import threading
    try:
        import queue
    except ImportError:  # pragma: no cover
        import Queue as queue
    result = SandboxResult()
    result.subreaper = become_subreaper()
    started = time.time()
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env, start_new_session=True)
    lines = queue.Queue()
    stderr_chunks = []

    def deliver(stamp, line):
        try:
            record = json.loads(line.decode("utf-8", "replace"))
        except ValueError:
            return
        if isinstance(record, dict) and record.pop("pid", None) == process.pid:
            on_record(stamp, record)

    def read_lines():
        for line in iter(lambda: process.stdout.readline(RECORD_LIMIT), b""):
            lines.put((time.time(), line))
        lines.put((time.time(), None))

    echo = {"pending": b"", "sent": 0, "held": 0}

    def pass_on(chunk, last=False):
        from .markdown import stderr_line
        data = echo["pending"] + chunk
        lines_out = data.split(b"\n")
        echo["pending"] = b"" if last else lines_out.pop()
        if len(echo["pending"]) > 4096:  # a line without end: pass it on in pieces
            lines_out.append(echo["pending"])
            echo["pending"] = b""
        for line in lines_out:
            if not line and last:
                continue
            if echo["sent"] + len(line) > ECHO_LIMIT:
                echo["held"] += len(line) + 1
                continue
            echo["sent"] += len(line) + 1
            stderr_line(echo_stderr + line.decode("utf-8", "replace"))
        if last and echo["held"]:
            stderr_line("%s... %d more bytes of its output not shown" % (echo_stderr, echo["held"]))

    def read_stderr():
        for chunk in iter(lambda: process.stderr.read1(4096) if hasattr(process.stderr, "read1")
                          else process.stderr.read(4096), b""):
            stderr_chunks.append(chunk)
            if len(stderr_chunks) > 64:
                del stderr_chunks[:32]
            if echo_stderr is not None:
                pass_on(chunk)
        if echo_stderr is not None:
            pass_on(b"", last=True)

    # Reader threads, not the main loop, block on the pipes: the loop below
    # only waits on a queue with a timeout, so nothing can hold it past the deadline.
    readers = []
    for target in (read_lines, read_stderr):
        thread = threading.Thread(target=target)
        thread.daemon = True
        thread.start()
        readers.append(thread)
    from .interrupt import Interrupted, StopSignals
    stops, stopped, stream_ended = StopSignals(), None, False
    try:
        try:
            stream_ended = watch_child(process, deadline, lines, deliver, watch, result)
        except Interrupted as error:  # SIGINT/SIGTERM to the tool: end the child, keep what it sent
            stopped = error
        finally:  # also on any other way out: nothing may outlive this process
            stops.hold()
            kill_process_group(process)
            try:
                result.returncode = process.wait(timeout=5.0)  # SIGKILLed: only an exit in progress remains
            except subprocess.TimeoutExpired:
                process.kill()
                result.returncode = process.wait()
            result.descendants_ended = end_descendants(exclude=(process.pid,))
        # Records the child wrote before the end still count, also those its reader thread has not
        # queued yet (a signal can arrive before that thread ran): read until the pipe's end, which
        # comes at once now that every process holding it is gone, or for EXIT_GRACE_S at most.
        drain_until = time.time() + EXIT_GRACE_S
        while not stream_ended:
            try:
                stamp, line = lines.get(timeout=max(drain_until - time.time(), 0.001))
            except queue.Empty:
                break
            if line is None:
                break
            deliver(stamp, line)
        close_pipes(process, readers)
    finally:
        stopped = stopped or stops.release()  # a signal noted during the cleanup
    if stopped is not None:
        result.killed_for = "interrupted"
    tail = b"".join(stderr_chunks)[-stderr_limit:]
    result.stderr_tail = sanitise_text(tail.decode("utf-8", "replace"), stderr_limit)
    result.seconds = round(time.time() - started, 3)
    if stopped is not None:
        stopped.result = result
        raise stopped
    return result


def close_pipes(process, readers):
    """Close the child's stdout and stderr pipes once their reader threads are done (unclosed, each is a
    ResourceWarning when collected). Every process holding them has been ended, so their end comes at once;
    a pipe still held by something out of reach (no subreaper) stays open rather than be closed under a
    thread blocked reading it."""
    for reader, pipe in zip(readers, (process.stdout, process.stderr)):
        reader.join(EXIT_GRACE_S)
        if not reader.is_alive():
            pipe.close()


def watch_child(process, deadline, lines, deliver, watch, result):
    """Deliver records until the child is done, watch() objects, or the deadline passes.
    -> True when the record stream ended (every line of it delivered)."""
    try:
        import queue
    except ImportError:  # pragma: no cover
        import Queue as queue
    exited_at = None
    while True:
        now = time.time()
        if now >= deadline:
            result.killed_for = "deadline"
            return False
        reason = watch(now) if watch else None
        if reason:
            result.killed_for = reason
            return False
        if exited_at is None and process.poll() is not None:
            exited_at = now
        if exited_at is not None and now - exited_at > EXIT_GRACE_S:
            return False  # the child is gone; whoever still holds the pipe is not waited for
        try:
            stamp, line = lines.get(timeout=min(0.05, max(deadline - now, 0.001)))
        except queue.Empty:
            continue
        if line is None:
            return True
        deliver(stamp, line)


class ChildReporter(object):
    """The child's side: JSON records, one a line, on a private copy of stdout.

    After this, fd 1 points at stderr, so anything the code under test prints
    cannot corrupt the record stream.
    """

    def __init__(self):
        self.fd = os.dup(1)
        os.dup2(2, 1)
        self.pid = os.getpid()

    def send(self, record):
        record = dict(record, pid=self.pid)
        data = (json.dumps(record, default=safe_str) + "\n").encode("utf-8")
        while data:
            data = data[os.write(self.fd, data):]


class CallReporter(ChildReporter):
    """Child side for tools that call user code: each bounded call is announced, facts are
    published as they are gathered, so a crash or a hard hang still leaves them with the parent."""

    def begin(self, what, timeout_s):
        self.send({"event": "call", "what": what, "timeout_s": timeout_s})

    def end(self):
        self.send({"event": "returned"})

    def publish(self, key, value):
        self.send({"event": "facts", "key": key, "value": value})

    def append(self, key, value):
        self.send({"event": "append", "key": key, "value": value})

    def done(self, **extra):
        self.send(dict(extra, event="done"))


CALL_GRACE_S = 2.0  # a call still running this long past its bound is ended by killing the child


def run_call_child(command, env, deadline=float("inf"), on_progress=None, echo_stderr=None):
    """Parent side of CallReporter: run the child in the sandbox and collect what it published.

    A call that outlives its announced bound by CALL_GRACE_S (blocked in C
    with the GIL held, so the child's own thread-based bound cannot fire) is
    ended by killing the child. `on_progress`, if given, sees each "progress",
    "facts" and "append" record as it arrives (a tool showing progress).
    -> (facts, done record or None, the call running at the end or None, SandboxResult).
    """
    facts, calls, state = {}, [], {"done": None}  # calls: the announced calls still running, outermost first

    def on_record(stamp, record):
        event = record.get("event")
        if event == "call":
            calls.append({"what": record.get("what"), "timeout_s": float(record.get("timeout_s") or 0),
                          "started": stamp})
        elif event == "returned":
            if calls:
                calls.pop()
        elif event == "facts":
            facts[record.get("key")] = record.get("value")
        elif event == "append":
            facts.setdefault(record.get("key"), []).append(record.get("value"))
        elif event == "done":
            state["done"] = record
        if on_progress is not None and event in ("progress", "append", "facts"):
            on_progress(record)

    def watch(now):
        for call in calls:
            if now - call["started"] > call["timeout_s"] + CALL_GRACE_S:
                state["overrun"] = call
                return "call-timeout"
        return None

    from .interrupt import Interrupted
    try:
        result = run_sandboxed(command, env, deadline, on_record, watch, echo_stderr=echo_stderr)
    except Interrupted as stop:  # the child is ended; what it published goes up with the signal
        stop.facts = facts
        if calls:
            stop.running = {"what": calls[-1]["what"], "timeout_s": calls[-1]["timeout_s"]}
        raise
    running = state.get("overrun") or (calls[-1] if calls else None)
    if running is not None:
        running = {"what": running["what"], "timeout_s": running["timeout_s"]}
    return facts, state["done"], running, result


def call_child_summary(outcome):
    """The "child" section of the contract checkers: how their sandboxed child ended."""
    return {"returncode": outcome.returncode, "signal": outcome.signal(), "seconds": outcome.seconds,
            "descendants_ended": outcome.descendants_ended, "subreaper": outcome.subreaper}


def call_child_cut_short(outcome, running, stuck):
    """A call child that published no "done": -> (timed_out, crash), exactly one of them not None.

    `stuck` names what failed to return control ("call", "load").
    """
    if outcome.killed_for == "call-timeout":
        return {"call": running["what"], "timeout_s": running["timeout_s"],
                "ended_by": "killing the child process (the %s did not return control)" % stuck}, None
    return None, {"call": (running or {}).get("what"), "signal": outcome.signal(),
                  "returncode": outcome.returncode, "stderr_tail": outcome.stderr_tail[-2000:]}


def kill_process_group(process):
    import signal
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (OSError, AttributeError):
        try:
            process.kill()
        except OSError:
            pass


def child_environment(base=None):
    """Environment for a child that imports torch: nothing written, no CUDA context."""
    env = dict(os.environ if base is None else base)
    env["PYTHONDONTWRITEBYTECODE"] = "1"      # no __pycache__ written anywhere
    env["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"  # CUDA availability from NVML, no context
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"
    # torch._dynamo creates <temp dir>/torchinductor_<user> at import time, and
    # finding the temp dir (tempfile.gettempdir) creates and deletes a probe
    # file in it. Pointing the cache at an existing directory avoids both.
    if "TORCHINDUCTOR_CACHE_DIR" not in env:
        env["TORCHINDUCTOR_CACHE_DIR"] = existing_temp_dir(env)
    return env


def existing_temp_dir(env):
    """The first existing directory of tempfile's candidates, without probing by writing."""
    candidates = [env.get(name) for name in ("TMPDIR", "TEMP", "TMP")]
    candidates += ["/tmp", "/var/tmp", "/usr/tmp", os.getcwd()]
    for candidate in candidates:
        if candidate and os.path.isdir(candidate):
            return os.path.abspath(candidate)
    return os.getcwd()


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def missing_torch_stack():
    """torch / torch_geometric not importable here, found without importing them (the torch-side tools' gate)."""
    import importlib.util
    return [name for name in ("torch", "torch_geometric") if importlib.util.find_spec(name) is None]


def quiet_child_process():
    """First thing a child does: no bytecode written, no temp-dir probe file, and (Linux) die
    with the tool even if the tool itself is SIGKILLed."""
    import signal
    import tempfile
    sys.dont_write_bytecode = True
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    # gettempdir() would create and delete a test file in each candidate.
    tempfile.tempdir = existing_temp_dir(os.environ)


def remove_rendered_templates():
    """PyG renders a conv's propagate (and edge_updater) from a template into a .py file in the temp
    dir, imports it and leaves the file there, one more each run. This process's own such files go
    once imported (the module lives on in memory), so a run leaves nothing behind. -> paths removed."""
    import tempfile
    temp = os.path.realpath(tempfile.gettempdir())
    removed = []
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None) or ""
        if (name.startswith("torch_geometric.") and os.path.basename(path).startswith(name + "_")
                and os.path.dirname(os.path.realpath(path)) == temp):
            try:
                os.unlink(path)
                removed.append(path)
            except OSError:
                pass
    return removed


def refuse_sockets(active=lambda: True):
    """Make every Python-level socket creation fail in the child while active(), and note who tried.

    `import torch_geometric` imports requests, and urllib3 binds a socket on
    ::1 at import time to test for IPv6; libraries treat the refusal as
    "no IPv6". The returned list fills as attempts happen.
    """
    attempts = []

    def audit(event, args):
        if event == "socket.__new__" and active():
            frame = sys._getframe(1)
            while frame is not None and frame.f_code.co_filename.endswith("socket.py"):
                frame = frame.f_back
            origin = frame.f_code.co_filename if frame is not None else "?"
            attempts.append({"event": event, "origin": origin[-120:]})
            raise PermissionError("check_sampling_backends is read-only: no sockets")

    sys.addaudithook(audit)
    return attempts
