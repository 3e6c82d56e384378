"""Rules about the interpreter, torch and PyG themselves."""

import os
import re

from diagnostics_core.command import line
from diagnostics_core.wheels import parse_version
from .findings import checker_command, finding
from .install import (FAILED_STEP_STATUSES, gpu_seen, interpreter, pip, torch_and_pyg_install_command,
                      torch_reinstall_command, with_pip)


def rule_interpreter_choice(facts, options):
    """Say so when the probed interpreter is not where the user works."""
    choice = facts.get("interpreter") or {}
    active = choice.get("active_environment")
    if choice.get("probed_is_active") is False:
        evidence = {"probed": choice["probed"], "chosen_by": choice["chosen_by"],
                    "active_environment": active["prefix"], "from": active["source"],
                    "running": choice["running"]}
        if active.get("python"):
            fix = checker_command("--python", active["python"])
        else:
            fix = "%s has no bin/python: activate the environment you train in, then run: %s" % (
                line(active["prefix"]), checker_command())
        # An explicit --python is a choice the user made; otherwise it is a surprise.
        severity = "info" if choice["chosen_by"] == "--python" else None
        return [finding("interpreter-not-active", evidence, fix=fix, severity=severity)]
    if choice.get("probed_ephemeral") and not active:
        return [finding("interpreter-ephemeral", {
            "probed": choice["probed"], "tool": choice["probed_ephemeral"], "prefix": choice["probed_prefix"],
            "why": "a %s run made this environment for the script alone; your torch is elsewhere"
                   % choice["probed_ephemeral"]},
            fix="activate the environment you train in (e.g. source ~/.venvs/scalable-distributed/bin/activate), "
                "then run: %s" % checker_command())]
    return []


def rule_torch_and_pyg_presence(facts, options):
    found = []
    packages = facts["distributions"]["packages"]
    torch = facts["torch"]
    if not facts["torch_build"].get("found"):
        found.append(finding("torch-not-installed", {
            "interpreter": interpreter(facts),
            "python": facts["python"]["version"], "gpu_seen": gpu_seen(facts)},
            fix=torch_and_pyg_install_command(facts)))
        return found
    if torch.get("status") in FAILED_STEP_STATUSES:
        found.append(finding("torch-import-failed", {"outcome": torch}, fix=torch_reinstall_command(facts)))
    pyg_installed = packages["torch-geometric"]["installed"] or packages["pyg-nightly"]["installed"]
    if not pyg_installed and not facts["pyg_source"].get("found"):
        found.append(finding("pyg-not-installed", {"interpreter": interpreter(facts)},
                             fix=with_pip(facts, pip(facts, ["install", "torch_geometric"]))))
    elif facts["pyg"].get("status") in FAILED_STEP_STATUSES and torch.get("status") == "ok":
        found.append(finding("pyg-import-failed", {"outcome": facts["pyg"]},
                             fix=with_pip(facts, pip(facts, ["install", "--force-reinstall", "--no-deps",
                                                             "torch_geometric"]))))
    return found


def pyg_installs(facts):
    packages = facts["distributions"]["packages"]
    return packages["torch-geometric"]["installs"] + packages["pyg-nightly"]["installs"]


def inside(path, directory):
    path, directory = os.path.realpath(path), os.path.realpath(directory)
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def pyg_shadowing(facts):
    """How the imported torch_geometric differs from the installed distribution(s), or None."""
    pyg = facts["pyg"]
    installs = pyg_installs(facts)
    if pyg.get("status") != "ok" or not pyg.get("file") or not installs:
        return None  # not imported, or a source checkout with nothing installed: nothing to compare
    package_dir = os.path.dirname(pyg["file"])
    owners = [r for r in installs if inside(package_dir, os.path.join(r["location"], "torch_geometric"))]
    editable = [r for r in installs if r.get("editable_or_url") and r["version"] == pyg["version"]]
    if owners and any(r["version"] == pyg["version"] for r in owners):
        return None
    if not owners and editable:
        return None  # an editable install lives outside site-packages by design
    return {"imported_version": pyg["version"], "imported_from": package_dir,
            "shadowing_path": os.path.dirname(package_dir),
            "installed": [{"version": r["version"], "location": r["location"]} for r in installs]}


