"""Fixes are values: every command is built from words (diagnostics_core.command, the skill's wheel table),
and text from a report (a host name, an interpreter path, a version, a launch value) enters a fix only as
one quoted word, so pasting a fix runs nothing a node wrote. Prose around the commands uses no quote,
backslash or comment character of its own."""

import os
import re

from diagnostics_core import command, wheels
from diagnostics_core.contract import script_command
from .bounds import COMMANDS_LISTED, FIX_CHARS, HOSTS_NAMED, VALUE_IN_FIX_CHARS
from .findings import CHECKER_SCRIPT

BUILD_TAG = re.compile(r"^[0-9][0-9.]*\+[a-z]+[0-9.]*$")  # torch's release+build (2.13.0+cpu)
PIN_VERSION = re.compile(r"^[0-9][0-9A-Za-z.+!_-]{0,63}$")  # what may follow == in a printed pip line
INSTALLED_STATES = ("import-error", "blocked")  # installed but not importable: removable


def on_hosts(nodes, members):
    """'on a, b and 3 more hosts': each label one quoted word, at most HOSTS_NAMED of them."""
    named = [command.word(nodes[i]["label"]) for i in members[:HOSTS_NAMED]]
    more = len(members) - len(named)
    return "on %s%s" % (", ".join(named), " and %d more hosts" % more if more else "")


def rerun_checker():
    return "%s (a full report, not --static-only: its findings give the install command for that node)" % (
        script_command(CHECKER_SCRIPT, "--require-neighbor-backend"))


def extension_install(python, package, version, model):
    """The line that installs `package` as the model node has it: a wheel only where the checker's wheel
    table says PyG's index has one for that torch, else the source build (never a guessed wheel)."""
    install = model.get("install") or {}
    python_version = wheels.parse_version(model["python_version"])[:2] if isinstance(
        model.get("python_version"), str) else (3, 11)
    minor, variant, platform_name, index_url = (install.get(key) for key in (
        "torch_minor", "variant", "platform", "index_url"))
    if minor and variant and platform_name and index_url:
        if wheels.wheel_status(package, minor, variant, platform_name, python_version)["wheel"]:
            return wheels.pip_command(python, ["install", "--only-binary=:all:", "%s==%s" % (package, version),
                                               "-f", index_url])
    if package in dict(wheels.SOURCE_BUILDS):
        return "%s (a source build: no wheel known for torch %s+%s)" % (
            wheels.source_build_command(python, [package]), command.word(minor), command.word(variant))
    return rerun_checker()


def definite(name, model):
    """Whether the model node's state of `name` is one a fix can make another node match (not unknown, not
    unset): a pinnable version, or an extension installed at a pinnable version or not installed."""
    if name in wheels.EXTENSION_DIST:
        state = model["extensions"][name]
        return state["status"] == "not-installed" or (
            state["status"] == "ok" and isinstance(state["version"], str) and bool(PIN_VERSION.match(state["version"])))
    value = model["values"].get(name)
    return isinstance(value, str) and bool(PIN_VERSION.match(value))


def host_fix(name, model, item):
    """What makes node `item` match the model node in fact `name` (run on that node): a command, or the
    checker's full report where no command can be named."""
    python = item["python"] or "python3"
    path, prefix = item["files"].get(name), item["prefix"]
    if path and prefix and not path.startswith(prefix.rstrip("/") + "/"):
        # A copy outside the interpreter's own prefix shadows the installed one.
        return "%s is imported from %s, outside %s: remove that folder from PYTHONPATH" % (
            name, command.word(os.path.dirname(os.path.dirname(path))), command.word(prefix))
    if name in wheels.EXTENSION_DIST:
        package, wanted, have = wheels.EXTENSION_DIST[name], model["extensions"][name], item["extensions"][name]
        if definite(name, model) and wanted["status"] == "ok":
            return extension_install(python, package, wanted["version"], model)
        if wanted["status"] == "not-installed" and have["status"] in ("ok",) + INSTALLED_STATES:
            return wheels.pip_command(python, ["uninstall", "-y", package])
        return rerun_checker()  # a state that is no version to match (not-run, not-probed, ...)
    value = model["values"].get(name)
    if name == "torch" and definite(name, model) and BUILD_TAG.match(value):
        # A local build tag (+cpu, +cu130) lives on PyTorch's index for that build, not on PyPI.
        release, variant = value.split("+", 1)
        return wheels.torch_install_command(release, variant, python,
                                            model["install"].get("platform") or "linux-x86_64")
    if name in ("torch", "torch_geometric") and definite(name, model):
        return wheels.pip_command(python, ["install", "%s==%s" % (name, value)])
    return rerun_checker()


def by_command(fixes):
    """[(fix, members)] in first-seen order: the nodes that need the same fix named together."""
    grouped = {}
    for index, fix in fixes:
        grouped.setdefault(fix, []).append(index)
    return list(grouped.items())


def install_fix(name, reference, others, nodes):
    """What makes the differing nodes match the largest group: each distinct command once, on its hosts."""
    model = nodes[reference[0]]
    parts, rest = [], 0
    for fix, members in by_command((index, host_fix(name, model, nodes[index])) for index in others):
        part = "%s: %s" % (on_hosts(nodes, members), fix)
        if len(parts) < COMMANDS_LISTED and len(part) + sum(len(p) + 2 for p in parts) <= FIX_CHARS:
            parts.append(part)
        else:
            rest += len(members)
    if rest:
        parts.append("%d more hosts need other commands: compare their reports alone to see them" % rest)
    if definite(name, model):
        return "%s (to match the largest group, %d hosts: %s = %s)" % (
            "; ".join(parts), len(reference), name, command.word(model["values"][name]))
    return "%s (the largest group has no state to match for %s: compare full reports)" % ("; ".join(parts), name)


def launch_fix(name, grouped, nodes):
    """export the value of the largest group whose value the checker parsed; never a placeholder (unset) or
    a value the checker rejected; the value is one quoted word, so it cannot run as shell code."""
    if grouped[0]["value"] is None:
        unset = len(grouped[0]["members"])
        set_on = [i for g in grouped if g["value"] is not None for i in g["members"]]
        return ("%d of %d nodes do not set %s: unset it %s, or export one value on every node in the job script "
                "(one job script for all nodes)" % (unset, unset + len(set_on), name, on_hosts(nodes, set_on)))
    valid = set(item["launch"][name]["raw"] for item in nodes
                if name in item["launch"] and item["launch"][name]["error"] is None)
    usable = [g for g in grouped if g["value"] in valid and len(g["value"]) <= VALUE_IN_FIX_CHARS]
    if not usable:
        return ("no node sets %s to a value this fix can export (the checker rejected each: see "
                "environment.launch.%s.error in each report, or it is over %d characters): export one valid value "
                "on every node in the job script" % (name, name, VALUE_IN_FIX_CHARS))
    fix = "%s on every node before the launch (one job script for all nodes)" % command.line(
        "export", "%s=%s" % (name, usable[0]["value"]))
    unset = [i for g in grouped if g["value"] is None for i in g["members"]]
    if unset:
        fix += "; it is unset %s" % on_hosts(nodes, unset)
    return fix
