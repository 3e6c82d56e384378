"""One checker run: choose the interpreter, probe it in the sandboxed child, assemble the facts,
apply the rules and gates, render."""

import errno
import sys

from diagnostics_core.cli import UsageError
from diagnostics_core.markdown import private_names, stderr_line
from diagnostics_core.text import describe_exception, quote
from .assemble import assemble_facts
from .budget import GRACE_S, stage_bounds

from .interpreter import choose_interpreter, finish_interpreter_facts, refuse_script_runner, resolve_python
from .probe import child_steps, run_child_attempt, run_import_probe, step_data
from .render import output, redactions, render, stderr_summary
from .rules import diagnose, evaluate_gates
from .static_facts import StaticStageTimeout, gather_static_facts_bounded
from .findings import TOOL



class StaticStageFailed(Exception):
    """The static stage gave no facts (it ran past its deadline, crashed, or its child said nothing)."""

    def __init__(self, evidence):
        Exception.__init__(self, evidence.get("how"))
        self.evidence = evidence


class Terminal(object):
    """The checker's stderr: one line per message, controls escaped, and in markdown mode (a report
    to paste in public) user, home and host names redacted like the report itself."""

    def __init__(self, options):
        self.redact = options.format == "markdown" and not options.no_redact
        self.names = private_names() if self.redact else ()

    def line(self, text):
        stderr_line(text, self.names)

    def say(self, text):
        self.line("check_sampling_backends: %s" % text)

    def summary(self, document):
        if self.redact:
            self.names = redactions(document)
        for line in stderr_summary(document, self.names):
            self.line(line)


def pick_interpreter(options, terminal, bounds):
    """-> (python, interpreter facts, its answer); UsageError when --python or the active environment is unusable."""
    requested = answer = None
    if options.python is not None:
        requested, answer = resolve_python(options.python, bounds)
    python, choice = choose_interpreter(requested)
    if choice["chosen_by"] == "active-environment":
        source = choice["active_environment"]["source"]
        python, answer = resolve_python(python, bounds, source=source)
        terminal.say("probing %s, the active environment (%s), not %s%s; --python chooses another" % (
            python, "its bin is on PATH" if source == "PATH" else "$" + source, sys.executable,
            " (a throwaway %s environment)" % choice["running_ephemeral"] if choice["running_ephemeral"] else ""))
    return python, finish_interpreter_facts(choice, answer), answer


def static_here(options, bounds):
    """--static-only in this interpreter: the stage on a bounded thread, no imports (psutil is the probe's)."""
    try:
        return gather_static_facts_bounded(bounds.static_here_deadline, import_psutil=False, grace=GRACE_S)
    except StaticStageTimeout as error:
        raise StaticStageFailed({"how": "deadline", "interpreter": sys.executable, "timeout_s": options.timeout,
                                 "section": error.section, "message": str(error)})


def run_static_in(python, options, bounds, answer, choice):
    """Static facts of another interpreter: the child runs only the static step, bounded like the probe."""
    skip = dict((step, "static-only") for step in child_steps({}) if step != "static")
    attempt = run_child_attempt(python, {"skip": skip, "block": [], "static_deadline": bounds.static_child_deadline},
                                bounds.deadline, options.timeout, set())
    record = attempt.results.get("static")
    if record and record.get("status") == "ok":
        return record["data"]
    if not attempt.results and attempt.current is None and answer is not None:
        raise refuse_script_runner(python, answer, choice_source(choice))
    raise StaticStageFailed(static_failure(python, options, attempt.results, attempt.current, attempt.killed_for,
                                           attempt.returncode, attempt.stderr_tail))


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


def static_of_probe(python, options, probe, answer, choice):
    static = step_data(probe["results"], "static")
    if static is not None:
        return static
    if not probe["results"] and answer is not None:
        raise refuse_script_runner(python, answer, choice_source(choice))
    record = probe["results"].get("static") or {}
    last = probe["attempts"][-1] if probe["attempts"] else {}
    raise StaticStageFailed(static_failure(python, options, probe["results"], last.get("culprit"),
                                           last.get("killed_for") or (record.get("status") if record.get(
                                               "status") in ("deadline", "hung") else None),
                                           last.get("returncode"), record.get("stderr_tail")
                                           or last.get("stderr_tail")))


def choice_source(choice):
    """None for --python or the running interpreter, else where the active environment came from."""
    if choice.get("chosen_by") != "active-environment":
        return None
    return choice["active_environment"]["source"]