def pyg_version(facts):
    """The PyG version other findings quote: what is imported, else the first installed record."""
    if facts["pyg"].get("status") == "ok" and facts["pyg"].get("version"):
        return facts["pyg"]["version"]
    packages = facts["distributions"]["packages"]
    return packages["torch-geometric"]["version"] or packages["pyg-nightly"]["version"]


def shadow_fix(shadow, facts):
    """Take the stray copy off the path: PYTHONPATH without its entry, or where else it comes from. Sets the
    shadow's "origin"."""
    path = shadow["shadowing_path"]
    pythonpath = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    listed = [entry for entry in pythonpath if os.path.realpath(entry or ".") == os.path.realpath(path)]
    if listed:
        shadow["origin"] = "PYTHONPATH"
        rest = [entry for entry in pythonpath if entry not in listed]
        return line("export", "PYTHONPATH=" + os.pathsep.join(rest)) if rest else "unset PYTHONPATH"
    shadow["origin"] = "sys.path (a .pth file, the user site or the interpreter's own paths)"
    # The paths stay in the evidence: a comment ends at a newline, which a path may hold.
    return "%s  # shows where evidence.shadowing_path comes from; remove that entry, or move the stray copy " \
           "(evidence.imported_from) away" % line(interpreter(facts), "-c", "import sys; print(sys.path)")


def rule_pyg_shadowed(facts, options):
    shadow = pyg_shadowing(facts)
    if shadow is None:
        return []
    fix = shadow_fix(shadow, facts)
    shadow["note"] = ("sampling and feature findings are withheld: they describe the stray copy, "
                      "not the installed PyG")
    return [finding("pyg-shadowed", shadow, fix=fix)]


def torch_shadowing(facts):
    """Where `import torch` finds a folder no installed torch distribution owns (read from the path, nothing
    imported: --static-only sees it too), or None."""
    build = facts.get("torch_build") or {}
    installs = facts["distributions"]["packages"].get("torch", {}).get("installs") or []
    package_dir = build.get("package_dir")
    if not build.get("found") or not package_dir or not installs:
        return None
    if any(inside(package_dir, os.path.join(r["location"], "torch")) or r.get("editable_or_url") for r in installs):
        return None
    return {"imported_from": package_dir, "shadowing_path": os.path.dirname(package_dir),
            "installed": [{"version": r["version"], "location": r["location"]} for r in installs]}


def rule_torch_shadowed(facts, options):
    shadow = torch_shadowing(facts)
    if shadow is None:
        return []
    return [finding("torch-shadowed", shadow, fix=shadow_fix(shadow, facts))]


def rule_python_supported_by_pyg(facts, options):
    for name in ("torch-geometric", "pyg-nightly"):
        for record in facts["distributions"]["packages"][name]["installs"]:
            requirement = record.get("requires_python") or ""
            match = re.match(r"^\s*>=\s*([\d.]+)", requirement)
            if match and parse_version(facts["python"]["version"])[:2] < parse_version(match.group(1))[:2]:
                return [finding("python-unsupported-by-pyg", {
                    "python": facts["python"]["version"], "pyg_version": record["version"],
                    "requires_python": requirement},
                    fix="use Python %s or newer for this PyG (e.g. a new venv: python3.11 -m venv .venv)"
                    % match.group(1))]
    return []


def rule_probe_deadline(facts, options):
    probe = facts.get("probe")
    if probe is None or probe["complete"]:
        return []
    unfinished = [a for a in probe["attempts"] if a["killed_for"] == "deadline"]
    if not unfinished:
        return []  # incomplete because of a crash or hang, which their own findings name
    return [finding("probe-deadline", {
        "timeout_s": options.timeout, "step_running": unfinished[-1]["culprit"],
        "attempts": len(probe["attempts"])},
        fix="run again with a longer deadline: " + checker_command("--timeout", "%d" % options.bounds["retry"]))]
