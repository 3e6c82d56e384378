"""One plan: read the sizes (a child, for --data or --store), pick the coefficients (committed, or measured
here with --calibrate), size every design, then the rules and rendering."""

import os
import time

from diagnostics_core import cli as shared_cli
from diagnostics_core.calls import error_text
from diagnostics_core.cli import UsageError
from . import calibrate
from .findings import TOOL, finding


def installed_versions():
    """torch and torch_geometric versions from their metadata, without importing them."""
    from importlib import metadata
    found = {}
    for name in ("torch", "torch_geometric"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def version_key(text):
    return (text or "").split("+")[0]


PROBE_START_S = 5.0  # the size probe's child starts and imports torch before its one bounded call


def stage_bounds(timeout, started):
    """--timeout (seconds) and the run's start -> every stage's bound, here and nowhere else: the
    calibration's deadline (absolute), the size probe's call bound (in its child) and the probe child's
    whole allowance (from when it starts)."""
    return {"calibration_deadline": started + timeout, "probe_call_s": timeout,
            "probe_child_s": timeout + PROBE_START_S}


COEFFICIENT_KEYS = ("provenance", "process_base_bytes", "loader", "preprocess", "conv")


def read_coefficients(path):
    """A coefficients file (a --calibrate run's coefficients.values), bounded and checked for its keys."""
    from diagnostics_core import safe_json
    try:
        value = safe_json.load_file(path, 16 << 20, 32)
    except safe_json.Refused as error:
        value, why = None, str(error)
    else:
        why = None if isinstance(value, dict) and all(k in value for k in COEFFICIENT_KEYS) else \
            "not a coefficients document (needs %s)" % ", ".join(COEFFICIENT_KEYS)
    if why:
        raise UsageError("plan_capacity.py: error: --coefficients %s: %s" % (path, why), TOOL.usage_id,
                         {"file": path, "error": why}, TOOL.command("--calibrate", "--nodes", "N", "--edges", "E"))
    return value


def choose_coefficients(options, bounds):
    source = options.coefficients or calibrate.committed_path()
    committed = read_coefficients(options.coefficients) if options.coefficients else calibrate.load_committed()
    installed = installed_versions()
    used = {"used": "file" if options.coefficients else "committed", "file": os.path.abspath(source),
            "provenance": committed["provenance"], "installed": installed}
    used["version_mismatch"] = any(installed[k] is not None and version_key(installed[k]) !=
                                   version_key(committed["provenance"][k]) for k in installed)
    coefficients = committed
    if options.calibrate:
        measured, problems = calibrate.calibrate(bounds["calibration_deadline"])
        if measured is not None:
            coefficients = measured
            used = {"used": "calibrated", "provenance": measured["provenance"], "installed": installed,
                    "version_mismatch": False, "values": measured}
        else:
            used["calibration_problems"] = problems
    coefficients = dict(coefficients, provenance_label="%s on torch %s, PyG %s, %s" % (
        used["used"], coefficients["provenance"]["torch"], coefficients["provenance"]["torch_geometric"],
        coefficients["provenance"]["date"]))
    return coefficients, used


def read_sizes(options, bounds):
    """-> (sizes or None, findings) from --data or --store, read in a sandboxed child with a deadline."""
    if options.data:
        probe = {"probe": "data", "path": os.path.abspath(options.data), "timeout": bounds["probe_call_s"]}
    else:
        probe = {"probe": "store", "store": options.store, "path": options.path, "timeout": bounds["probe_call_s"]}
    facts, error = calibrate.run_probe(probe, time.time() + bounds["probe_child_s"])
    scan = facts.get("scan") or {}
    if options.data and scan.get("refused"):
        raise UsageError("plan_capacity.py: error: --data %s names %s: loading it would run code" % (
            options.data, ", ".join(scan["refused"][:3])), "plan-data-unsafe-pickle",
            {"file": options.data, "refused": scan["refused"]},
            "save the graph as plain tensors and plan again: torch.save(data.to_dict(), 'graph.pt') where it was "
            "made; then %s" % TOOL.command("--data", "graph.pt"))
    if options.data and (scan.get("error") or error or "sizes" not in facts):
        why = scan.get("error") or error or "no sizes read"
        raise UsageError("plan_capacity.py: error: --data %s: %s" % (options.data, why), "plan-data-unreadable",
                         {"file": options.data, "error": why},
                         "pass a file written by torch.save(data) or torch.save(data.to_dict()), or give the sizes: "
                         "%s" % TOOL.command("--nodes", "N", "--edges", "E", "--features", "F"))
    if options.store and (error or "sizes" not in facts):
        hung = error and ("did not finish" in error or "call-timeout" in error or "deadline" in error)
        return None, [finding("plan-store-hung" if hung else "plan-store-failed",
                              {"store": options.store, "error": error or "no sizes read", "timeout_s": options.timeout},
                              "%s  # checks the pair call by call, each bounded" % shared_cli_store_check(options))]
    return facts["sizes"], []


def shared_cli_store_check(options):
    from diagnostics_core.contract import script_command
    words = [options.store] + (["--path", options.path] if options.path else [])
    return script_command("check_store_contract.py", *words)


def run(options, spec, started):
    from .designs import plan, preprocessing, ORDER
    from .render import emit, render
    from .rules import diagnose
    facts, findings, gates = {"request": spec}, [], {}
    bounds = stage_bounds(options.timeout, started)
    try:
        if spec["graph"] is None:
            sizes, findings = read_sizes(options, bounds)
            if sizes is None:
                gates = {"planned": {"passed": False}}
                document, code = render(facts, findings, gates, started)
                emit(document, options)
                return code
            from .spec import from_probed
            spec["graph"] = from_probed(sizes, options)
            facts["read_sizes"] = sizes
        coefficients, used = choose_coefficients(options, bounds)
        facts["coefficients"] = used
        facts["designs"] = plan(spec, coefficients)
        facts["preprocessing"] = preprocessing(spec, coefficients)
        fitting = [d["design"] for d in facts["designs"] if d["fits"]["all"]]
        facts["cheapest_fit"] = next((name for name in ORDER if name in fitting), None)
        gpus = spec["hardware"]["gpus_per_node"] * spec["hardware"]["machines"]
        facts["fits_all_gpus"] = next((d["design"] for d in facts["designs"] if d["fits"]["all"]
                                       and d["gpus"] >= gpus), None)
        options.hardware, options.sampling = spec["hardware"], spec["sampling"]
        findings = diagnose(facts, options)
        gates = {"planned": {"passed": True}, "fits": {"passed": facts["cheapest_fit"] is not None}}
        document, code = render(facts, findings, gates, started)
    except UsageError as error:
        document, _ = render(facts, [error.finding(TOOL)], {}, started, usage_error=True)
        return shared_cli.refuse(TOOL, error, document)
    except Exception as error:  # still one document, saying what broke
        document, code = render(facts, findings, gates, started,
                                internal_error=shared_cli.internal_error(error, error_text))
    emit(document, options)
    return code