def run(options, started):
    terminal = Terminal(options)
    bounds = stage_bounds(options.timeout, started)
    try:
        try:
            python, choice, answer = pick_interpreter(options, terminal, bounds)
        except UsageError as error:
            return refuse(error, options, started, terminal)
        document, exit_code = probe_and_diagnose(python, choice, answer, options, started, bounds, terminal)
    except UsageError as error:
        return refuse(error, options, started, terminal)
    except OSError as error:
        if error.errno not in (errno.EMFILE, errno.ENFILE):
            raise
        return refuse(open_files_refusal(error), options, started, terminal)
    output(document, options)
    terminal.summary(document)
    return exit_code


def probe_and_diagnose(python, choice, answer, options, started, bounds, terminal):
    facts, findings, gates = {}, [], {}
    try:
        probe = None
        if options.static_only:
            if python == sys.executable:
                static = static_here(options, bounds)
            else:
                static = run_static_in(python, options, bounds, answer, choice)
        else:
            # Said once the probe script runs: an interpreter that cannot run it is refused on one line.
            probe = run_import_probe(python, bounds, on_started=lambda: terminal.say(
                "probing %s (deadline %ds)..." % (python, options.timeout)))
            static = static_of_probe(python, options, probe, answer, choice)
        facts = assemble_facts(static, probe, python, options)
        facts["interpreter"] = choice
        if choice.get("probed_is_active") is False:
            terminal.say("note: %s is not the active environment %s (finding interpreter-not-active)"
                         % (python, choice["active_environment"]["prefix"]))
        findings = diagnose(facts, options)
        gates = evaluate_gates(facts, options)
        return render(facts, findings, gates, options, started)
    except StaticStageFailed as failure:
        return static_stage_document(failure.evidence, choice, options, started)
    except (UsageError, OSError) as error:
        if isinstance(error, UsageError) or error.errno in (errno.EMFILE, errno.ENFILE):
            raise
        return internal_error_document(error, facts, findings, gates, options, started)
    except Exception as error:  # still one JSON document, saying what broke
        return internal_error_document(error, facts, findings, gates, options, started)


def internal_error_document(error, facts, findings, gates, options, started):
    from diagnostics_core.cli import internal_error
    return render(facts, findings, gates, options, started, internal_error=internal_error(error, describe_exception))


def static_stage_document(evidence, choice, options, started):
    """No static facts, so no rule can run: one finding saying why, and every gate asked failed."""
    evidence = dict(evidence, what_is_missing="every fact: the rules need the static stage's facts")
    again = ["--timeout", "%d" % stage_bounds(options.timeout, 0).retry_timeout_s]
    if options.static_only:
        again.append("--static-only")
    if options.python is not None:
        again += ["--python", quote(options.python)]
    fix = ("%s  # not run here; if it still does not finish, a file system it reads is hung: "
           "ls -l the paths in the evidence" % TOOL.command(*again))
    finding = TOOL.finding("static-stage-incomplete", evidence, fix=fix)
    gates = {}
    for flag, gate in (("require_neighbor_backend", "neighbor_backend"), ("require_cuda", "cuda"),
                       ("require_distributed", "distributed")):
        if getattr(options, flag, None):
            gates[gate] = {"passed": False, "reason": "not decided: the static stage gave no facts"}
    return render({"interpreter": choice}, [finding], gates, options, started)


def open_files_refusal(error):
    """RLIMIT_NOFILE too low to start the probe: a usage-style refusal naming the limit and the fix."""
    soft = hard = None
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        pass
    wanted = 1024 if hard is None or hard < 0 or hard >= 1024 else hard
    return UsageError("check_sampling_backends.py: error: too many open files (the open-files limit, "
                      "ulimit -n, is %s): the checker needs a few dozen to run its probe; run it after "
                      "ulimit -n %d" % (soft, wanted), "open-files-limit",
                      {"RLIMIT_NOFILE": {"soft": soft, "hard": hard}, "error": describe_exception(error)},
                      fix="ulimit -n %d && %s" % (wanted, TOOL.command(*[quote(w) for w in sys.argv[1:]])))


def refuse(error, options, started, terminal):
    document, exit_code = render({}, [error.finding(TOOL)], {}, options, started, usage_error=True)
    output(document, options)  # first: a stdout that cannot take it ends the run with its own one line
    terminal.line(error.line)
    return exit_code
