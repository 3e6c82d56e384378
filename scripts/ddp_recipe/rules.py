"""The recipe's findings, decided on the job's record (what the recipe kept of its job) and the facts gather
measured around it: no sampling backend, a /dev/shm too small, ranks that failed."""

import os

from diagnostics_core import command
from . import shm
from .findings import GATE, TOOL, backend_check_command, recipe_command

RANK_FAILED_FIX = ("read the rank's traceback on stderr; a peer that failed first makes the others fail with "
                   "'Connection closed by peer'")


def rule_no_sampling_backend(facts, options):
    job = facts.get("job") or {}
    if "sampling_backend" not in job or job["sampling_backend"] is not None:
        return []
    return [TOOL.finding("neighbor-sampling-unavailable", {"WITH_PYG_LIB": False, "WITH_TORCH_SPARSE": False,
                                                           "python": facts.get("python")},
                         fix=backend_check_command())]


def failures(facts):
    """[(failure record, its /dev/shm cause or None)] of the job, first failure first."""
    records = (facts.get("job") or {}).get("failed_ranks") or []
    return [(record, shm.cause(record)) for record in records]


def rule_shm_too_small(facts, options):
    short = [dict(cause, rank=record.get("rank"), pid=record.get("pid"), **(
        {"while": record["while"]} if "while" in record else {})) for record, cause in failures(facts) if cause]
    if not short:
        return []
    job = facts["job"]
    graph_bytes, source = (job.get("graph") or {}).get("tensor_bytes"), "tensors"
    if graph_bytes is None:  # the graph was loaded in the ranks only: its file's size stands in
        graph_bytes, source = facts.get("data_file_bytes"), "file"
    ranks = job.get("world_size") or 1
    copies = shm.graph_copies(job.get("launcher"), options.load_per_rank, options.num_workers, ranks)
    needed = graph_bytes * max(copies, 1) if graph_bytes else None
    size = shm.suggested_size(needed or 0)
    evidence = {"dev_shm": facts.get("shm"), "failures": short, "launcher": job.get("launcher"), "ranks": ranks,
                "num_workers": options.num_workers, "load_per_rank": options.load_per_rank,
                "graph_bytes": graph_bytes, "graph_bytes_from": source if graph_bytes else None,
                "graph_copies_in_shm": copies, "needed_bytes_at_least": needed, "suggested_shm_size": size}
    return [TOOL.finding("ddp-shm-too-small", evidence, fix=shm_fix(job, options, facts.get("argv") or [], size))]


def shm_fix(job, options, argv, size):
    """Two ways out: a bigger /dev/shm, or nothing in it (each rank loads its graph, no loader workers)."""
    bigger = ("give the job a bigger /dev/shm: docker run --shm-size=%s ... (or --ipc=host; Kubernetes: an "
              "emptyDir of medium Memory mounted at /dev/shm)" % size)
    if options.num_workers == 0 and (options.load_per_rank or job.get("launcher") != "spawn"):
        return bigger  # nothing of the recipe's own went through /dev/shm: only more room helps
    data = ["--data", os.path.abspath(options.data)] if options.data else []
    if job.get("launcher") == "spawn":
        words = rerun_words(argv, dict.fromkeys(("--data", "--num-workers", "--load-per-rank")))
        return "%s; or put nothing in /dev/shm, each rank loading its graph without loader workers: %s" % (
            bigger, recipe_command(*(words + data + ["--load-per-rank", "--num-workers", "0"])))
    words = rerun_words(argv, dict.fromkeys(("--data", "--num-workers")))
    return ("%s; or put nothing in /dev/shm (each rank already loads its graph): relaunch with these recipe "
            "arguments: %s" % (bigger, command.line(*(words + data + ["--num-workers", "0"]))))


TAKES_VALUE = ("--data", "--num-workers")


def rerun_words(argv, dropped):
    """The user's words without the flags in `dropped` (and their values), for a command that sets them anew."""
    words, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word in dropped:
            skip = word in TAKES_VALUE
        elif not word.split("=", 1)[0] in dropped:
            words.append(word)
    return words


def rule_rank_failed(facts, options):
    return [TOOL.finding("ddp-rank-failed", record, fix=RANK_FAILED_FIX) for record, cause in failures(facts)
            if cause is None]


RULES = (rule_no_sampling_backend, rule_shm_too_small, rule_rank_failed)


def gates(facts, findings, options):
    return {GATE: {"passed": (facts.get("job") or {}).get("ok") is True}}
