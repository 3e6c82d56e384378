"""The rules: each (facts, options) -> findings, on the nodes and grouped facts gather built (facts.py).
Rules decide on every node; what a finding shows is bounded (bounds.py)."""

import re

from diagnostics_core import command
from diagnostics_core.contract import script_command
from diagnostics_core.netenv import SOCKET_IFNAME_VARIABLES, absent_interfaces
from . import bounds
from .bounds import GROUPS_LISTED, RANKS_LISTED
from .findings import CHECKER, CHECKER_SCRIPT, GATHER, finding
from .fixes import install_fix, launch_fix
from .reports import FACTS, REPORT_MAX_BYTES

LAUNCH_ID = re.compile(r"^launch-[a-z0-9-]{1,64}$")  # a checker finding id: anything else is not repeated


def drift_evidence(name, nodes, grouped):
    shown, rest = bounds.groups(nodes, grouped)
    evidence = {"fact": name, "groups": shown}
    if rest:
        evidence["groups_not_listed"] = rest
    files = {}
    for group in grouped[:GROUPS_LISTED]:
        for index in group["members"][:bounds.HOSTS_NAMED]:
            if name in nodes[index]["files"]:
                files[nodes[index]["label"]] = bounds.text(nodes[index]["files"][name])
    if files:
        evidence["files"] = files
    return evidence


def differing(facts, kinds):
    """(name, finding id, groups) of each fact of these kinds whose value differs between nodes, in order."""
    return [(name, kind, facts["compared"][name]) for name, kind in FACTS
            if kind in kinds and len(facts["compared"][name]) > 1]


def rule_single_report(facts, options):
    if len(facts["nodes"]) != 1:
        return []
    return [finding("cluster-single-report", {"file": facts["nodes"][0]["file"]},
                    "gather one report per node (see --help) and pass them all: %s" % GATHER)]


def named_files(nodes, members):
    return {"count": len(members), "files": [bounds.text(nodes[i]["file"]) for i in members[:bounds.HOSTS_NAMED]]}


def rule_schema(facts, options):
    """Reports of different schema majors name their facts differently: comparing them says nothing."""
    majors = {}
    for index, item in enumerate(facts["nodes"]):
        majors.setdefault(item["schema_version"].split(".")[0], []).append(index)
    if len(majors) < 2:
        return []
    listed = sorted(majors.items(), key=lambda pair: -len(pair[1]))
    evidence = {"schema_majors": dict((bounds.text(major), named_files(facts["nodes"], members))
                                      for major, members in listed[:GROUPS_LISTED])}
    if len(listed) > GROUPS_LISTED:
        evidence["majors_not_listed"] = len(listed) - GROUPS_LISTED
    return [finding("cluster-schema-mismatch", evidence,
                    "gather every report again with one copy of the checker, on every node: %s" % GATHER)]


def rule_stack_drift(facts, options):
    """Versions and builds that differ: one finding per fact, with the commands that make the others match."""
    nodes, found = facts["nodes"], []
    for name, finding_id, grouped in differing(facts, ("cluster-stack-drift", "cluster-cudnn-drift")):
        others = [index for group in grouped[1:] for index in group["members"]]
        found.append(finding(finding_id, drift_evidence(name, nodes, grouped),
                             install_fix(name, grouped[0]["members"], others, nodes)))
    return found


def rule_launch_disagrees(facts, options):
    return [finding("cluster-launch-disagrees", drift_evidence(name, facts["nodes"], grouped),
                    launch_fix(name, grouped, facts["nodes"]))
            for name, _, grouped in differing(facts, ("cluster-launch-disagrees",))]


def rule_incomplete(facts, options):
    missing = dict((name, bounds.hosts(facts["nodes"], members)) for name, members in facts["missing"].items()
                   if members)
    if not missing:
        return []
    return [finding("cluster-report-incomplete", {"missing": missing},
                    "gather full reports on those hosts (not --static-only): %s" % GATHER)]


def ranked(facts):
    return [(index, item) for index, item in enumerate(facts["nodes"]) if item["rank"] is not None]


def rule_rank_duplicate(facts, options):
    by_rank = {}
    for index, item in ranked(facts):
        by_rank.setdefault((item["rank_variable"], item["rank"]), []).append(index)
    duplicates = sorted((key, members) for key, members in by_rank.items() if len(members) > 1)
    if not duplicates:
        return []
    evidence = {"duplicates": dict(("%s=%d" % key, bounds.hosts(facts["nodes"], members))
                                   for key, members in duplicates[:GROUPS_LISTED]),
                "ranks_duplicated": len(duplicates)}
    return [finding("cluster-rank-duplicate", evidence,
                    "give every process its own rank: let the launcher set it (torchrun, or RANK=$SLURM_PROCID under "
                    "srun) instead of exporting RANK in the job script")]


