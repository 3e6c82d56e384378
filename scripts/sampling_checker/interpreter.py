"""Which interpreter is probed: --python, the active environment, or this one; and what it says of itself."""

import os
import re
import sys
import time

from diagnostics_core.cli import UsageError
from diagnostics_core.command import Raw
from diagnostics_core.sandbox import child_environment, run_sandboxed
from diagnostics_core.wheels import parse_version
from .findings import MIN_PYTHON, checker_command
from .static_facts import ephemeral_kind


# Runs under any Python, 2.7 included, and answers one record in run_sandboxed's format.
INTERPRETER_QUESTION = (
    "import json, os, platform, sys\n"
    "pip = None\n"
    "try:\n"
    "    import importlib.util\n"
    "    pip = importlib.util.find_spec('pip') is not None\n"
    "except Exception:\n"
    "    pass\n"
    "sys.stdout.write(json.dumps({'pid': os.getpid(), 'interpreter': {'version': list(sys.version_info[:3]), "
    "'implementation': platform.python_implementation(), 'executable': sys.executable, "
    "'prefix': sys.prefix, 'pip': pip}}) + '\\n')\n")


def looks_like_python(path):
    """Only files named like an interpreter are ever run: `bash -c CODE` would run CODE as shell."""
    names = (os.path.basename(path), os.path.basename(os.path.realpath(path)))
    return any(re.match(r"^(python|pypy)[\w.\-]*(\.exe)?$", name, re.I) for name in names)


def ask_interpreter(path, limit):
    """What `path` is: {"is_python", "version", "implementation", "prefix", "pip"} or a reason it is not Python.

    The question runs in the sandbox like the probe: a site-packages hook of
    that interpreter may hang, crash or leave processes behind.
    """
    if not looks_like_python(path):
        return {"is_python": False, "reason": "its name is not python*/pypy*, so it was not run"}
    answers = []
    try:
        ended = run_sandboxed([path, "-c", INTERPRETER_QUESTION], child_environment(), time.time() + limit,
                              lambda stamp, record: answers.append(record.get("interpreter")))
    except OSError as error:
        return {"is_python": False, "reason": "it cannot be run: %s" % error}
    answer = next((a for a in answers if isinstance(a, dict) and isinstance(a.get("version"), list)), None)
    if answer is not None:
        answer["is_python"] = True
        answer["version"] = ".".join(str(part) for part in answer["version"])
        return answer
    if ended.killed_for == "deadline":
        return {"is_python": False, "reason": "it did not answer a one-line Python program within %ds" % limit}
    return {"is_python": False, "reason": "it printed no answer to a one-line Python program (exit status %s)%s"
            % (ended.returncode, ": " + last_line(ended.stderr_tail) if ended.stderr_tail.strip() else "")}


def last_line(text, limit=200):
    """The last non-empty line of a child's stderr, one line, controls escaped and bounded (it may flood)."""
    from diagnostics_core.markdown import terminal_line
    lines = [line for line in text.splitlines() if line.strip()]
    line = terminal_line(lines[-1].strip() if lines else "")
    return line if len(line) <= limit else line[:limit - 3] + "..."


def environment_python(prefix):
    for relative in ("bin/python", "bin/python3", "Scripts/python.exe", "python.exe"):
        candidate = os.path.join(prefix, relative)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def same_path(a, b):
    return bool(a and b) and os.path.realpath(a) == os.path.realpath(b)


def active_environment(running_ephemeral):
    """The environment the user works in, as the shell says: {"source", "prefix", "python"} or None."""
    candidates = [(name, os.environ[name]) for name in ("VIRTUAL_ENV", "CONDA_PREFIX")
                  if os.environ.get(name) and not ephemeral_kind(os.environ[name])]
    if not candidates and running_ephemeral:
        # `uv run` points VIRTUAL_ENV at its own env; the user's $VIRTUAL_ENV is in uv's own environment.
        # PATH order comes second: another venv's bin may stand before the activated one.
        launcher = launcher_variable("VIRTUAL_ENV")
        if launcher and not ephemeral_kind(launcher) and not same_path(launcher, sys.prefix):
            candidates.append(("VIRTUAL_ENV", launcher))
    if not candidates and running_ephemeral:
        for entry in os.environ.get("PATH", "").split(os.pathsep):
            prefix = os.path.dirname(entry.rstrip("/\\"))
            if entry and os.path.isfile(os.path.join(prefix, "pyvenv.cfg")) and not ephemeral_kind(prefix) \
                    and not same_path(prefix, sys.prefix):
                candidates.append(("PATH", prefix))
                break
    for source, prefix in candidates:
        return {"source": source, "prefix": prefix, "python": environment_python(prefix)}
    return None


def launcher_variable(name):
    """`name` in the environment of the process that started this one (Linux /proc; None elsewhere)."""
    try:
        with open("/proc/%d/environ" % os.getppid(), "rb") as handle:
            data = handle.read(1 << 20)
    except OSError:
        return None
    key = name.encode() + b"="
    for entry in data.split(b"\0"):
        if entry.startswith(key):
            return entry[len(key):].decode("utf-8", "surrogateescape") or None
    return None


def is_environment(prefix, base_prefix):
    """A venv or a conda env, as opposed to a base/system Python."""
    return not same_path(prefix, base_prefix) or os.path.isdir(os.path.join(prefix, "conda-meta"))


