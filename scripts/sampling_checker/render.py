"""Rendering (the Spec's render, markdown and summary): the checker's sections of the document (compact by
default, --full for every fact), a markdown report for people, and a short summary on stderr."""

import os
import re

from diagnostics_core.cli import docs_path
from diagnostics_core.markdown import cell, findings_list, private_names, redact, stderr_line, terminal_line
from .schema import FACT_SECTIONS, json_schema
from .tables import DEFAULT_TIMEOUT


def render_sections(document, facts, options):
    """The checker's keys beside the runner's in its "checker" section, then every fact section (null where
    the run stopped before it), compact unless --full. `options` is None when the command line was refused."""
    static_only = bool(options and options.static_only)
    full = bool(options and options.full)
    document["checker"].update(mode="static-only" if static_only else "full", detail="full" if full else "compact",
                               timeout_s=options.timeout if options else DEFAULT_TIMEOUT, read_only=True,
                               docs_path=docs_path())
    sections = facts if full or not facts else compact_facts(facts)
    for section in FACT_SECTIONS:
        document[section] = sections.get(section)
    if not full:
        fit_budget(document, COMPACT_BUDGET)


def compact_facts(facts):
    """The default document: every section, minus the bulk few readers need (--full has it all).

    Dropped here: install records of single copies (kept when a package has
    duplicates), extension file paths, operator lists, the wheel table's
    sources (install.packages keeps wheel true/false/null), torch's CUDA build
    table, an unset CUDA_VISIBLE_DEVICES, empty CUDA arch lists, the loader's message for a missing NVML, a single clean probe attempt (counted), the torch pin and
    source build (the no-prebuilt-wheels finding carries them where they matter), torch-version PyG flags
    (WITH_PT*) and false flags, warning texts (counted), child stderr in
    attempts, who tried a socket (counted), the raw feature probe
    (sampling.probe), the stack_level locations (the finding has them), a cgroup's folder without a limit,
    a passed smoke sample's details, torch's and PyG's file when it lies inside
    python.prefix, and interpreter facts that repeat others. fit_budget then
    keeps the whole document under COMPACT_BUDGET, however long the paths.
    """
    compact = dict(facts)
    distributions = facts.get("distributions")
    if distributions:
        packages = {}
        for name, package in distributions["packages"].items():
            entry = {"installed": package["installed"]}
            if package["installs"]:
                entry.update(version=package["version"], copies=len(package["installs"]))
            if len(package["installs"]) > 1:
                entry["installs"] = [{key: record.get(key) for key in ("version", "location", "installer")}
                                     for record in package["installs"]]
            packages[name] = entry
        compact["distributions"] = dict(distributions, packages=packages)
    for section in ("torch_build", "pyg_source"):
        if facts.get(section):
            compact[section] = {k: v for k, v in facts[section].items() if k not in ("package_dir", "git_version")}
    if compact.get("pyg_source", {}).get("stack_level_typo"):  # the locations are in the finding's evidence
        compact["pyg_source"]["stack_level_typo"] = len(compact["pyg_source"]["stack_level_typo"])
    if facts.get("sampling"):  # the raw feature probe; "features" is its verdict
        compact["sampling"] = {k: v for k, v in facts["sampling"].items() if k != "probe"}
        compact["sampling"]["smoke"] = {  # a passed sample's details say nothing more than "passed"
            backend: {k: v for k, v in result.items() if not (k == "samples" and result.get("passed"))}
            for backend, result in facts["sampling"]["smoke"].items()}
    install = facts.get("install")
    if install:  # the ways round a missing wheel are in the no-prebuilt-wheels finding's fix when they matter
        compact["install"] = {k: v for k, v in install.items() if k not in (
            "source_build_time", "source_build_command", "source_build_needs", "torch_pin", "no_wheel_reasons")}
        if install.get("packages"):  # the table rows' sources and dates: --full
            compact["install"]["packages"] = {name: row.get("wheel") for name, row in install["packages"].items()}
    cuda = facts.get("cuda")
    if cuda:  # torch's own build table, and CUDA_VISIBLE_DEVICES when it is not set: --full
        compact["cuda"] = {k: v for k, v in cuda.items() if k != "releases_code_cc" and not (
            k == "visible_devices" and not (v or {}).get("set")) and not (
            k in ("arch_list", "device_archs", "visible_devices_env") and not v)}
        nvml = cuda.get("nvml") or {}
        if nvml.get("reason") == "library-not-found":  # the loader's words add nothing to the reason
            compact["cuda"]["nvml"] = {k: v for k, v in nvml.items() if k != "message"}
    prefix = (facts.get("python") or {}).get("prefix")
    for section in ("torch", "pyg"):
        if facts.get(section):  # where torch and PyG were imported from, when outside the interpreter's
            # prefix: it names a shadowing copy. Inside it, the path only repeats python.prefix.
            compact[section] = lean_record(facts[section], drop=("file",) if inside(
                facts[section].get("file"), prefix) else ())
    pyg = compact.get("pyg")
    if pyg and "flags" in pyg:
        pyg["flags"] = {k: v for k, v in pyg["flags"].items() if v and not re.match(r"^WITH_PT\d+$", k)}
        pyg["flags_shown"] = "true ones, WITH_PT* left out (--full has all)"
    extensions = facts.get("extensions")
    if extensions:
        compact["extensions"] = {module: lean_record(entry, drop=("file", "ops"))
                                 for module, entry in extensions.items()}
    probe = facts.get("probe")
    if probe:
        compact["probe"] = dict(probe, attempts=[{k: v for k, v in a.items() if k != "stderr_tail"}
                                                 for a in probe["attempts"]],
                                refused_sockets=len(probe["refused_sockets"]))
        del compact["probe"]["interpreter"]  # the "interpreter" section names it
        attempts = probe["attempts"]
        if len(attempts) == 1 and attempts[0].get("finished") and attempts[0].get("returncode") == 0 \
                and not attempts[0].get("descendants_ended"):  # one clean attempt says nothing "complete" does not
            compact["probe"]["attempts"] = len(attempts)
    container = facts.get("container")
    if container:  # a cgroup's folder and file name only where a limit was found: --full has them all
        compact["container"] = dict(container)
        for key in ("cgroup_cpu", "cgroup_memory"):
            if container.get(key):
                compact["container"][key] = dict((k, v) for k, v in container[key].items() if v is not None and not (
                    k in ("folder", "file") and container[key].get("limited_at") is None))
    if facts.get("python"):
        compact["python"] = {k: v for k, v in facts["python"].items() if k not in ("release", "platform")}
    choice = facts.get("interpreter")
    if choice:
        compact["interpreter"] = {k: v for k, v in choice.items() if v is not None and k != "probed_prefix"}
    return compact


