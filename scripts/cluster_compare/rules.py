"""Facts compared across reports, grouped by value, and the rules: groups and reports -> findings."""

import collections
import json
import os
import re

from diagnostics_core import wheels
from diagnostics_core.netenv import SOCKET_IFNAME_VARIABLES, absent_interfaces
from diagnostics_core.text import quote
from .findings import CHECKER, GATHER, finding
from .reports import MISSING, Report, describe_reports, launch_entry, launch_value


# Facts compared across reports: name -> (where in the report, finding id).
# A path is a sequence of keys; a value of None means the report lacks it.
STACK_FACTS = (
    ("python", ("python", "version"), "cluster-stack-drift"),
    ("torch", ("torch", "version"), "cluster-stack-drift"),
    ("torch CUDA", ("torch", "cuda"), "cluster-stack-drift"),
    ("NCCL", ("cuda", "nccl_version"), "cluster-stack-drift"),
    ("cuDNN", ("cuda", "cudnn_version"), "cluster-cudnn-drift"),
    ("torch_geometric", ("pyg", "version"), "cluster-stack-drift"),
    ("neighbor backend", ("sampling", "neighbor_backend"), "cluster-stack-drift"),
)


LAUNCH_AGREED = ("WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def extension_value(report, module):
    status = report.get("extensions", module, "status")
    if status is None:
        return MISSING
    version = report.get("extensions", module, "version")
    return status + (" " + version if status == "ok" and version else "")


def usable_cores(report):
    count = report.get("cpu", "affinity", "count")
    if count:
        return count
    return report.get("cpu", "logical_cores")


def compared_facts(report):
    """name -> (value, finding id) for everything compared; MISSING = not in this report."""
    facts = collections.OrderedDict()
    for name, path, finding_id in STACK_FACTS:
        value = report.get(*path, absent=MISSING)
        if name == "python" and value and value is not MISSING:
            value = ".".join(value.split(".")[:2])  # patch releases interoperate
        facts[name] = (value, finding_id)
    for module in report.keys("extensions") or [m for m, _ in wheels.EXTENSIONS]:
        facts[module] = (extension_value(report, module), "cluster-stack-drift")
    for name in LAUNCH_AGREED:
        # None: not set on that node (shown as null, never as a value to export)
        facts[name] = (report.get("environment", "launch", name, "raw") if launch_entry(report, name) else None,
                       "cluster-launch-disagrees")
    facts["usable cores"] = (usable_cores(report), "cluster-cpu-count-differs")
    return facts


def group(entries, values):
    """[{value, hosts}] with the largest group first (ties: the group of the first report)."""
    groups = collections.OrderedDict()
    for entry, value in zip(entries, values):
        groups.setdefault(json.dumps(value), {"value": value, "hosts": []})["hosts"].append(entry["label"])
    return sorted(groups.values(), key=lambda g: -len(g["hosts"]))


# Where each compared module's file is recorded in a report.
MODULE_FILES = {"torch": ("torch", "file"), "torch_geometric": ("pyg", "file")}


BUILD_TAG = re.compile(r"^[0-9][0-9.]*\+[a-z]+[0-9.]*$")  # torch's release+build (2.13.0+cpu), shell-safe
PIN_VERSION = re.compile(r"^[0-9][0-9A-Za-z.+!_-]{0,63}$")  # what may follow == in a printed pip line


INSTALLED_STATES = ("import-error", "blocked")  # installed but not importable: removable


def module_file(report, name):
    if name in MODULE_FILES:
        return report.get(*MODULE_FILES[name])
    return report.get("extensions", name, "file")


def extension_install(python, package, version, model):
    """The line that installs `package` as the model host has it: a wheel only where the checker's
    wheel table says PyG's index has one for that torch, else the source build (never a guessed wheel)."""
    model = model if isinstance(model, Report) else Report("<model report>", model)
    model_python = model.get("python", "version")
    python_version = wheels.parse_version(model_python)[:2] if isinstance(model_python, str) else (3, 11)
    minor, variant, platform_name = (model.get("install", key) for key in ("torch_minor", "variant", "platform"))
    index_url = model.get("install", "index_url")
    if minor and variant and platform_name and index_url:
        if wheels.wheel_status(package, minor, variant, platform_name, python_version)["wheel"]:
            return "%s -m pip install --only-binary=:all: %s -f %s" % (
                python, quote("%s==%s" % (package, version)), quote(index_url))
    if package in dict(wheels.SOURCE_BUILDS):
        return "%s  # no wheel known for torch %s+%s: a source build" % (
            wheels.source_build_command(python, [package]), minor, variant)
    return "%s (its findings give that node's install command)" % CHECKER


def rerun_checker(label):
    return "on %s: %s --require-neighbor-backend (a full report, not --static-only; its findings give that " \
           "node's install command)" % (label, GATHER.split(" >")[0])


def extension_fix(label, python, package, value, host_value, model):
    """Make one host's extension match the reference state, or say why no command can."""
    if isinstance(value, str) and value.startswith("ok ") and PIN_VERSION.match(value[3:]):
        return "on %s: %s" % (label, extension_install(python, package, value[3:], model))
    installed = isinstance(host_value, str) and (host_value.startswith("ok") or host_value in INSTALLED_STATES)
    if value == "not-installed" and installed:
        return "on %s: %s -m pip uninstall -y %s" % (label, python, quote(package))
    return rerun_checker(label)  # a state that is no version to match (not-run, not-probed, ...)


def definite(name, value):
    """Whether `value` is a state a fix can make another host match (not unknown or unset)."""
    if name in wheels.EXTENSION_DIST:
        return value == "not-installed" or (isinstance(value, str) and value.startswith("ok "))
    return isinstance(value, str) and bool(PIN_VERSION.match(value))


def install_fix(name, reference, others, entries, reports, host_values):
    """What makes the differing hosts match the largest group (run on those hosts)."""
    value = reference["value"]
    by_label = dict((e["label"], r) for e, r in zip(entries, reports))
    model = by_label[reference["hosts"][0]]
    fixes = []
    for label in others:
        report = by_label[label]
        python = quote(report.get("python", "executable") or "python3")
        prefix, path = report.get("python", "prefix"), module_file(report, name)
        if path and prefix and not path.startswith(prefix.rstrip("/") + "/"):
            # A copy outside the interpreter's own prefix shadows the installed one.
            fixes.append("on %s: %s is imported from %s, outside %s: remove that folder from PYTHONPATH"
                         % (label, name, quote(os.path.dirname(os.path.dirname(path))), quote(prefix)))
        elif name in wheels.EXTENSION_DIST:
            fixes.append(extension_fix(label, python, wheels.EXTENSION_DIST[name], value, host_values[label], model))
        elif name == "torch" and definite(name, value) and BUILD_TAG.match(value):
            # A local build tag (+cpu, +cu130) lives on PyTorch's index for that build, not on PyPI.
            release, variant = value.split("+", 1)
            fixes.append("on %s: %s" % (label, wheels.torch_install_command(
                release, variant, python, model.get("install", "platform") or "linux-x86_64")))
        elif name in ("torch", "torch_geometric") and definite(name, value):
            fixes.append("on %s: %s -m pip install %s" % (label, python, quote("%s==%s" % (name, value))))
        else:
            fixes.append(rerun_checker(label))
    if definite(name, value):
        return "; ".join(fixes) + "  # to match %s (%s = %s)" % (reference["hosts"][0], name, value)
    return "; ".join(fixes) + "  # the largest group's %s is not a state to match: compare full reports" % name


def launch_fix(name, grouped, valid):
    """export the value of the largest group whose value the checker parsed; never a placeholder
    (unset) or a value the checker rejected; the value is quoted, so it cannot run as shell code."""
    if grouped[0]["value"] is None:
        set_on = [h for g in grouped if g["value"] is not None for h in g["hosts"]]
        return ("%d of %d nodes do not set %s: unset it on %s, or export one value on every node in the job "
                "script (one job script for all nodes)" % (len(grouped[0]["hosts"]), len(grouped[0]["hosts"])
                                                           + len(set_on), name, ", ".join(set_on)))
    usable = [g for g in grouped if g["value"] in valid]
    if not usable:
        return ("no node sets %s to a value the checker accepts (see each report's environment.launch.%s.error): "
                "export one valid value on every node in the job script" % (name, name))
    fix = "export %s=%s on every node before the launch (one job script for all nodes)" % (
        name, quote(usable[0]["value"]))
    unset = [h for g in grouped if g["value"] is None for h in g["hosts"]]
    if unset:
        fix += "; it is unset on %s" % ", ".join(unset)
    return fix


def rule_drift(entries, reports, groups):
    found, incomplete = [], {}
    for name, per_report in groups.items():
        values, finding_id = [value for value, _ in per_report], per_report[0][1]
        missing = [e["label"] for e, v in zip(entries, values) if v is MISSING]
        if missing:
            incomplete[name] = missing
        if finding_id == "cluster-cpu-count-differs":
            continue
        present = [(e, v) for e, v in zip(entries, values) if v is not MISSING]
        grouped = group([e for e, _ in present], [v for _, v in present])
        if len(grouped) < 2:
            continue
        reference, others = grouped[0], [h for g in grouped[1:] for h in g["hosts"]]
        evidence = {"fact": name, "groups": grouped}
        files = dict((e["label"], module_file(r, name)) for e, r in zip(entries, reports) if module_file(r, name))
        if files:
            evidence["files"] = files
        if finding_id == "cluster-launch-disagrees":
            valid = set(r.get("environment", "launch", name, "raw") for r in reports
                        if launch_entry(r, name) and r.get("environment", "launch", name, "error") is None)
            fix = launch_fix(name, grouped, valid)
        else:
            fix = install_fix(name, reference, others, entries, reports, dict((e["label"], v) for e, v in present))
        found.append(finding(finding_id, evidence, fix))
    if incomplete:
        found.append(finding("cluster-report-incomplete", {"missing": incomplete},
                             "gather full reports on those hosts (not --static-only): %s" % GATHER))
    return found


def rule_schema(entries):
    """Reports of different schema majors name their facts differently: comparing them says nothing."""
    majors = collections.OrderedDict()
    for entry in entries:
        majors.setdefault(entry["schema_version"].split(".")[0], []).append(entry["file"])
    if len(majors) < 2:
        return []
    return [finding("cluster-schema-mismatch", {"schema_majors": majors},
                    "gather every report again with one copy of the checker, on every node: %s" % GATHER)]


def rule_ranks(entries):
    ranked = [e for e in entries if e["rank"] is not None]
    if not ranked:
        return []
    found = []
    by_rank = collections.defaultdict(list)
    for entry in ranked:
        by_rank[(entry["rank_variable"], entry["rank"])].append(entry["label"])
    duplicates = {"%s=%s" % key: labels for key, labels in sorted(by_rank.items()) if len(labels) > 1}
    if duplicates:
        found.append(finding("cluster-rank-duplicate", {"duplicates": duplicates},
                             "give every process its own rank: let the launcher set it (torchrun, or "
                             "RANK=$SLURM_PROCID under srun) instead of exporting RANK in the job script"))
    worlds = set(e["world_size"] for e in ranked if e["world_size"] is not None)
    if len(worlds) == 1:
        world = worlds.pop()
        variable = ranked[0]["rank_variable"]
        have = set(e["rank"] for e in ranked if e["rank_variable"] == variable)
        # WORLD_SIZE comes from the report: count the missing ranks without listing them all.
        missing_count = max(world, 0) - len([r for r in have if 0 <= r < world])
        missing = []
        for rank in range(max(world, 0)):
            if len(missing) == 64:
                break
            if rank not in have:
                missing.append(rank)
        if missing_count:
            found.append(finding("cluster-rank-missing", {
                "rank_variable": variable, "world_size": world, "missing": missing,
                "missing_count": missing_count, "reports": len(entries)},
                "start world_size processes in all (nodes x processes per node = %d), or gather one report "
                "per rank; WORLD_SIZE=%d waits for ranks that never start" % (world, world)))
    return found


def rule_interfaces(entries, reports):
    missing = {}
    for entry, report in zip(entries, reports):
        interfaces = report.get("environment", "network_interfaces")
        if interfaces is None:
            continue
        for name in SOCKET_IFNAME_VARIABLES:
            raw = report.get("environment", "launch", name, "raw")
            if raw is not None:
                absent = absent_interfaces(name, raw, interfaces)
                if absent:
                    missing.setdefault(entry["label"], {})[name] = {
                        "value": raw, "absent": absent, "interfaces": interfaces}
    if not missing:
        return []
    return [finding("cluster-socket-ifname-missing", {"hosts": missing},
                    "set the variable per node to an interface that node has (the one that routes to "
                    "MASTER_ADDR: ip route get $MASTER_ADDR), e.g. in the srun/torchrun command line")]


def rule_node_launch_errors(entries, reports):
    """Launch errors a node's own checker found (loopback names, missing interfaces, bad ranks) fail the
    job as surely as drift between nodes: repeated here, hosts grouped by finding id."""
    hosts, fixes = {}, {}
    for entry, report in zip(entries, reports):
        for item in report.get("findings") or []:
            if not isinstance(item, dict) or item.get("severity") != "error":
                continue
            finding_id, fix = item.get("id"), item.get("fix")
            if isinstance(finding_id, str) and finding_id.startswith("launch-"):
                hosts.setdefault(finding_id, []).append(entry["label"])
                if isinstance(fix, str):
                    fixes.setdefault(finding_id, {})[entry["label"]] = fix
    if not hosts:
        return []
    return [finding("cluster-node-launch-error", {"hosts": hosts, "fixes": fixes},
                    "on each host named, run that host's fix (evidence.fixes), then gather its report again; "
                    "%s --explain ID says what each id means" % CHECKER)]


def rule_cpu(entries, reports):
    values = [usable_cores(r) for r in reports]
    present = [(e, v) for e, v in zip(entries, values) if v is not None]
    grouped = group([e for e, _ in present], [v for _, v in present])
    if len(grouped) < 2:
        return []
    per_rank = []
    for entry, report in zip(entries, reports):
        local = launch_value(report, "LOCAL_WORLD_SIZE")
        local = local if isinstance(local, int) and local > 0 else 1
        cores = usable_cores(report)
        if cores:
            per_rank.append({"host": entry["label"], "usable_cores": cores, "local_processes": local,
                             "cores_per_process": max(cores // local, 1)})
    return [finding("cluster-cpu-count-differs", {"groups": grouped, "per_process": per_rank},
                    "expected on mixed nodes; for equal per-rank speed set the same thread and loader worker "
                    "counts everywhere, e.g. OMP_NUM_THREADS=%d and NeighborLoader(num_workers=...) sized for "
                    "the smallest node" % min(p["cores_per_process"] for p in per_rank))]


def compare(paths, reports):
    entries = describe_reports(paths, reports)
    per_fact = collections.OrderedDict()
    for report in reports:
        for name, value in compared_facts(report).items():
            per_fact.setdefault(name, []).append(value)
    # A fact some reports do not have at all is still compared among the rest.
    groups = collections.OrderedDict((name, values) for name, values in per_fact.items()
                                     if len(values) == len(reports))
    findings = []
    if len(reports) == 1:
        findings.append(finding("cluster-single-report", {"file": paths[0]},
                                "gather one report per node (see --help) and pass them all: %s" % GATHER))
    findings += rule_schema(entries)
    findings += rule_drift(entries, reports, groups)
    findings += rule_ranks(entries)
    findings += rule_interfaces(entries, reports)
    findings += rule_node_launch_errors(entries, reports)
    findings += rule_cpu(entries, reports)
    summary = collections.OrderedDict()
    for name, values in groups.items():
        present = [(e, v) for e, (v, _) in zip(entries, values) if v is not MISSING]
        summary[name] = group([e for e, _ in present], [v for _, v in present])
    return entries, findings, summary