def choose_interpreter(requested):
    """-> (python to probe, facts about the choice). `requested` is --python or None."""
    running_ephemeral = ephemeral_kind(sys.prefix)
    active = active_environment(running_ephemeral)
    running_is_active = bool(active) and same_path(active["prefix"], sys.prefix)
    choice = {"chosen_by": "running", "probed": sys.executable, "running": sys.executable,
              "running_ephemeral": running_ephemeral, "active_environment": active}
    if requested is not None:
        choice.update(chosen_by="--python", probed=requested)
    elif active and not running_is_active and active["python"] and (
            running_ephemeral or not is_environment(sys.prefix, getattr(sys, "base_prefix", sys.prefix))):
        choice.update(chosen_by="active-environment", probed=active["python"])
    return choice["probed"], choice


def finish_interpreter_facts(choice, answer):
    """Add what the probed interpreter said about itself (None when it is the running one)."""
    prefix = (answer or {}).get("prefix") or (sys.prefix if choice["probed"] == sys.executable else None)
    active = choice["active_environment"]
    choice["probed_prefix"] = prefix
    choice["probed_ephemeral"] = ephemeral_kind(prefix) if prefix else None
    choice["probed_is_active"] = same_path(active["prefix"], prefix) if active and prefix else None
    return choice


def describe_source(path, source):
    """How the user chose this interpreter, in the words of an error line."""
    if source is None:
        return "--python %s" % path
    return "the active environment's interpreter %s (%s)" % (
        path, "its bin is on PATH" if source == "PATH" else "from $" + source)


# The shell finds python3 where the fix runs: the tool's own command substitution, never the user's text.
PYTHON3_ON_PATH = Raw("$(command -v python3)")
# The one venv path every fix and README command uses; ~ expands where the fix runs.
VENV_PYTHON = Raw("~/.venvs/scalable-distributed/bin/python")


def unusable_fix(source):
    if source is None:
        return checker_command("--python", "/path/to/venv/bin/python") + "  # a CPython 3.8+"
    return checker_command("--python", PYTHON3_ON_PATH) + "  # or deactivate the environment (%s)" % (
        "deactivate" if source == "VIRTUAL_ENV" else "conda deactivate" if source == "CONDA_PREFIX"
        else "take its bin off PATH")


def resolve_python(path, limit, source=None):
    """An interpreter to probe -> (absolute path, what it said about itself); UsageError unless CPython 3.8+.

    `limit`: seconds the interpreter has to answer. `source` is None for --python, else where the active
    environment came from ("VIRTUAL_ENV", "CONDA_PREFIX", "PATH"): the error names what the user did.
    """
    import shutil
    resolved = path if os.sep in path else shutil.which(path)
    chosen = describe_source(path, source)
    if not resolved or not os.path.isfile(resolved) or not os.access(resolved, os.X_OK):
        raise UsageError("check_sampling_backends.py: error: %s is not an executable file" % chosen,
                         "usage-error", {"python": path, "chosen_by": source or "--python",
                                         "message": "not an executable file"},
                         fix=checker_command("--python", PYTHON3_ON_PATH))
    resolved = os.path.abspath(resolved)
    if resolved == sys.executable:
        return resolved, None
    answer = ask_interpreter(resolved, limit)
    if not answer["is_python"]:
        raise UsageError("check_sampling_backends.py: error: %s is not a Python interpreter the checker can "
                         "probe (%s)" % (chosen, answer["reason"]), "interpreter-unsupported",
                         {"python": resolved, "chosen_by": source or "--python", "is_python": False,
                          "reason": answer["reason"]},
                         fix=unusable_fix(source))
    version = parse_version(answer["version"])
    if version[:2] < MIN_PYTHON or answer.get("implementation") != "CPython":
        raise UsageError("check_sampling_backends.py: error: %s is %s %s; the checker probes "
                         "CPython 3.8+ (torch 2.13 and PyG 2.8 need 3.10+)"
                         % (chosen, answer.get("implementation"), answer["version"]), "interpreter-unsupported",
                         {"python": resolved, "chosen_by": source or "--python", "is_python": True,
                          "version": answer["version"],
                          "implementation": answer.get("implementation"), "needs": "CPython >= 3.8"},
                         fix="make a venv with a newer Python and probe it: python3.11 -m venv "
                             "~/.venvs/scalable-distributed && " + checker_command("--python", VENV_PYTHON))
    return resolved, answer


def refuse_script_runner(python, answer, source):
    """The interpreter answered `-c` but never ran the checker's script: a wrapper (a container
    launcher, a shim) that passes only some command lines to Python. -> UsageError naming it."""
    inner = (answer or {}).get("executable")
    fix = unusable_fix(source)
    if inner and not same_path(inner, python):
        fix = checker_command("--python", inner) + "  # the interpreter it runs, if it is reachable from here"
    return UsageError("check_sampling_backends.py: error: %s answered a one-line program but did not run the "
                      "checker's probe script (a wrapper that passes only -c to Python?)"
                      % describe_source(python, source), "interpreter-unsupported",
                      {"python": python, "chosen_by": source or "--python", "is_python": True,
                       "runs_scripts": False, "reports_executable": inner},
                      fix=fix)