def inside(path, prefix):
    return isinstance(path, str) and isinstance(prefix, str) and path.startswith(prefix.rstrip("/") + "/")


# Characters of the default document (compact JSON, before its newline): agent harnesses cut longer
# output. fit_budget keeps it (its docstring names the one case it cannot).
COMPACT_BUDGET = 9999


# What fit_budget cuts, in this order, until the document fits; --full always has all of it.
def _trim_info_evidence(document):
    return _clear(document, "info", "evidence", {})


def _trim_warning_evidence(document):
    return _clear(document, "warning", "evidence", {})


def _trim_info_fixes(document):
    return _clear(document, "info", "fix", None)


def _trim_info_findings(document):
    return _drop(document, "info")


def _trim_warning_fixes(document):
    return _clear(document, "warning", "fix", None)


def _trim_warning_findings(document):
    return _drop(document, "warning")


def _drop(document, severity):
    dropped = [f["id"] for f in document["findings"] if f["severity"] == severity]
    document["findings"] = [f for f in document["findings"] if f["severity"] != severity]
    return "%s findings: %s" % (severity, ", ".join(dropped)) if dropped else None


# The headline facts each section keeps when fit_budget trims them (with the keys the schema requires).
HEADLINE_KEYS = {
    "torch": ("version", "status", "cuda"), "pyg": ("version", "status", "neighbor_backend"),
    "probe": ("complete", "culprits", "blocked_modules", "hang_limit_s"), "cuda": ("status", "device_count"),
    "distributed": ("available", "backends"), "sampling": ("neighbor_backend", "features"),
    # Not the install command or python.prefix: they repeat the interpreter's path, and the error
    # findings' fixes already say what to install.
    "install": ("torch_minor", "variant", "index_url", "wheels_available"),
    "torch_build": ("version", "cuda"), "python": ("in_virtualenv", "pip"),
}


