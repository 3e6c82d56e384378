"""Gathering one checker run's facts (the Spec's gather): choose the interpreter, probe it in the sandboxed
child (or read its static facts alone), assemble. Every bound comes from the run (the Spec's stage table)."""

import errno
import sys

from diagnostics_core.cli import UsageError
from diagnostics_core.text import describe_exception
from .assemble import assemble_facts
from .findings import TOOL
from .interpreter import choose_interpreter, finish_interpreter_facts, refuse_script_runner, resolve_python
from .probe import child_steps, run_child_attempt, run_import_probe, step_data
from .static_facts import StaticStageTimeout, gather_static_facts_bounded


class StaticStageFailed(Exception):
    """The static stage gave no facts (it ran past its deadline, crashed, or its child said nothing)."""

    def __init__(self, evidence):
        Exception.__init__(self, evidence.get("how"))
        self.evidence = evidence


def gather(run):
    """Fill run.facts: the interpreter choice first (an interrupted run still says which one), then every
    section, or "static_failure" when the static stage gave nothing the rules could read."""
    try:
        python, choice, answer = pick_interpreter(run)
        run.facts["interpreter"] = choice
        try:
            static, probe = probe_interpreter(run, python, answer, choice)
        except StaticStageFailed as failure:
            run.facts["static_failure"] = dict(failure.evidence,
                                               what_is_missing="every fact: the rules need the static stage's facts")
            return
        run.facts.update(assemble_facts(static, probe, python))
        run.facts["interpreter"] = choice
        if choice.get("probed_is_active") is False:
            run.say("note: %s is not the active environment %s (finding interpreter-not-active)"
                    % (python, choice["active_environment"]["prefix"]))
    except OSError as error:
        if error.errno not in (errno.EMFILE, errno.ENFILE):
            raise
        raise open_files_refusal(error, run.argv)


def pick_interpreter(run):
    """-> (python, interpreter facts, its answer); UsageError when --python or the active environment is unusable."""
    requested = answer = None
    limit = run.bounds["question"]
    if run.options.python is not None:
        requested, answer = resolve_python(run.options.python, limit)
    python, choice = choose_interpreter(requested)
    if choice["chosen_by"] == "active-environment":
        source = choice["active_environment"]["source"]
        python, answer = resolve_python(python, limit, source=source)
        run.say("probing %s, the active environment (%s), not %s%s; --python chooses another" % (
            python, "its bin is on PATH" if source == "PATH" else "$" + source, sys.executable,
            " (a throwaway %s environment)" % choice["running_ephemeral"] if choice["running_ephemeral"] else ""))
    return python, finish_interpreter_facts(choice, answer), answer


def probe_interpreter(run, python, answer, choice):
    """-> (static facts, probe record or None for --static-only); StaticStageFailed when there are no facts."""
    if run.options.static_only:
        return static_facts_of(run, python, answer, choice), None
    # Said once the probe script runs: an interpreter that cannot run it is refused on one line.
    probe = run_import_probe(python, run, on_started=lambda: run.say(
        "probing %s (deadline %ds)..." % (python, run.options.timeout)))
    static = step_data(probe["results"], "static")
    if static is not None:
        return static, probe
    if not probe["results"] and answer is not None:
        raise refuse_script_runner(python, answer, choice_source(choice))
    record = probe["results"].get("static") or {}
    last = probe["attempts"][-1] if probe["attempts"] else {}
    raise StaticStageFailed(static_failure(python, run.options, probe["results"], last.get("culprit"),
                                           last.get("killed_for") or (record.get("status") if record.get(
                                               "status") in ("deadline", "hung") else None),
                                           last.get("returncode"), record.get("stderr_tail")
                                           or last.get("stderr_tail")))


