"""The one runner every tool runs on. A tool declares a Spec: its Tool (name, versions, finding registry),
its parser, the stages its time budget is split into, and four plain functions: gather (facts, in child
processes where the code is not ours), rules (facts -> findings), gates, render (facts -> the tool's
sections). This module does, once and the same way for every tool, what each used to do on its own:

- the command line: a refusal is one stderr line and one usage-error document (exit 2); --list-findings
  and --explain; the torch stack a tool needs, present and not shadowed, or a refusal naming it;
- the time budget: every stage's bound comes from the Spec's stage table here, nowhere else;
- the user's environment: warnings turned into errors and shadowed packages are findings, and the tool's
  own process and children run on Python's default warning filters;
- signals: SIGINT/SIGTERM end the children (the sandbox) and the run prints one document, status
  "interrupted", with what was gathered, and exits 128 + the signal;
- a scratch folder for children that make temporary files (loader workers, PyG's templates), removed
  however the run ends;
- the document: the envelope (diagnostics_core.contract), the tool's sections, JSON or markdown on stdout,
  one document and nothing else; an internal error is a document too (exit 3).
"""

import os
import sys
import time

from . import cli, environment
from .interrupt import Interrupted, StopSignals
from .text import describe_exception

STACK = ("torch", "torch_geometric")  # what the torch-side tools import; a stray copy of either is named


class Stage(object):
    """One stage's bound in seconds, from a flag's value: clamp(value * share + plus, floor, cap).
    `flag` names the option it derives from (the Spec's budget flag when None)."""

    def __init__(self, share=1.0, plus=0.0, floor=0.0, cap=None, flag=None):
        self.share, self.plus, self.floor, self.cap, self.flag = share, plus, floor, cap, flag

    def seconds(self, value):
        bound = value * self.share + self.plus
        if self.cap is not None:
            bound = min(bound, self.cap)
        return max(self.floor, bound)


class Spec(object):
    """What one tool declares; the runner does the rest.

    tool        the Tool (contract.Tool): names, versions, registry, usage/internal/interrupted ids
    parser      () -> the argparse parser (cli.make_parser)
    gather      (run) -> None: fills run.facts; the long part, in sandboxed children where code is not ours
    rules       [(facts, options) -> [findings]], applied in order
    gates       (facts, findings, options) -> {name: {"passed": bool, ...}}
    render      (document, facts, options) -> None: adds the tool's sections after the envelope
    check       (parser, options) -> None: refusals that need several flags (parser.error or UsageError)
    needs       packages this process imports beyond the standard library (torch, torch_geometric and
                more), or a function of the options giving them (a tool that imports torch only for some
                runs); None for a stdlib-only tool. Missing: `stack_missing_id`; shadowed: refused.
    budget      the option holding the run's seconds; stages: {name: Stage} derived from it
    meta        (facts, options) -> keys for the tool's own section beside name, version, argv, elapsed_s
    markdown    (document, options) -> text, for --format markdown
    summary     (document, run) -> None: stderr lines after the document (the checker's summary)
    interrupted (run, evidence) -> fix text for the interrupted finding (default: run it again)
    answers     [(run) -> exit code or None]: commands that print something other than the tool's report
                (the checker's --wheels), tried after --list-findings and --explain, before `check`
    watch       packages whose stray copies are named as a warning when the tool does not need them
    """

    def __init__(self, tool, parser, gather, render, rules=(), gates=None, check=None, needs=None,
                 stack_missing_id=None, budget=None, stages=None, meta=None, markdown=None, summary=None,
                 interrupted=None, answers=(), watch=STACK):
        self.tool, self.parser, self.gather, self.render = tool, parser, gather, render
        self.rules, self.gates, self.check = tuple(rules), gates, check
        self.needs, self.stack_missing_id = needs, stack_missing_id
        self.budget, self.stages = budget, dict(stages or {})
        self.meta, self.markdown, self.summary, self.interrupted = meta, markdown, summary, interrupted
        self.answers = tuple(answers)
        self.watch = tuple(watch)


def error_gate(name):
    """The gate most tools apply: `name` passes when no finding is an error."""
    def gates(facts, findings, options):
        return {name: {"passed": not any(f["severity"] == "error" for f in findings)}}
    return gates


SCRATCH_PREFIX = "sd-"
# A loader worker's socket is <scratch>/pymp-XXXXXXXX/listener-XXXXXXXX, and a Unix socket path holds at most
# 107 bytes (Linux): a longer temp dir makes the worker fail in a thread while the loader waits forever.
SCRATCH_BASE_MAX = 107 - len("/pymp-XXXXXXXX/listener-XXXXXXXX") - len("/" + SCRATCH_PREFIX + "XXXXXXXX")