def _trim_fact_details(document):
    """Each fact section down to its headline: the keys the schema requires and HEADLINE_KEYS."""
    properties = json_schema()["properties"]
    trimmed = []
    for section in FACT_SECTIONS:
        value = document.get(section)
        if not isinstance(value, dict) or not value:
            continue
        if section == "extensions":  # each module's status, which names what failed
            kept = dict((module, {k: v for k, v in entry.items() if k in ("status", "distribution", "version")})
                        for module, entry in value.items())
        elif section == "cuda":
            kept = cuda_headline(value, tuple(properties[section].get("required") or ()) + HEADLINE_KEYS["cuda"])
        else:
            keys = tuple(properties[section].get("required") or ()) + HEADLINE_KEYS.get(section, ())
            kept = dict((k, value[k]) for k in keys if k in value)
        if kept != value:
            document[section] = kept
            trimmed.append(section)
    return "details of %s" % ", ".join(trimmed) if trimmed else None


# What NVML and CUDA_VISIBLE_DEVICES said, kept in the trimmed cuda section: the counts NVML reported
# and the parsed visible list are what a GPU finding is read against.
NVML_HEADLINE = ("available", "reason", "driver_version", "cuda_driver_version", "device_count_reported",
                 "devices_capped_at")
VISIBLE_HEADLINE = ("set", "value", "visible", "unmatched", "ignored")
HEADLINE_LIST_LIMIT = 16


def cuda_headline(cuda, keys):
    kept = dict((k, cuda[k]) for k in keys if k in cuda)
    nvml = cuda.get("nvml")
    if isinstance(nvml, dict):
        kept["nvml"] = dict((k, nvml[k]) for k in NVML_HEADLINE if k in nvml)
        if isinstance(nvml.get("devices"), list):
            kept["nvml"]["devices_read"] = len(nvml["devices"])
    visible = cuda.get("visible_devices")
    if isinstance(visible, dict):
        kept["visible_devices"] = dict((k, visible[k][:HEADLINE_LIST_LIMIT] if isinstance(visible[k], list)
                                        else visible[k]) for k in VISIBLE_HEADLINE if k in visible)
    return kept


def _shorten_evidence(document):
    """Long strings in the evidence left (error chains, paths) cut to their head and tail."""
    from diagnostics_core.text import sanitise
    shortened = 0
    for item in document["findings"]:
        short = sanitise(item["evidence"], EVIDENCE_TEXT_LIMIT)
        if short != item["evidence"]:
            item["evidence"] = short
            shortened += 1
    return "long evidence strings of %d findings, to %d characters" % (shortened, EVIDENCE_TEXT_LIMIT) \
        if shortened else None


EVIDENCE_TEXT_LIMIT = 200


def _flatten_evidence(document):
    """Evidence down to its plain values (ids, versions, paths): nested records such as error chains go."""
    flattened = 0
    for item in document["findings"]:
        plain = dict((k, v) for k, v in item["evidence"].items() if not isinstance(v, (dict, list)))
        if plain != item["evidence"]:
            item["evidence"] = plain
            flattened += 1
    return "nested evidence of %d findings" % flattened if flattened else None


