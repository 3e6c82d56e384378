"""One checker run: choose the interpreter, probe it in the sandboxed child, assemble the facts,
apply the rules and gates, render."""

import json
import sys

from diagnostics_core.cli import UsageError
from diagnostics_core.markdown import terminal_line
from diagnostics_core.text import describe_exception
from .assemble import assemble_facts

from .interpreter import choose_interpreter, finish_interpreter_facts, resolve_python
from .probe import child_steps, run_child_attempt, run_import_probe, step_data
from .render import output, render, stderr_summary
from .rules import diagnose, evaluate_gates
from .static_facts import gather_static_facts
from .findings import TOOL


def say(text):
    sys.stderr.write("check_sampling_backends: %s\n" % terminal_line(text))


def pick_interpreter(options):
    """-> (python, interpreter facts); UsageError when --python or the active environment is unusable."""
    requested = answer = None
    if options.python is not None:
        requested, answer = resolve_python(options.python, options.timeout)
    python, choice = choose_interpreter(requested)
    if choice["chosen_by"] == "active-environment":
        python, answer = resolve_python(python, options.timeout)
        source = choice["active_environment"]["source"]
        say("probing %s, the active environment (%s), not %s%s; --python chooses another" % (
            python, "its bin is on PATH" if source == "PATH" else "$" + source, sys.executable,
            " (a throwaway %s environment)" % choice["running_ephemeral"] if choice["running_ephemeral"] else ""))
    return python, finish_interpreter_facts(choice, answer)


def run_static_in(python, timeout):
    """Static facts of another interpreter: the child runs only the static step."""
    import time
    skip = dict((step, "static-only") for step in child_steps({}) if step != "static")
    started = time.time()
    attempt = run_child_attempt(python, {"skip": skip, "block": []}, started + timeout, timeout, set())
    record = attempt.results.get("static")
    if not record or record.get("status") != "ok":
        raise RuntimeError("could not read static facts from %s: %s" % (python, attempt.stderr_tail[-500:]))
    return record["data"]


def run(options, started):
    facts, findings, gates = {}, [], {}
    try:
        python, choice = pick_interpreter(options)
    except UsageError as error:
        sys.stderr.write(terminal_line(error.line) + "\n")
        document, exit_code = render(facts, [error.finding(TOOL)], gates, options, started, usage_error=True)
        output(document, options)
        return exit_code
    try:
        probe = None
        if options.static_only:
            static = gather_static_facts() if python == sys.executable else run_static_in(python, options.timeout)
        else:
            say("probing %s (deadline %ds)..." % (python, options.timeout))
            probe = run_import_probe(python, options.timeout, started)
            static = step_data(probe["results"], "static")
            if static is None:
                raise RuntimeError("the child interpreter gave no static facts: %s"
                                   % json.dumps(probe["attempts"])[-1500:])
        facts = assemble_facts(static, probe, python, options)
        facts["interpreter"] = choice
        if choice.get("probed_is_active") is False:
            say("note: %s is not the active environment %s (finding interpreter-not-active)"
                % (python, choice["active_environment"]["prefix"]))
        findings = diagnose(facts, options)
        gates = evaluate_gates(facts, options)
        document, exit_code = render(facts, findings, gates, options, started)
    except Exception as error:  # still one JSON document, saying what broke
        import traceback
        document, exit_code = render(facts, findings, gates, options, started, internal_error={
            "error": describe_exception(error), "traceback": traceback.format_exc()[-3000:]})
    output(document, options)
    sys.stderr.write(terminal_line_block(stderr_summary(document)))
    return exit_code


def terminal_line_block(text):
    return "".join(terminal_line(line) + "\n" for line in text.splitlines())
