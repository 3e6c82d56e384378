"""Sizes from --data or --store, read by the probe child (probe.py) within the size stages' bounds. A file
that cannot be planned is a usage error naming it; a store that fails or hangs is a fact the rules report."""

import os

from diagnostics_core.cli import UsageError
from .children import run_probe
from .findings import TOOL


def unreadable(path, why):
    return UsageError("plan_capacity.py: error: --data %s: %s" % (path, why), "plan-data-unreadable",
                      {"file": path, "error": why},
                      "pass a file written by torch.save(data) or torch.save(data.to_dict()), or give the sizes: "
                      "%s" % TOOL.command("--nodes", "N", "--edges", "E", "--features", "F"))


def read(run):
    """-> the sizes the probe read, or None when the store did not give them (run.facts["store_problem"]
    says how, as data)."""
    options = run.options
    if options.data:
        if not os.path.isfile(options.data):
            raise unreadable(options.data, "no such file" if not os.path.exists(options.data) else
                             "not a regular file")
        probe = {"probe": "data", "path": os.path.abspath(options.data)}
    else:
        probe = {"probe": "store", "store": options.store, "path": options.path}
    probe["timeout"] = run.bounds["size_call"]
    facts, problem = run_probe(probe, run.by("size_child"))
    if options.data:
        return file_sizes(options.data, facts, problem)
    if problem is not None or "sizes" not in facts:
        problem = problem or {"error": "no sizes read", "hung": False, "call": None, "ended_by": None}
        run.facts["store_problem"] = dict(problem, store=options.store,
                                          path=os.path.abspath(options.path) if options.path else None,
                                          timeout_s=run.bounds["size_call"])
        return None
    return facts["sizes"]


def file_sizes(path, facts, problem):
    scan = facts.get("scan") or {}
    if scan.get("refused"):
        raise UsageError("plan_capacity.py: error: --data %s names %s: loading it would run code" % (
            path, ", ".join(scan["refused"][:3])), "plan-data-unsafe-pickle",
            {"file": path, "refused": scan["refused"]},
            "save the graph as plain tensors and plan again: torch.save(data.to_dict(), 'graph.pt') where it was "
            "made; then %s" % TOOL.command("--data", "graph.pt"))
    if scan.get("error") or problem is not None or "sizes" not in facts:
        raise unreadable(path, scan.get("error") or (problem or {}).get("error") or "no sizes read")
    return facts["sizes"]
