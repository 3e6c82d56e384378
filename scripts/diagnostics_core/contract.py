"""The report contract: finding records, the ok/status/exit verdict and the document envelope.

Every tool prints one JSON document whose first keys are, in order: schema_version, ok, status,
exit_code, findings, gates, then the tool's own section naming it ("checker" or "tool"), then its facts.
"""

import os

SCRIPTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the skill's scripts/ folder

EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED_BASE = 128  # + the signal number, as shells report a process a signal ended
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
DOCS = "references/troubleshooting.md"

EXIT_CODES_HELP = """\
ok and exit codes (the same in every tool of this skill):
  "ok" is true when there is no finding of severity error, no failed gate and
  no internal error.
  0  ran; every gate applied passed
  1  a gate failed (status gate-failed; see "gates" and the error findings)
  2  usage error: one line on stderr, and a JSON document whose finding says
     what to run instead
  3  internal error in the tool; the JSON says so in "findings"
"""

# Appended to every tool's --help by cli.make_parser: the one text of these two cases.
EXIT_OUTPUT_HELP = """\
when the document cannot be written, or the run is stopped (every tool):
  3    stdout is closed, full or failing: the result cannot be delivered, so
       no verdict code is claimed; one stderr line says so, nothing else is
       printed (a closed stderr changes nothing else)
  130  interrupted by SIGINT (Ctrl-C), 143 by SIGTERM: the tool ends its
       child processes, removes their temporary files and prints one JSON
       document, status "interrupted", with what it had gathered so far
"""


def finding_table_of(package):
    """The ids of the tool's own registry, <package>/findings.json (without the shared ones)."""
    import json
    from .fast import package_file
    return json.loads(package_file(package, "findings.json").decode("utf-8"))


def registered_findings(package):
    """The tool's finding table, id -> (severity, title): its registry <package>/findings.json and the
    findings every tool shares (diagnostics_core/findings.json: the user's environment), read as data (in a
    zipapp too). The metadata commands that need no table are answered before a tool imports its table
    (diagnostics_core/fast.py)."""
    from .fast import finding_table
    return dict((finding_id, tuple(entry)) for finding_id, entry in finding_table(package).items())


class Tool(object):
    """What one tool declares: its name, versions and finding table. The rest is shared."""

    def __init__(self, name, version, schema_version, findings, usage_id, internal_id, meta_key="checker",
                 interrupted_id=None):
        self.name = name                      # the script's file name without .py
        self.version = version
        self.schema_version = schema_version
        self.findings = findings              # id -> (severity, title)
        self.usage_id = usage_id              # the finding of a refused command line
        self.internal_id = internal_id        # the finding of a tool that broke
        self.meta_key = meta_key              # the key of the section that names the tool
        self.interrupted_id = interrupted_id  # the finding of a run a signal stopped (long-running tools)

    @classmethod
    def from_registry(cls, package, name, version, schema_version, meta_key="tool"):
        """The tool whose finding table is its package's registry (<package>/findings.json), which names its own
        refused-command-line, broken-tool and stopped-run findings: the one id ending in usage-error,
        internal-error and interrupted (MAINTAINERS.md, adding a tool)."""
        own = finding_table_of(package)

        def ending(suffix):
            [found] = [finding_id for finding_id in own if finding_id.endswith(suffix)]
            return found
        return cls(name, version, schema_version, registered_findings(package), usage_id=ending("usage-error"),
                   internal_id=ending("internal-error"), meta_key=meta_key, interrupted_id=ending("interrupted"))

    def finding(self, finding_id, evidence, fix=None, severity=None, title=None):
        default_severity, default_title = self.findings[finding_id]
        return {"id": finding_id, "severity": severity or default_severity, "title": title or default_title,
                "evidence": evidence, "fix": fix, "docs": "%s#%s" % (DOCS, finding_id)}

    def list_findings(self):
        return [{"id": fid, "severity": severity, "title": title, "docs": "%s#%s" % (DOCS, fid)}
                for fid, (severity, title) in sorted(self.findings.items())]

    def command(self, *words):
        """How to run this tool from any folder: the absolute path of its script, then `words`, each one
        shell word (diagnostics_core.command: pass them unquoted)."""
        import sys
        if not os.path.isfile(os.path.join(SCRIPTS, self.name + ".py")):  # a zipapp or a console script
            from . import command
            return command.line("python3", os.path.abspath(sys.argv[0]), *words)
        return script_command(self.name + ".py", *words)

    def document(self, findings, gates, meta, usage_error=False, internal_error=None, static_only=False,
                 interrupted=None, interrupted_fix=None):
        """-> (the envelope with the tool's own section, exit code); the caller appends its fact sections.
        `interrupted`: the evidence of a run a signal stopped (interrupt.Interrupted.evidence())."""
        findings = sort_findings(findings)
        if internal_error is not None:
            findings.append(self.finding(self.internal_id, internal_error, fix="report it with this JSON attached"))
        if interrupted is not None:
            findings.insert(0, self.finding(self.interrupted_id, interrupted, fix=interrupted_fix or (
                "run it again and let it finish; the sections below hold what was measured before the signal")))
            return {"schema_version": self.schema_version, "ok": False, "status": "interrupted",
                    "exit_code": interrupted["exit_code"], "findings": findings, "gates": {},
                    self.meta_key: meta}, interrupted["exit_code"]
        ok, status, exit_code = verdict(findings, gates, internal_error is not None, usage_error, static_only)
        return {"schema_version": self.schema_version, "ok": ok, "status": status, "exit_code": exit_code,
                "findings": findings, "gates": gates, self.meta_key: meta}, exit_code


def script_command(script, *words, **python):
    """A script of this skill by absolute path (python= another interpreter), so the line works from any
    folder: every fix that names a script is built here. Each word is one shell word (diagnostics_core.command:
    pass them unquoted), so a path or name from the input runs nothing when the line is pasted."""
    from . import command
    interpreter = python.get("python", "python3")
    if os.path.isfile(SCRIPTS):  # run from the zipapp, which holds the checker alone: the script is not here
        return "%s  # from the skill's folder; %s does not hold %s" % (
            command.line(interpreter, "scripts/" + script, *words), command.word(os.path.basename(SCRIPTS)), script)
    return command.line(interpreter, os.path.join(SCRIPTS, script), *words)


def sort_findings(findings):
    """Errors first, then warnings, then info; stable, so rule order holds within a severity."""
    return sorted(findings, key=lambda f: SEVERITY_ORDER[f["severity"]])


def verdict(findings, gates, internal_error=False, usage_error=False, static_only=False):
    """(ok, status, exit code): the one meaning of the three, shared by every tool (see --help)."""
    gate_failed = any(not g["passed"] for g in gates.values())
    has_error = any(f["severity"] == "error" for f in findings)
    ok = not has_error and not gate_failed and not internal_error and not usage_error
    if internal_error:
        return ok, "internal-error", EXIT_INTERNAL
    if usage_error:
        return ok, "usage-error", EXIT_USAGE
    if gate_failed:
        return ok, "gate-failed", EXIT_GATE_FAILED
    if has_error:
        return ok, "error", EXIT_OK
    if static_only:
        return ok, "incomplete", EXIT_OK  # nothing was imported: "ok" would claim what was not checked
    if any(f["severity"] == "warning" for f in findings):
        return ok, "warning", EXIT_OK
    return ok, "ok", EXIT_OK
