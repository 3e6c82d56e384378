"""One profiler run: the sandboxed child measures within the budget, then rules, recommendation
and rendering run here on what it published."""

import json
import os
import sys
import time

from diagnostics_core import cli as shared_cli
from diagnostics_core import sandbox
from diagnostics_core.interrupt import Interrupted, StopSignals
from diagnostics_core.markdown import terminal_line
from diagnostics_core.text import describe_exception
from . import CHILD_FLAG

RENDER_RESERVE_S = 0.5  # of the budget, kept for rules and rendering after the child has ended
CHILD_START_S = 0.3  # the child's own interpreter start, before it can report anything


def say(text):
    sys.stderr.write("profile_loader: %s\n" % terminal_line(text))
    sys.stderr.flush()


def request_spec(options):
    return {"synthetic": options.synthetic, "data": os.path.abspath(options.data) if options.data else None,
            "store": options.store, "num_neighbors": options.num_neighbors, "batch_size": options.batch_size,
            "shuffle": not options.no_shuffle, "link": options.link, "input_nodes": options.input_nodes,
            "input_edges": options.input_edges, "loop": loop_spec(options), "epochs": options.epochs}


def loop_spec(options):
    """What runs per batch: the user's step, a built-in step on the user's model, the stand-in, or nothing."""
    if options.loader_only:
        return {"kind": "loader-only"}
    if options.step:
        return {"kind": "step", "reference": options.step, "cwd": os.getcwd()}
    if options.model:
        return {"kind": "model", "reference": options.model, "cwd": os.getcwd()}
    stand_in = options.stand_in or {"conv": "sage", "layers": len(options.num_neighbors), "hidden": 64}
    return dict(stand_in, kind="stand-in")


def stage_bounds(budget, started):
    """--budget (seconds) and the run's start -> the run's bounds, here and nowhere else: the measuring
    child's deadline (absolute; rendering keeps RENDER_RESERVE_S, and the child shares out the rest), and
    the longer budgets the findings' fixes name (a short budget; a machine too busy to tell)."""
    return {"child_deadline": started + budget - RENDER_RESERVE_S,
            "retry_budget_s": int(max(budget * 2, 30)), "quiet_retry_budget_s": int(max(budget * 2, 60))}


def run(options, started):
    from .render import output, render
    options.spec = request_spec(options)
    options.ranks = options.ranks_per_node
    options.bounds = stage_bounds(options.budget, started)
    facts, findings, gates = {"request": dict(options.spec, ranks=options.ranks, budget_s=options.budget,
                                              current=options.current)}, [], {}
    stops = StopSignals()  # SIGINT/SIGTERM raise Interrupted; the sandbox ends the children as it unwinds
    try:
        facts.update(profile(options, started))
        from .advice import recommendation
        spec = dict(options.spec, hetero=(facts.get("graph") or {}).get("kind") == "hetero",
                    batches_per_epoch=(facts.get("graph") or {}).get("batches_per_epoch"))
        facts["recommendation"] = recommendation(facts.get("configs") or [], spec, options.ranks,
                                                 facts.get("blocks"), (facts.get("plan") or {}).get("baseline"))
        from .rules import diagnose
        from .plan import measured
        findings = diagnose(facts, options)
        count = len(measured(facts.get("configs") or []))
        gates = {"measured": {"passed": count > 0, "configs_measured": count}}
        document, exit_code = render(facts, findings, gates, options, started)
    except Interrupted as stop:
        stops.hold()  # a second signal must not cut the document short
        return interrupted(stop, facts, options, started)
    except Exception as error:  # still one JSON document, saying what broke
        document, exit_code = render(facts, findings, gates, options, started,
                                     internal_error=shared_cli.internal_error(error, describe_exception))
    finally:
        stops.hold()
        stops.release()
    output(document, options)
    return exit_code


SEEN = {}  # what the child published so far (configs, blocks, facts), kept by progress() for an interrupted run


def interrupted(stop, facts, options, started):
    """The run's one JSON document after SIGINT/SIGTERM: its children are already ended (the sandbox's
    cleanup ran as the signal unwound the run); status "interrupted", exit 128 + the signal's number as
    in every tool."""
    from .findings import finding
    from .render import output, render
    for key, value in SEEN.items():
        facts.setdefault(key, value)
    configs = facts.get("configs") or []
    evidence = {"signal": stop.signal, "elapsed_s": round(time.time() - started, 3),
                "blocks_measured": len(facts.get("blocks") or []),
                "configs_measured": len([c for c in configs if c.get("status") == "ok"])}
    from .rules import rerun
    found = [finding("loader-profile-interrupted", evidence,
                     fix="%s  # run it again to the end; --budget bounds its time" % rerun(options))]
    gates = {"measured": {"passed": False, "configs_measured": evidence["configs_measured"]}}
    document, _ = render(facts, found, gates, options, started)
    document.update(ok=False, status="interrupted", exit_code=stop.code)
    output(document, options)
    return stop.code


def profile(options, started):
    """Run the coordinator child; -> the facts it published, and how it ended."""
    deadline = options.bounds["child_deadline"]
    if deadline - time.time() < CHILD_START_S:
        return {"configs": [], "child": {"killed_for": "deadline", "started": False}}
    child_options = {"spec": options.spec, "ranks": options.ranks, "max_workers": options.max_workers,
                     "deadline": deadline, "current": options.current}
    entry = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "profile_loader.py")
    command = [sys.executable, "-B", entry, CHILD_FLAG, json.dumps(child_options)]
    say("profiling for up to %.0f s (--budget)" % options.budget)
    facts, done, running, outcome = sandbox.run_call_child(command, sandbox.child_environment(), deadline, progress)
    facts.setdefault("configs", [])
    child = sandbox.call_child_summary(outcome)
    child.update(killed_for=outcome.killed_for, stderr_tail=outcome.stderr_tail[-3000:], running=running)
    facts["child"] = child
    if done is None and not facts.get("stopped"):
        facts.update(unfinished(outcome, running, facts))
    return facts


def unfinished(outcome, running, facts):
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


def progress(record):
    """One stderr line per thing learnt, while the child runs."""
    event, key, value = record.get("event"), record.get("key"), record.get("value")
    if event == "facts":
        SEEN[key] = value
    elif event == "append":
        SEEN.setdefault(key, []).append(value)
    if event == "append" and key == "blocks" and isinstance(value, dict):
        say("  %s round %d: %.1f steps/s (epoch %.1f), first batch %.2f s, other processes %s cores" % (
            value.get("config"), value.get("round", 0) + 1, value.get("steps_per_s", 0),
            value.get("epoch_steps_per_s", 0), value.get("first_batch_s", 0),
            "?" if value.get("other_cpu_cores") is None else "%.1f" % value["other_cpu_cores"]))
    elif event == "progress":
        say(record.get("line", ""))
    elif event == "append" and key == "configs" and isinstance(value, dict):
        if value.get("status") == "ok":
            say("%s: %.1f steps/s (range %.1f-%.1f), %.0f seeds/s, first batch %.2f s, peak RSS %.0f MB" % (
                value["name"], value["batches_per_s"], value["batches_per_s_range"][0],
                value["batches_per_s_range"][1], value["seeds_per_s"], value["first_batch_s"], value["peak_rss_mb"]))
        else:
            say("%s: %s" % (value.get("name"), value.get("status")))
    elif event == "facts" and key == "graph" and isinstance(value, dict):
        say("graph loaded: %s nodes, %s edges, %s seeds in %s batches per epoch" % (
            value.get("num_nodes"), value.get("num_edges"), value.get("seeds"), value.get("batches_per_epoch")))
