"""The comparison's facts, plain data: one node per report read, and every compared fact grouped by value.
Groups hold node indexes (a label may repeat); what a document shows of them is bounded (bounds.py)."""

import json

from . import reports
from .reports import FACTS


def new_facts(given):
    """The facts of a run that will read `given` report files; gather fills them as it reads, so an
    interrupted run still shows what it had read."""
    return {"counts": {"given": given, "read": 0, "too_large": 0}, "nodes": [], "too_large": []}


def add(facts, path, report):
    """One report read: its node."""
    facts["nodes"].append(reports.node(path, report))
    facts["counts"]["read"] += 1


def refuse_size(facts, path):
    """One report over the size bound: counted, named, not read."""
    facts["too_large"].append(path)
    facts["counts"]["too_large"] += 1


def complete(facts):
    """After the last report: labels, and each fact grouped by value."""
    nodes = reports.label_nodes(facts["nodes"])
    facts["compared"] = dict((name, group(nodes, name)) for name, _ in FACTS)
    facts["missing"] = dict((name, [i for i, item in enumerate(nodes) if name not in item["values"]])
                            for name, _ in FACTS)
    return facts


def group(nodes, name):
    """[{value, members}] of the nodes that have fact `name`, the largest group first (ties: the group of
    the first report)."""
    groups = {}
    for index, item in enumerate(nodes):
        if name in item["values"]:
            value = item["values"][name]
            groups.setdefault(json.dumps(value, sort_keys=True), {"value": value, "members": []})["members"].append(
                index)
    return sorted(groups.values(), key=lambda g: -len(g["members"]))
