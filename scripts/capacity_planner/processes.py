"""The processes coefficients: the anonymous memory of each kind of process a job runs (a rank, mp.spawn's
launcher, torchrun's agent, a resource tracker, a forked or spawned worker, a bare forkserver), the libraries'
file pages, and the batches a rank's loop holds. Measured by running tiny jobs in each launch shape through
--measure's child (meter.py), each figure from the one process kind that shows it, at a stage where it is at
rest. maintainers/calibrate_planner.py writes them into coefficients.json; --calibrate keeps the committed ones.
"""

import time

from .children import run_probe

GRAPH = {"nodes": 10000, "edges": 100000, "features": 64, "feature_dtype": "float32", "labels": True,
         "edge_features": 0}
RUNS = (  # name, launch, ranks, workers, start method: what each shows
    ("torchrun2-w0", "torchrun", 2, 0, None),            # a rank, the agent, the libraries, the loop's batches
    ("spawn1-w1", "spawn", 1, 1, None),                  # the launcher (an interpreter), a tracker, a spawned worker
    ("torchrun1-w4", "torchrun", 1, 4, None),            # forked workers
    ("torchrun1-w1-forkserver", "torchrun", 1, 1, "forkserver"),  # a forkserver without torch (Python < 3.14)
)
WORKER_HEAP_BATCHES = 1  # as launch.WORKER_HEAP_BATCHES: a forked worker keeps the batch it last built


def job(launch, ranks, workers, start_method, port):
    return {"launch": launch, "ranks": ranks, "workers": workers, "prefetch_factor": 2, "start_method": start_method,
            "layout": "private", "fanouts": [10, 5], "batch_size": 512, "batches": 4, "threads": 1, "settle_s": 0.3,
            "port": port, "graph": dict(GRAPH)}


def measure_runs(deadline, say):
    """-> ({name: the meter's result}, [problems]); each run in its own child, within `deadline`."""
    import socket
    results, problems = {}, []
    for name, launch, ranks, workers, method in RUNS:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        say("processes: %s" % name)
        facts, problem = run_probe({"probe": "measure", "job": job(launch, ranks, workers, method, port),
                                    "stop_at": deadline - 5, "shm_size": 1 << 30, "shm_needed": 64 << 20}, deadline)
        result = facts.get("result") or {}
        if problem is not None or result.get("failure") or not result.get("stages"):
            problems.append("%s: %s" % (name, (problem or {}).get("error") or result.get("failure")))
        else:
            results[name] = result
    return results, problems


def stage(result, name):
    return [s for s in result["stages"] if s["stage"] == name][0]


def per_process(result, stage_name, kind):
    entry = stage(result, stage_name)["by_kind"][kind]
    return entry["pss_anon_bytes"] / float(entry["count"])


def batch(result):
    return sum(result["batch_bytes"]) / float(len(result["batch_bytes"]))


def fit(results):
    """The coefficients from the runs' stage records."""
    plain, spawned = results["torchrun2-w0"], results["spawn1-w1"]
    forked, forkserver = results["torchrun1-w4"], results["torchrun1-w1-forkserver"]
    interpreter = per_process(spawned, "init", "launcher")
    grown = (stage(forked, "steady")["end_anon_bytes"] - stage(forked, "construction")["end_anon_bytes"]) / 4.0
    held = (stage(plain, "steady")["end_anon_bytes"] - stage(plain, "construction")["end_anon_bytes"]) / 2.0
    return {"interpreter_anon_bytes": int(interpreter),
            "rank_anon_bytes": int(per_process(plain, "init", "rank")),
            "agent_anon_bytes": int(per_process(plain, "init", "agent")),
            "resource_tracker_anon_bytes": int(per_process(spawned, "init", "resource_tracker")),
            "fork_worker_anon_bytes": int(max(0.0, grown - WORKER_HEAP_BATCHES * batch(forked))),
            "spawn_worker_extra_anon_bytes": int(max(0.0, per_process(spawned, "steady", "worker") - interpreter)),
            "bare_forkserver_anon_bytes": int(per_process(forkserver, "steady", "forkserver")),
            "library_file_bytes": int(stage(plain, "init")["end_libraries_bytes"]),
            "main_batch_heap_batches": round(max(0.0, held / batch(plain)), 2)}


def calibrate(deadline, say):
    """-> (the processes coefficients with their provenance, or None, [problems])."""
    results, problems = measure_runs(deadline, say)
    if problems:
        return None, problems
    values = fit(results)
    values["provenance"] = {"date": time.strftime("%Y-%m-%d", time.gmtime()),
                            "how": "--measure's child (meter.py) on jobs of %d nodes, %d edges, %d float32 features, "
                                   "fan-outs [10, 5], batch 512: %s; anonymous memory per kind of process (Pss_Anon "
                                   "from smaps_rollup) at rest, the libraries' pages as the largest RssFile"
                                   % (GRAPH["nodes"], GRAPH["edges"], GRAPH["features"],
                                      ", ".join(name for name, _, _, _, _ in RUNS))}
    return values, []
