"""Signatures of the known launch failures in a job's log, each with the first line that shows it.
Patterns only (re over bounded lines); nothing in the log is run or trusted as a command."""

import re
import time

from .reading import LINE_MAX_CHARS

SIGNATURES = (
    ("doctor-log-store-lost", re.compile(
        r"RendezvousConnectionError|The connection to the C10d store has failed|"
        r"Did the remote server shutdown or crash\?|"
        # the tested torch's agent whose rendezvous closed under it, seen in the same double launch on a loaded machine
        r"'NoneType' object has no attribute 'is_failed'")),
    ("doctor-log-loopback", re.compile(
        r"remote=\[(::ffff:)?127\.0\.1\.1\]|connectFullMesh failed.*127\.|127\.0\.1\.1.*[Cc]onnection refused")),
    ("doctor-log-timeout", re.compile(
        r"RendezvousTimeoutError|Timed out after \d+ seconds waiting for clients|DistStoreError: .*[Tt]imed? ?out|"
        r"wait timeout after \d+ ?ms|Watchdog caught collective operation timeout|CANCELLED AT .* DUE TO TIME LIMIT")),
    ("doctor-log-address-in-use", re.compile(
        r"[Aa]ddress already in use|EADDRINUSE|errno: 98\b|The server socket has failed to (listen|bind)")),
    # NCCL 2.30 reworded it (2.30.7: "Multiple Ranks are using the same GPU/Partition"): its family, any case
    ("doctor-log-duplicate-device", re.compile(r"Duplicate GPU detected|(?i:multiple ranks .{0,24}using the same GPU)")),
)
ANY = re.compile("|".join("(?:%s)" % pattern.pattern for _, pattern in SIGNATURES) + r"|torch/distributed/|srun: |slurm")
AGENT_LINE = re.compile(r"^[IWEF]\d{4} [\d:.]+ +(\d+) torch/distributed/(?:run\.py|elastic/|launcher/)")
SRUN_TASK = re.compile(r"srun: error: (\S+): tasks? ([\d,-]+): (Exited with exit code \d+|Killed|Terminated)")
SRUN_IGNORED = re.compile(r"srun: Warning: can't honor --ntasks-per-node")
VERSION_LINE = re.compile(r"^slurm(?:-wlm)? (\d{2}\.\d{2}\.\d+)\s*$")
EVIDENCE_CHARS = 500


def task_count(spec):
    """srun's task list "0-1,3" -> 3."""
    total = 0
    for part in spec.split(","):
        low, _, high = part.partition("-")
        if low.isdigit() and (not high or high.isdigit()):
            total += (int(high) - int(low) + 1) if high else 1
    return total


def scan(name, log, deadline):
    """-> {"signatures": {id: {"line", "text", "count"}}, "agents": pids, "srun_tasks": [...], "version",
    "partial": True when the deadline came first}."""
    found, agents, tasks, nodes, version, ignored = {}, set(), [], set(), None, None
    partial = False
    windows = [("head", log["head"]), ("tail", log["tail"])]
    for window, text in windows:
        for number, line in enumerate(text.splitlines(), 1):
            if number % 5000 == 0 and time.time() > deadline:
                partial = True
                break
            line = line[:LINE_MAX_CHARS]
            if not ANY.search(line):
                continue
            where = number if window == "head" else "tail+%d" % number
            for finding_id, pattern in SIGNATURES:
                if pattern.search(line):
                    entry = found.setdefault(finding_id, {"file": name, "line": where, "text": line[:EVIDENCE_CHARS],
                                                          "count": 0})
                    entry["count"] += 1
            match = AGENT_LINE.match(line)
            if match:
                agents.add(int(match.group(1)))
            match = SRUN_TASK.search(line)
            if match and len(tasks) < 64:
                tasks.append({"node": match.group(1), "tasks": match.group(2), "count": task_count(match.group(2)),
                              "line": where, "text": line[:EVIDENCE_CHARS]})
                nodes.add(match.group(1))
            match = VERSION_LINE.match(line.strip())
            if match and version is None:
                version = match.group(1)
            if ignored is None and SRUN_IGNORED.search(line):
                ignored = {"file": name, "line": where, "text": line[:EVIDENCE_CHARS]}
    return {"file": name, "signatures": found, "agent_pids": sorted(agents)[:64], "agents": len(agents),
            "srun_failed_tasks": tasks, "failed_nodes": sorted(nodes), "slurm_version": version,
            "ntasks_per_node_ignored": ignored, "partial": partial}
