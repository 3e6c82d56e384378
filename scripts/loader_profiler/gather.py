"""One profiler run's measuring part: the sandboxed coordinator child measures within the run's bounds and
publishes what it learns as it goes (into run.facts, so that an interrupted run still shows it); then the
recommendation is worked out here from what it published."""

import json
import os
import sys
import time

from diagnostics_core import sandbox
from . import CHILD_FLAG
from .request import request_fact, request_spec

CHILD_START_S = 0.3  # the child's own interpreter start, before it can report anything


def gather(run):
    options, facts = run.options, run.facts
    spec = request_spec(options)
    facts["request"] = request_fact(options)
    run.scratch()  # every child's temporary files (workers' pymp-*, PyG's templates) go with the run
    profile(run, spec)
    from .advice import recommendation
    graph = facts.get("graph") or {}
    facts["recommendation"] = recommendation(
        facts.get("configs") or [], dict(spec, hetero=graph.get("kind") == "hetero",
                                         batches_per_epoch=graph.get("batches_per_epoch")),
        facts.get("blocks"), (facts.get("plan") or {}).get("baseline"))


def profile(run, spec):
    """Run the coordinator child; what it publishes fills run.facts as it arrives, then how it ended."""
    options, facts = run.options, run.facts
    deadline = run.by("child")
    if deadline - time.time() < CHILD_START_S:
        facts.update(configs=[], child={"killed_for": "deadline", "started": False})
        return
    child_options = {"spec": spec, "ranks": options.ranks_per_node, "max_workers": options.max_workers,
                     "current": options.current,
                     "until": {"measure": run.by("measure"), "ranks": run.by("ranks"), "child": deadline}}
    entry = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "profile_loader.py")
    command = [sys.executable, "-B", entry, CHILD_FLAG, json.dumps(child_options)]
    run.say("profiling for up to %.0f s (--budget)" % options.budget)
    _, done, running, outcome = sandbox.run_call_child(command, sandbox.child_environment(), deadline,
                                                        lambda record: progress(run, record))
    facts.setdefault("configs", [])
    child = sandbox.call_child_summary(outcome)
    child.update(killed_for=outcome.killed_for, stderr_tail=outcome.stderr_tail[-3000:], running=running)
    facts["child"] = child
    if done is None and not facts.get("stopped"):
        facts.update(unfinished(outcome, running))


def unfinished(outcome, running):
    """The child ended without "done": a deadline, a call past its bound, a crash, or a mystery."""
    if outcome.killed_for == "deadline":
        return {}  # the budget-short finding explains it
    if outcome.killed_for == "call-timeout":
        return {"stopped": {"how": "hung", "during": running["what"], "rank": None, "exitcode": None,
                            "signal": None, "bound_s": running["timeout_s"]}}
    if outcome.returncode is not None and outcome.returncode < 0:
        return {"stopped": {"how": "crashed", "during": (running or {}).get("what") or "the coordinator",
                            "rank": None, "exitcode": outcome.returncode, "signal": outcome.signal()}}
    raise RuntimeError("the profiling child exited (code %s) without a result; its stderr ends: %s"
                       % (outcome.returncode, outcome.stderr_tail[-1500:]))


def progress(run, record):
    """Keep what the child publishes in run.facts, and say one stderr line per thing learnt."""
    event, key, value = record.get("event"), record.get("key"), record.get("value")
    if event == "facts":
        run.facts[key] = value
    elif event == "append":
        run.facts.setdefault(key, []).append(value)
    line = progress_line(event, key, value) if event != "progress" else record.get("line", "")
    if line is not None:
        run.say(line)


def progress_line(event, key, value):
    """The stderr line for a fact the child published, or None."""
    if not isinstance(value, dict):
        return None
    if event == "append" and key == "blocks":
        return "  %s round %d: %.1f steps/s (epoch %.1f), first batch %.2f s, other processes %s cores" % (
            value.get("config"), value.get("round", 0) + 1, value.get("steps_per_s", 0),
            value.get("epoch_steps_per_s", 0), value.get("first_batch_s", 0),
            "?" if value.get("other_cpu_cores") is None else "%.1f" % value["other_cpu_cores"])
    if event == "append" and key == "configs":
        if value.get("status") != "ok":
            return "%s: %s" % (value.get("name"), value.get("status"))
        return "%s: %.1f steps/s (range %.1f-%.1f), %.0f seeds/s, first batch %.2f s, peak RSS %.0f MB" % (
            value["name"], value["batches_per_s"], value["batches_per_s_range"][0], value["batches_per_s_range"][1],
            value["seeds_per_s"], value["first_batch_s"], value["peak_rss_mb"])
    if event == "facts" and key == "graph":
        return "graph loaded: %s nodes, %s edges, %s seeds in %s batches per epoch" % (
            value.get("num_nodes"), value.get("num_edges"), value.get("seeds"), value.get("batches_per_epoch"))
    return None