def _trim_error_evidence(document):
    return _clear(document, "error", "evidence", {})


TRIM_STEPS = (_trim_info_evidence, _trim_warning_evidence, _trim_info_fixes, _trim_info_findings,
              _trim_fact_details, _shorten_evidence, _trim_warning_fixes, _trim_warning_findings,
              _flatten_evidence, _trim_error_evidence)


def _clear(document, severity, key, empty):
    touched = [f for f in document["findings"] if f["severity"] == severity and f[key] != empty]
    for item in touched:
        item[key] = empty
    return "%s of %d %s finding%s" % (key, len(touched), severity, "s" if len(touched) > 1 else "") if touched else None


def fit_budget(document, limit):
    """Cut what --full carries, least useful first, until the compact document fits in `limit`
    characters; checker.trimmed says what was cut. Errors keep id, title and fix to the end: with an
    interpreter path of thousands of characters, repeated in each error's fix and in the keys the
    schema requires, the document can still be longer, and trimmed says so."""
    from diagnostics_core.text import dumps
    cut, steps = [], iter(TRIM_STEPS)
    while len(dumps(document)) > limit:
        step = next(steps, None)
        if step is None:  # only errors with their fixes and the required facts are left
            document["checker"].setdefault("trimmed", {"cut": cut, "why": ""})["over_budget_by"] = (
                len(dumps(document)) - limit)
            break
        what = step(document)
        if what:
            cut.append(what)
            document["checker"]["trimmed"] = {
                "cut": cut, "why": "the compact document is kept under %d characters; --full prints it all"
                % (limit + 1)}
    return document


def lean_record(entry, drop=("file",)):
    """A probe record without file paths and with its warnings counted, not quoted."""
    lean = {k: v for k, v in entry.items() if k not in drop and k != "warnings"}
    if "warnings" in entry:
        lean["warning_count"] = len(entry["warnings"])
    return lean


def version_rows(document):
    """(component, state) rows for people: what is installed and whether it works."""
    python = document.get("python") or {}
    torch = document.get("torch") or {}
    build = document.get("torch_build") or {}
    pyg = document.get("pyg") or {}
    cuda = document.get("cuda") or {}
    distributed = document.get("distributed") or {}
    packages = (document.get("distributions") or {}).get("packages") or {}
    libc = python.get("libc") or {}
    rows = [("Python", "%s %s, %s %s, %s %s" % (
        python.get("implementation"), python.get("version"), python.get("system"), python.get("machine"),
        libc.get("name"), libc.get("version"))), ("interpreter", python.get("executable"))]
    if torch.get("status") == "ok":
        rows.append(("torch", "%s (CUDA build: %s)" % (torch.get("version"), torch.get("cuda") or "none")))
    else:
        rows.append(("torch", "%s (%s)" % (build.get("version") or "not installed", torch.get("status"))))
    nvml = cuda.get("nvml") or {}
    if cuda.get("status") != "not-probed":
        rows.append(("CUDA devices", "%s (%s)" % (cuda.get("device_count", 0), "driver %s" % nvml.get("driver_version")
                                                  if nvml.get("available") else "no NVML: no NVIDIA driver seen")))
    if distributed.get("available") is not None:
        rows.append(("torch.distributed", ", ".join(b for b, ok in sorted(distributed.get("backends", {}).items())
                                                    if ok) or "no backend"))
    version = (packages.get("torch-geometric") or {}).get("version")
    rows.append(("PyG", "%s (%s)" % (pyg.get("version") or version or "not installed", pyg.get("status"))))
    for module, entry in sorted((document.get("extensions") or {}).items()):
        dist = entry.get("distribution")
        rows.append((dist, "%s (%s)" % ((packages.get(dist) or {}).get("version") or "-", entry.get("status"))))
    sampling = document.get("sampling") or {}
    backend = sampling.get("neighbor_backend")
    smoke = (sampling.get("smoke") or {}).get(backend) or {}
    if document["checker"]["mode"] == "full":
        rows.append(("neighbour sampling", "%s (smoke sample %s)" % (
            backend, "passed" if smoke.get("passed") else "failed") if backend else "no backend"))
    return rows