def rule_rank_missing(facts, options):
    ranks = ranked(facts)
    worlds = set(item["world_size"] for _, item in ranks if item["world_size"] is not None)
    if len(worlds) != 1:
        return []  # no world size, or several (cluster-launch-disagrees names them)
    world = worlds.pop()
    variable = ranks[0][1]["rank_variable"]
    have = set(item["rank"] for _, item in ranks if item["rank_variable"] == variable)
    # The world size comes from a report: count the missing ranks without walking them all.
    missing_count = max(world, 0) - len([r for r in have if 0 <= r < world])
    if not missing_count:
        return []
    missing = []
    rank = 0
    while len(missing) < min(RANKS_LISTED, missing_count):
        if rank not in have:
            missing.append(rank)
        rank += 1
    return [finding("cluster-rank-missing", {
        "rank_variable": variable, "world_size": world, "missing": missing, "missing_count": missing_count,
        "reports": len(facts["nodes"])},
        "start world_size processes in all (nodes x processes per node = %d), or gather one report per rank; "
        "WORLD_SIZE=%d waits for ranks that never start" % (world, world))]


def rule_socket_interfaces(facts, options):
    nodes, missing = facts["nodes"], []
    for index, item in enumerate(nodes):
        if item["interfaces"] is None:
            continue
        absent = {}
        for name in SOCKET_IFNAME_VARIABLES:
            raw = (item["launch"].get(name) or {}).get("raw")
            if raw is not None:
                names = absent_interfaces(name, raw, item["interfaces"])
                if names:
                    absent[name] = {"value": bounds.text(raw), "absent": bounds.items(names)}
        if absent:
            missing.append((index, absent))
    if not missing:
        return []
    evidence = {"hosts": dict((nodes[index]["label"], {"variables": absent, "interfaces": bounds.items(
        nodes[index]["interfaces"])}) for index, absent in missing[:bounds.HOSTS_NAMED]), "count": len(missing)}
    return [finding("cluster-socket-ifname-missing", evidence,
                    "set the variable per node to an interface that node has (the one that routes to MASTER_ADDR: "
                    "%s), e.g. in the srun or torchrun command line" % command.line(
                        "ip", "route", "get", command.Variable("MASTER_ADDR")))]


FIXES_QUOTED = 2  # a node's own fix text shown per launch error id


def rule_node_launch_errors(facts, options):
    """Launch errors a node's own checker found (loopback names, missing interfaces, bad ranks) fail the job
    as surely as drift between nodes: repeated here, hosts grouped by finding id."""
    nodes, by_id = facts["nodes"], {}
    for index, item in enumerate(nodes):
        for error in item["launch_errors"]:
            if LAUNCH_ID.match(error["id"]):
                by_id.setdefault(error["id"], {}).setdefault(index, error["fix"])
    if not by_id:
        return []
    listed = sorted(by_id.items(), key=lambda pair: -len(pair[1]))
    evidence = {"hosts": {}, "fixes": {}}
    for finding_id, fixes in listed[:GROUPS_LISTED]:
        members = list(fixes)
        evidence["hosts"][finding_id] = bounds.hosts(nodes, members)
        evidence["fixes"][finding_id] = dict((nodes[i]["label"], bounds.text(fixes[i]))
                                             for i in members[:FIXES_QUOTED] if fixes[i] is not None)
    if len(listed) > GROUPS_LISTED:
        evidence["ids_not_listed"] = len(listed) - GROUPS_LISTED
    return [finding("cluster-node-launch-error", evidence,
                    "on each host named, run the checker and apply the fix its own report gives: %s; then gather "
                    "that report again. What the id means: %s" % (
                        CHECKER, script_command(CHECKER_SCRIPT, "--explain", listed[0][0])))]


def rule_cpu(facts, options):
    nodes = facts["nodes"]
    grouped = [g for g in facts["compared"]["usable cores"] if g["value"]]  # a count of 0 or unknown is no count
    if len(grouped) < 2:
        return []
    per_process = {}
    for index, item in enumerate(nodes):
        if item["cores"]:
            key = (item["cores"], item["local_processes"])
            per_process.setdefault(key, []).append(index)
    shares = sorted(((max(cores // local, 1), cores, local), members)
                    for (cores, local), members in per_process.items())
    shown, rest = bounds.groups(nodes, grouped)
    evidence = {"groups": shown, "per_process": [dict(bounds.hosts(nodes, members), usable_cores=cores,
                                                      local_processes=local, cores_per_process=share)
                                                 for (share, cores, local), members in shares[:GROUPS_LISTED]]}
    if rest:
        evidence["groups_not_listed"] = rest
    return [finding("cluster-cpu-count-differs", evidence,
                    "expected on mixed nodes; for equal per-rank speed set the same thread and loader worker "
                    "counts everywhere, e.g. %s and NeighborLoader(num_workers=...) sized for the smallest node"
                    % command.line("OMP_NUM_THREADS=%d" % shares[0][0][0]))]


TOO_LARGE_NAMED = 16  # files named in the finding; the count says how many more


def rule_too_large(facts, options):
    too_large = facts["too_large"]
    if not too_large:
        return []
    return [finding("cluster-report-too-large", {"files": [bounds.text(path) for path in too_large[:TOO_LARGE_NAMED]],
                                                 "count": len(too_large), "limit_bytes": REPORT_MAX_BYTES},
                    "gather it again on that node with the default (compact) detail, no --full: %s" % GATHER)]


RULES = (rule_single_report, rule_schema, rule_stack_drift, rule_launch_disagrees, rule_incomplete,
         rule_rank_duplicate, rule_rank_missing, rule_socket_interfaces, rule_node_launch_errors, rule_cpu,
         rule_too_large)