class Run(object):
    """One run of a tool: its options, the facts gathered so far (an interrupted or failed run still
    renders them), findings, gates, every stage's bound, and where the run stands."""

    def __init__(self, spec, argv, started):
        self.spec, self.argv, self.started = spec, argv, started
        self.options = None
        self.facts, self.findings, self.gates = {}, [], {}
        self.bounds, self.deadline = {}, None
        self.environment = {}
        self.usage = self.internal = self.stopped = None
        self.needs = ()  # the packages this run imports (the Spec's needs, for its options)
        self.accepted = False  # the command line and the environment passed: what follows is the run itself
        self.redactions = ()
        self._scratch = None
        self._temp_before = None

    # --- time: every bound is computed here --------------------------------------------------------
    def plan_time(self):
        spec, options = self.spec, self.options
        if spec.budget is not None:
            self.deadline = self.started + float(getattr(options, spec.budget))
        for name, stage in spec.stages.items():
            self.bounds[name] = stage.seconds(float(getattr(options, stage.flag or spec.budget)))
        options.bounds = self.bounds  # children get their options as JSON, the bounds with them

    def by(self, stage):
        """The absolute time (time.time()) by which `stage` ends, counted from the run's start."""
        return self.started + self.bounds[stage]

    def left(self, reserve=0.0):
        """Seconds left of the run's budget, keeping `reserve` for what follows."""
        if self.deadline is None:
            return float("inf")
        return self.deadline - time.time() - reserve

    # --- children's temporary files ----------------------------------------------------------------
    def scratch(self):
        """A folder of this run's own under the user's temp dir, made the temp dir of every child started
        from now on (TMPDIR): what loader workers, multiprocessing (pymp-*) and PyG's rendered templates
        write there goes with it when the run ends, however it ends."""
        if self._scratch is None:
            import tempfile
            from .sandbox import existing_temp_dir
            self._temp_before = os.environ.get("TMPDIR")
            base = existing_temp_dir(os.environ)
            if len(base) > SCRATCH_BASE_MAX and os.path.isdir("/tmp"):
                base = "/tmp"  # as Python 3.13's multiprocessing does: its socket paths must stay short
            self._scratch = tempfile.mkdtemp(prefix=SCRATCH_PREFIX, dir=base)
            os.environ["TMPDIR"] = self._scratch
        return self._scratch

    def remove_scratch(self):
        if self._scratch is None:
            return
        import shutil
        shutil.rmtree(self._scratch, ignore_errors=True)
        if self._temp_before is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = self._temp_before
        self._scratch = None

    # --- stderr ------------------------------------------------------------------------------------
    def say(self, text):
        """One progress line on stderr, prefixed with the tool's name; names redacted when the markdown is."""
        from .markdown import stderr_line
        stderr_line("%s: %s" % (self.spec.tool.name, text), self.redactions)


def main(spec, argv=None):
    """Run the tool `spec` declares on `argv`; -> its exit code, after printing its one document."""
    from .text import guard_standard_streams
    guard_standard_streams()
    argv = list(sys.argv[1:] if argv is None else argv)
    run = Run(spec, argv, time.time())
    run.environment["warnings"] = environment.contain_warnings()
    stops = StopSignals()  # from here on, SIGINT/SIGTERM raise Interrupted in this thread
    try:
        try:
            answered = prepare(run)
            if answered is not None:
                return answered
            run.accepted = True
            spec.gather(run)
            for rule in spec.rules:
                run.findings.extend(rule(run.facts, run.options))
            if spec.gates is not None:
                run.gates = spec.gates(run.facts, run.findings, run.options)
        except cli.UsageError as error:
            run.usage = error
        except Interrupted as stop:
            stops.hold()  # a second signal must not cut the document short
            run.stopped = stop
            for key, value in (stop.facts or {}).items():  # what a sandboxed child published before the end
                run.facts.setdefault(key, value)
        except Exception as error:  # still one document, saying what broke
            run.internal = cli.internal_error(error, describe_exception)
        finally:
            stops.hold()
            run.remove_scratch()
        document, exit_code = compose(run)
        emit(document, run)
        if run.usage is not None:
            from .markdown import stderr_line
            stderr_line(run.usage.line, run.redactions)
        elif spec.summary is not None:
            spec.summary(document, run)
        return exit_code
    finally:
        stops.release()


def prepare(run):
    """Parse the command line and check what the run needs; -> an exit code when a metadata command
    answered, else None (UsageError when the line or the environment is refused)."""
    spec = run.spec
    parser = spec.parser()
    run.options = parser.parse_args(run.argv)
    answered = cli.metadata_command(spec.tool, run.options)
    if answered is not None:
        return answered
    if getattr(run.options, "format", None) == "markdown" and getattr(run.options, "no_redact", True) is False:
        # a tool whose markdown hides names declares --no-redact (cli.make_parser's `redacted`): its stderr
        # lines hide them too
        from .markdown import private_names
        run.redactions = private_names()
    for answer in spec.answers:
        answered = answer(run)
        if answered is not None:
            return answered
    if spec.check is not None:
        spec.check(parser, run.options)
    refuse_stack(run)
    if spec.budget is not None or spec.stages:
        run.plan_time()
    return None