def redactions(document):
    """(text, replacement) pairs for what a public issue should not show: home, user, host, node lists."""
    launch = (document.get("environment") or {}).get("launch") or {}
    extra = []
    for variable in ("SLURM_JOB_NODELIST", "SLURM_NODELIST", "MASTER_ADDR"):
        raw = (launch.get(variable) or {}).get("raw") or os.environ.get(variable)
        if raw:
            extra.append((raw, "<%s>" % variable.lower()))
    return private_names(extra)


def markdown(document, options):
    """--format markdown: the report, private names redacted unless --no-redact."""
    return render_markdown(document, redact_private=not options.no_redact)


def render_markdown(document, redact_private=True):
    """A report to paste into an issue: versions table and findings with their fixes, nothing else.

    Every value from the environment goes through cell() or code(), so no
    input can break the table, open a code span, or carry HTML or terminal
    escapes; private names are redacted in each value before it is escaped.
    """
    names = redactions(document) if redact_private else ()

    def hide(value):
        return redact("-" if value is None else str(value), names) if names else value

    checker = document["checker"]
    lines = ["### PyG environment (check_sampling_backends %s)" % cell(checker["version"]), "",
             "status **%s**, exit %d, %s probe in %.1f s; gates: %s" % (
                 cell(document["status"]), document["exit_code"], cell(checker["mode"]), checker["elapsed_s"],
                 cell(", ".join("%s %s" % (name, "passed" if g["passed"] else "FAILED")
                                for name, g in document["gates"].items()) or "none asked")), ""]
    if document.get("python") is None:
        lines.append("no facts gathered: the checker stopped before probing (see the finding)")
    else:
        lines += ["| component | version (state) |", "|---|---|"]
        for component, state in version_rows(document):
            lines.append("| %s | %s |" % (cell(hide(component)), cell(hide(state))))
    lines += [""] + findings_list(document["findings"], hide)
    text = "\n".join(lines) + "\n"
    if redact_private:
        text += "\n<sub>user, home, host and node names redacted (--no-redact shows them)</sub>\n"
    return text


def stderr_summary(document, names=()):
    """One screen for the person at the terminal, as lines (the caller writes each); `names` are
    redacted from each value before it is cut to length. The JSON on stdout stays the contract."""
    def one_line(value, limit=None):
        text = terminal_line(redact(str(value), names) if names else str(value))
        return text if limit is None or len(text) <= limit else text[:limit - 3] + "..."

    python = document.get("python") or {}
    probed = python.get("executable") or (document.get("interpreter") or {}).get("probed") or "?"
    lines = ["check_sampling_backends: %s (exit %d) for %s (Python %s)" % (
        document["status"], document["exit_code"], one_line(probed), one_line(python.get("version") or "?"))]
    shown = [f for f in document["findings"] if f["severity"] in ("error", "warning")]
    for item in shown[:8]:
        lines.append("  %-7s %s: %s" % (item["severity"], item["id"], one_line(item["title"])))
        if item.get("fix"):
            lines.append("          fix: %s" % one_line(item["fix"], 200))
    hidden = len(document["findings"]) - len(shown[:8])
    if hidden:
        lines.append("  (+%d more, info included: see \"findings\" in the JSON)" % hidden)
    return lines


def summary(document, run):
    """The stderr summary after every run the command line allowed; in markdown mode (a report to paste in
    public) with the report's own redactions."""
    options = run.options
    names = redactions(document) if options is not None and options.format == "markdown" and not options.no_redact \
        else ()
    for line in stderr_summary(document, names):
        stderr_line(line)
