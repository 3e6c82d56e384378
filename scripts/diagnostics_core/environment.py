"""What the user's Python environment does to every tool alike, read before a tool runs: warnings turned
into errors (-W error, PYTHONWARNINGS=error, -X dev), and packages a copy on PYTHONPATH or in the working
folder shadows. Facts are plain data; the runner turns them into findings and keeps the tool's own process
and its children on Python's default warning filters."""

import os
import sys

WARNING_VARIABLES = ("PYTHONWARNINGS", "PYTHONDEVMODE")


def warning_facts():
    """How warnings are configured for this process: -W options and PYTHONWARNINGS (sys.warnoptions), -X dev,
    and whether any of them turns a warning into an exception."""
    options = list(sys.warnoptions)
    errors = [option for option in options if option.split(":", 1)[0].strip().lower() == "error"]
    return {"warnoptions": options, "PYTHONWARNINGS": os.environ.get("PYTHONWARNINGS"),
            "dev_mode": bool(getattr(sys.flags, "dev_mode", False)), "as_errors": errors}


def contain_warnings():
    """Python's default filters for this process from here on, and none of the user's warning settings in
    the environment its children inherit: a tool reports a warning-as-error setting, it does not die of it.
    -> the facts as they were."""
    import warnings
    facts = warning_facts()
    warnings.resetwarnings()
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
        warnings.simplefilter("ignore", category)
    for name in WARNING_VARIABLES:
        os.environ.pop(name, None)
    # multiprocessing starts its spawned processes with this process's -W options (sys.warnoptions): keep only
    # what its command-line builder expects for the flags this interpreter has (-b, -X dev).
    kept = []
    if sys.flags.bytes_warning:
        kept.append("error::BytesWarning" if sys.flags.bytes_warning > 1 else "default::BytesWarning")
    if facts["dev_mode"]:
        kept.append("default")
    sys.warnoptions[:] = kept
    return facts


def python_path_entries():
    return [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]


def origin_of(entry, from_path):
    if entry in ("", "."):
        return "the working folder"
    if os.path.abspath(entry) in from_path:
        return "PYTHONPATH"
    return None


def copies_of(name):
    """(sys.path entry, location) of every copy of top-level package `name` on sys.path, first first;
    found by the path finder, nothing imported."""
    from importlib.machinery import PathFinder
    found = []
    for entry in sys.path:
        try:
            spec = PathFinder.find_spec(name, [entry or os.getcwd()])
        except (ImportError, ValueError, OSError):
            continue
        if spec is None:
            continue
        location = spec.origin if spec.origin not in (None, "namespace") else list(
            spec.submodule_search_locations or [entry])[0]
        found.append((entry, location))
    return found


def shadowed(names):
    """[{package, imported_from, origin, installed}] for each of `names` whose first copy on sys.path comes from
    PYTHONPATH or the working folder while another copy stands later on the path: `import name` takes the
    stray one."""
    from_path = set(os.path.abspath(entry) for entry in python_path_entries())
    found = []
    for name in names:
        copies = copies_of(name)
        if len(copies) < 2:
            continue
        entry, location = copies[0]
        origin = origin_of(entry, from_path)
        if origin is None:
            continue
        found.append({"package": name, "imported_from": location, "path_entry": entry or os.getcwd(),
                      "origin": origin, "installed": [where for _, where in copies[1:]][:4]})
    return found


def python_path_without(entries):
    """PYTHONPATH's entries other than `entries`, in their order."""
    drop = set(os.path.abspath(entry) for entry in entries)
    return [entry for entry in python_path_entries() if os.path.abspath(entry) not in drop]
