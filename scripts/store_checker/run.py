"""The parent side: the stores run in a sandboxed child (gather), the document's sections (render, meta), and
this run's command line rebuilt from its parsed options, for the fixes that rerun it (rerun_words)."""

import os

from diagnostics_core import calls, cli
from diagnostics_core.contract import SCRIPTS
from . import CHILD_FLAG
from .findings import TOOL

DEFAULT_TIMEOUT = 10.0  # seconds per store call
DEFAULT_SETUP_TIMEOUT = 120.0  # seconds to import the stack, build the stores, or sample one batch

FACT_SECTIONS = ("setup", "tensor_attrs", "tensors", "edge_attrs", "edges", "graph_meta", "missing_keys",
                 "sampling", "worker_sampling", "write_check")

# Each fact section, empty as a crash, kill or signal leaves it.
EMPTY_SECTIONS = (("setup", None), ("tensor_attrs", None), ("tensors", []), ("edge_attrs", None), ("edges", []),
                  ("graph_meta", None), ("missing_keys", None), ("sampling", None), ("worker_sampling", None),
                  ("write_check", {"performed": False}))


def gather(run):
    """Gather the facts in a sandboxed child. What the stores print is passed on to stderr; what they and the
    loader worker write to the temp dir goes with the run's scratch folder. Interrupted (SIGINT/SIGTERM) goes
    up with the facts published so far; a reference that names nothing is a usage error."""
    try:
        run.scratch()
    except OSError:
        pass  # a temp dir that takes no folder (read-only): the children write nothing there either
    facts = calls.gather_in_child(os.path.join(SCRIPTS, TOOL.name + ".py"), CHILD_FLAG, run.options, "call",
                                  "[store] ", EMPTY_SECTIONS)
    if facts.get("crash"):  # a loader batch that was running when the child died died with it
        for key in ("sampling", "worker_sampling"):
            if (facts.get(key) or {}).get("status") == "running":
                facts[key]["status"] = "crashed"
    run.facts.update(facts)
    if (facts.get("setup") or {}).get("status") == "not-found":
        raise reference_not_found(facts["setup"], run.options)


def reference_not_found(setup, options):
    """The child could not find the MODULE or CALLABLE of a reference: the command line's fault (exit 2)."""
    return cli.UsageError(
        "%s.py: error: %s (store-reference-not-found)" % (TOOL.name, setup["error"]), "store-reference-not-found",
        {"references": setup["references"], "reference": setup["failed_reference"], "error": setup["error"],
         "cwd": os.getcwd(), "path": list(options.path)},
        fix="name a module and callable that exist, and the folder that holds the module: %s  # or give a .py "
            "file: ./stores.py:make_stores" % TOOL.command(setup["failed_reference"], "--path", "/your/project"))


def render(document, facts, options):
    document["versions"] = facts.get("versions")
    for section in FACT_SECTIONS:
        document[section] = facts.get(section)


def meta(facts, options):
    caller = facts.get("caller") or calls.CALLER
    return {"timeout_s": options.timeout, "setup_timeout_s": options.setup_timeout,
            "write_check": bool(options.write_check), "calls": caller["count"],
            "skipped_calls": len(caller["skipped"]), "read_only": not options.write_check,
            "child": facts.get("child")}


def absolute_reference(reference):
    """A MODULE:CALLABLE that names the same thing from any folder: a .py file by its absolute path."""
    module, _, names = reference.rpartition(":")
    return "%s:%s" % (os.path.abspath(module), names) if module.endswith(".py") else reference


def rerun_words(options, **changed):
    """This run's command line as words (each one argument, unquoted: Tool.command quotes them), rebuilt from
    the parsed options so that it works from any folder: a .py reference by its absolute path, dotted modules
    found through --path (the working folder added). `changed`: timeout= or setup_timeout= seconds."""
    if options.stores:
        words = [absolute_reference(options.stores)]
    else:
        words = ["--feature-store=" + absolute_reference(options.feature_store),
                 "--graph-store=" + absolute_reference(options.graph_store)]
    folders = list(options.path)
    if not all(ref.rpartition(":")[0].endswith(".py") for ref in (options.stores, options.feature_store,
                                                                  options.graph_store) if ref):
        folders.append(os.getcwd())  # dotted modules were found from the working folder too
    for folder in dict.fromkeys(folders):
        words += ["--path", folder]
    words += ["--write-check"] * bool(options.write_check) + ["--skip-sampling"] * bool(options.skip_sampling)
    for flag, name, default in (("--timeout", "timeout", DEFAULT_TIMEOUT),
                                ("--setup-timeout", "setup_timeout", DEFAULT_SETUP_TIMEOUT)):
        value = changed.get(name, getattr(options, name))
        if value != default:
            words += [flag, "%g" % value]
    return words