def static_facts_of(run, python, answer, choice):
    """The static stage alone: in this interpreter on a bounded thread (no imports: psutil is the probe's),
    or for another interpreter in the child, running only its static step."""
    if python == sys.executable:
        try:
            return gather_static_facts_bounded(run.by("static"), run.by("static_wait"), import_psutil=False)
        except StaticStageTimeout as error:
            raise StaticStageFailed({"how": "deadline", "interpreter": sys.executable,
                                     "timeout_s": run.options.timeout, "section": error.section,
                                     "message": str(error)})
    skip = dict((step, "static-only") for step in child_steps({}) if step != "static")
    attempt = run_child_attempt(python, {"skip": skip, "block": [], "static_by": run.by("static"),
                                         "static_wait": run.by("static_wait")}, run.deadline,
                                run.bounds["hang"], set())
    record = attempt.results.get("static")
    if record and record.get("status") == "ok":
        return record["data"]
    if not attempt.results and attempt.current is None and answer is not None:
        raise refuse_script_runner(python, answer, choice_source(choice))
    raise StaticStageFailed(static_failure(python, run.options, attempt.results, attempt.current,
                                           attempt.killed_for, attempt.returncode, attempt.stderr_tail))


def static_failure(python, options, results, running, killed_for, returncode, stderr_tail):
    """Evidence of a static stage that gave no facts, from the child's records and how it ended."""
    record = results.get("static") or {}
    evidence = {"interpreter": python, "timeout_s": options.timeout, "step_running": running,
                "child_records": sorted(results), "returncode": returncode, "killed_for": killed_for,
                "stderr_tail": (stderr_tail or "")[-1000:]}
    if record.get("status") == "error":
        evidence["how"] = "deadline" if record["error"].get("type") == "StaticStageTimeout" else "error"
        evidence["error"] = record["error"]
    elif killed_for or record.get("status") in ("deadline", "hung"):
        evidence["how"] = "deadline"
    else:
        evidence["how"] = "crashed" if returncode else "no-answer"
    return evidence


def choice_source(choice):
    """None for --python or the running interpreter, else where the active environment came from."""
    if choice.get("chosen_by") != "active-environment":
        return None
    return choice["active_environment"]["source"]


def installed_torch(run):
    """--wheels without a value: (version with its variant, Python version) of the torch the checker would
    probe, read from its torch/version.py; UsageError if there is none."""
    from diagnostics_core.wheels import parse_version
    from .parsing import cuda_variant
    run.plan_time()  # a metadata command answers before the runner plans the run's time
    python, choice, answer = pick_interpreter(run)
    try:
        static = static_facts_of(run, python, answer, choice)
    except StaticStageFailed as failure:
        static = {"torch_build": {}, "failure": failure.evidence}
    build = static.get("torch_build") or {}
    if not build.get("version"):
        raise UsageError("check_sampling_backends.py: error: --wheels without a value needs torch in %s; "
                         "name a build instead" % python, "usage-error",
                         {"python": python, "message": "torch is not installed there"
                          if "failure" not in static else "its static facts could not be read",
                          "static_failure": static.get("failure")},
                         fix=TOOL.command("--wheels", "2.14.1+cu126"))
    variant = "rocm" if build.get("hip") else cuda_variant(build.get("cuda"))
    return "%s+%s" % (build["version"].split("+")[0], variant), parse_version(static["python"]["version"])


def open_files_refusal(error, argv):
    """RLIMIT_NOFILE too low to start the probe: a usage-style refusal naming both limits and the fix that works
    under the hard limit (a soft limit cannot be raised above it)."""
    from diagnostics_core import command
    from diagnostics_core.container import get_open_files
    limits = get_open_files() or {"soft": None, "hard": None}
    soft, hard = limits["soft"], limits["hard"]
    wanted = 1024 if hard is None or hard >= 1024 else hard
    note = "" if wanted == 1024 else ("  # the hard limit (ulimit -Hn) is %d: only root raises it (in a container: "
                                      "docker run --ulimit nofile=SOFT:HARD)" % hard)
    return UsageError("check_sampling_backends.py: error: too many open files (the open-files limit, "
                      "ulimit -n, is %s; the hard limit, ulimit -Hn, is %s): the checker needs a few dozen to "
                      "run its probe; run it after ulimit -Sn %d" % (soft, "unlimited" if hard is None else hard,
                                                                    wanted), "open-files-limit",
                      {"RLIMIT_NOFILE": limits, "error": describe_exception(error)},
                      fix="%s && %s%s" % (command.line("ulimit", "-Sn", str(wanted)), TOOL.command(*argv), note))


def interrupted_fix(run, evidence):
    """The interrupted finding's fix: the same command again, left to finish (or with a shorter --timeout)."""
    return "%s  # let it finish; --timeout bounds the whole run" % TOOL.command(*run.argv)