def refuse_stack(run):
    """The packages the tool imports, present and not shadowed by a stray copy; a stray copy of a package it
    does not import is only named (a warning), since the user's own job would import it."""
    from . import calls
    spec = run.spec
    needs = tuple((spec.needs(run.options) if callable(spec.needs) else spec.needs) or ())
    run.needs = needs
    found = environment.shadowed(tuple(dict.fromkeys(needs + spec.watch)))
    run.environment["shadowed"] = found
    blocking = [entry for entry in found if entry["package"] in needs]
    if blocking:
        raise cli.UsageError("%s.py: error: %s (environment-package-shadowed)" % (
            spec.tool.name, shadow_line(blocking[0])), "environment-package-shadowed",
            shadow_evidence(blocking), fix=shadow_fix(blocking))
    if needs:
        calls.require_torch_stack(spec.tool, spec.stack_missing_id,
                                  extra=tuple(name for name in needs if name not in STACK))


def shadow_line(entry):
    return "%s is imported from %s (%s), not the installed copy" % (
        entry["package"], entry["imported_from"], entry["origin"])


def shadow_evidence(found):
    return {"shadowed": found, "PYTHONPATH": os.environ.get("PYTHONPATH"), "cwd": os.getcwd(),
            "interpreter": sys.executable}


def shadow_fix(found):
    """Take the stray copies off the path: the PYTHONPATH without their entries, or another working folder."""
    from . import command
    from_path = [entry["path_entry"] for entry in found if entry["origin"] == "PYTHONPATH"]
    fixes = []
    if from_path:
        rest = environment.python_path_without(from_path)
        fixes.append(command.line("export", "PYTHONPATH=" + os.pathsep.join(rest)) if rest
                     else command.line("unset", "PYTHONPATH"))
    if any(entry["origin"] == "the working folder" for entry in found):
        fixes.append("run it from a folder without a %s/ of its own (cd elsewhere; the folder shadows the installed "
                     "package)" % "/, ".join(sorted(set(e["package"] for e in found))))
    return "; ".join(fixes) + "  # then run the same command again"


def environment_findings(run):
    """The user's environment as findings: warnings made errors (the run went on with Python's defaults),
    stray copies of packages the tool does not import."""
    tool, found = run.spec.tool, []
    warnings = run.environment.get("warnings") or {}
    if warnings.get("as_errors"):
        from . import command
        fix = "unset PYTHONWARNINGS" if warnings.get("PYTHONWARNINGS") else \
            "drop -W error from the python command line"
        found.append(tool.finding("environment-warnings-as-errors", dict(warnings, note=(
            "this run reset the warning filters to Python's defaults, in itself and its children; a training "
            "job under these settings stops at the first warning torch or PyG emits")),
            fix="%s  # or keep it for your own code only: %s" % (
                fix, command.line("export", "PYTHONWARNINGS=error::UserWarning:__main__"))))
    stray = [entry for entry in run.environment.get("shadowed") or () if entry["package"] not in run.needs]
    if stray:
        found.append(tool.finding("environment-package-shadowed", shadow_evidence(stray), fix=shadow_fix(stray),
                                  severity="warning"))
    return found


def compose(run):
    """-> (the document, exit code): the envelope, the tool's section and its fact sections."""
    spec, tool = run.spec, run.spec.tool
    findings = [run.usage.finding(tool)] if run.usage is not None else list(run.findings)
    interrupted = None
    if run.accepted:  # a refused command line says only that; a refused input also names the environment
        findings += environment_findings(run)
    if run.stopped is not None:
        interrupted = dict(run.stopped.evidence(), elapsed_s=round(time.time() - run.started, 3))
    meta = {"name": tool.name + ".py", "version": tool.version, "argv": run.argv,
            "elapsed_s": round(time.time() - run.started, 3)}
    if spec.meta is not None and run.options is not None:
        meta.update(spec.meta(run.facts, run.options))
    fix = spec.interrupted(run, interrupted) if interrupted is not None and spec.interrupted else None
    document, exit_code = tool.document(findings, {} if run.usage or run.internal else run.gates, meta,
                                        usage_error=run.usage is not None, internal_error=run.internal,
                                        interrupted=interrupted, interrupted_fix=fix,
                                        static_only=bool(getattr(run.options, "static_only", False)))
    spec.render(document, run.facts, run.options)
    return document, exit_code


def emit(document, run):
    from .text import write_json, write_text
    options = run.options
    if getattr(options, "format", "json") == "markdown" and run.spec.markdown is not None:
        write_text(run.spec.markdown(document, options))  # a tool that hides names in it does so itself
    else:
        write_json(document, getattr(options, "pretty", False))
