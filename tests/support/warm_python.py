"""Run Python scripts as fresh processes without paying torch's import each time.

The docs tests run many small scripts (runnable blocks, measured claims, examples), each of which would
start an interpreter and import torch and torch_geometric: seconds each on a shared 2-core machine. A
WarmPython server imports them once, then forks one child per script. The child is a process of its own
(own pid, working directory, argv, stdout/stderr files, process group), runs the script as `__main__`
with runpy, and exits; the server never runs user code itself, so no script sees another's state.

What a forked child cannot give is a fresh import: a script that hides modules before importing torch
(`sys.modules[...] = None`), or that needs environment variables read at import, must run in a new
interpreter: `needs_fresh_interpreter` says which, and `run` then starts one.
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

PRELOAD = ("torch", "torch_geometric", "torch_geometric.data", "torch_geometric.loader", "torch_geometric.nn",
           "torch_geometric.sampler", "torch_geometric.distributed", "torch_geometric.transforms",
           "torch.distributed", "torch.multiprocessing", "numpy")
FRESH_ONLY = re.compile(r"sys\.modules\[[^\]]+\]\s*=")


class Completed:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def needs_fresh_interpreter(code):
    return bool(FRESH_ONLY.search(code))


_SERVERS = {}


def shared(env):
    """The one server for this environment in this test session (started on first use, closed at exit)."""
    key = tuple(sorted(env.items()))
    if key not in _SERVERS:
        if not _SERVERS:
            import atexit
            atexit.register(lambda: [server.close() for server in _SERVERS.values()])
        _SERVERS[key] = WarmPython(env)
    return _SERVERS[key]


class WarmPython:
    """One server per test module or session; `run(script, cwd, args, timeout)` -> Completed."""

    def __init__(self, env, preload=PRELOAD):
        self.env = dict(env)
        self.server = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve", ",".join(preload)],
                                       env=self.env,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                       start_new_session=True)
        ready = self.server.stdout.readline()
        if ready.strip() != "ready":
            raise RuntimeError("warm python server did not start: %r" % ready)

    def run(self, script, cwd, args=(), timeout=240, fresh=False):
        script = os.path.abspath(str(script))
        if fresh:
            process = subprocess.run([sys.executable, script, *map(str, args)], cwd=str(cwd), env=self.env,
                                     capture_output=True, text=True, timeout=timeout)
            return Completed(process.returncode, process.stdout, process.stderr)
        with tempfile.TemporaryDirectory() as folder:
            out, err = os.path.join(folder, "stdout"), os.path.join(folder, "stderr")
            request = {"script": script, "cwd": str(cwd), "args": [str(a) for a in args], "stdout": out,
                       "stderr": err, "timeout": timeout}
            self.server.stdin.write(json.dumps(request) + "\n")
            self.server.stdin.flush()
            reply = self.server.stdout.readline()
            if not reply:
                raise RuntimeError("warm python server died")
            answer = json.loads(reply)
            if answer.get("timed_out"):
                raise subprocess.TimeoutExpired([script], timeout)
            with open(out, encoding="utf-8", errors="replace") as handle:
                stdout = handle.read()
            with open(err, encoding="utf-8", errors="replace") as handle:
                stderr = handle.read()
            return Completed(answer["returncode"], stdout, stderr)

    def close(self):
        if self.server.poll() is None:
            self.server.stdin.close()
            try:
                self.server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.server.pid, signal.SIGKILL)
                self.server.wait()


def _child(request):
    """In the forked child: become the script's process and run it as __main__; never returns."""
    os.setpgid(0, 0)  # its own group: a timeout ends the script and whatever it started
    code = 1
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 1)
        os.dup2(os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 2)
        os.chdir(request["cwd"])
        sys.argv = [request["script"]] + request["args"]
        sys.path[0] = os.path.dirname(request["script"])
        import runpy
        runpy.run_path(request["script"], run_name="__main__")
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if not isinstance(stop.code, int) and stop.code is not None:
            print(stop.code, file=sys.stderr)
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _wait(pid, timeout):
    """The child's exit code (negative for a signal), or None when it outlived `timeout` (then killed)."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            return None
        time.sleep(0.02)


def _serve(preload):
    import importlib
    import warnings
    filters = list(warnings.filters)  # what the command line (PYTHONWARNINGS) set
    for name in preload:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    warnings.filters[:] = filters  # each script starts with them, not with what an import added
    reply = sys.stdout
    print("ready", file=reply, flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(request)
        returncode = _wait(pid, request["timeout"])
        answer = {"returncode": returncode, "timed_out": returncode is None}
        print(json.dumps(answer), file=reply, flush=True)


if __name__ == "__main__" and sys.argv[1:2] == ["--serve"]:
    sys.dont_write_bytecode = True
    _serve([name for name in sys.argv[2].split(",") if name])
