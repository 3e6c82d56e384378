"""Calibration: run the probes (probe.py) at a few small sizes in sandboxed children with deadlines, and
fit the memory model's coefficients (bytes per edge and per node) to what they measured.

The committed coefficients.json is this module's output on the maintainers' machine
(maintainers/calibrate_planner.py writes it, with processes.py's figures); --calibrate reruns it on the
user's machine and uses the result for that plan only, with the committed processes figures.
"""

import sys
import time

from .children import run_probe

# Small enough for seconds on two cores, large enough that tensors dwarf the allocator's noise.
GRAPH_SIZES = ((50000, 400000), (150000, 800000), (80000, 1200000))
GRAPH_FEATURES = 16
CONV_SIZES = ((2000, 20000), (6000, 20000), (3000, 40000))
CONV_CHANNELS, CONV_HEADS = 64, 4
CONVS = ("sage", "gcn", "gat", "gin", "transformer")
PROBE_FANOUTS, PROBE_BATCH = [10, 5], 256
# A fixed mmap threshold: glibc's moving one would keep freed tensors of one step in the heap of the next.
CHILD_MALLOC = {"MALLOC_MMAP_THRESHOLD_": "65536"}


def fit(points):
    """Least squares of bytes = a * edges + b * nodes over (edges, nodes, bytes); b >= 0."""
    see = sum(e * e for e, n, y in points)
    snn = sum(n * n for e, n, y in points)
    sen = sum(e * n for e, n, y in points)
    sey = sum(e * y for e, n, y in points)
    sny = sum(n * y for e, n, y in points)
    det = see * snn - sen * sen
    a, b = (sey * snn - sny * sen) / det, (sny * see - sey * sen) / det
    if b < 0:
        a, b = sey / see, 0.0
    return {"per_edge": round(a, 3), "per_node": round(b, 3)}


def say_on_stderr(text):
    sys.stderr.write("plan_capacity: %s\n" % text)
    sys.stderr.flush()


def steps():
    """The calibration's steps, in the order its child runs them (it announces each as it starts)."""
    return ([{"kind": "graph", "nodes": nodes, "edges": edges} for nodes, edges in GRAPH_SIZES] +
            [{"kind": "conv", "conv": kind} for kind in CONVS])


def step_text(step):
    if step["kind"] == "graph":
        return "graph of %d nodes, %d edges (loaders, sort, ToUndirected, save)" % (step["nodes"], step["edges"])
    return "%s conv forward/backward" % step["conv"]


def new_record():
    """What the calibration has done so far, as plain data: the steps planned, finished and running, and the
    measurements as they arrived. A run cut short (a signal, the deadline) still shows it."""
    return {"state": "running", "planned": steps(), "finished": [], "running": None, "cut": None,
            "measured": {}}


def calibrate(deadline, record=None, say=say_on_stderr):
    """-> (coefficients or None, [problems]): one probe child, ended at `deadline`. `record` (new_record())
    is kept up to date as the child reports, so the caller has what was measured however the run ends."""
    record = new_record() if record is None else record
    total = len(record["planned"])

    def on_progress(message):
        event, key = message.get("event"), message.get("key")
        if event == "progress":
            if record["running"] is not None:
                record["finished"].append(record["running"])
                say("calibration: %s measured (%d of %d)" % (step_text(record["running"]), len(record["finished"]),
                                                             total))
            record["running"] = message.get("step")
        elif event == "facts":
            record["measured"][key] = message.get("value")
        elif event == "append":
            record["measured"].setdefault(key, []).append(message.get("value"))

    say("calibrating: PyG loaders, sort, ToUndirected, save on graphs of %s (nodes, edges); forward/backward of %s"
        % (list(GRAPH_SIZES), ", ".join(CONVS)))
    from diagnostics_core.interrupt import Interrupted
    try:
        facts, problem = run_probe({"probe": "calibrate", "sizes": [list(s) for s in GRAPH_SIZES],
                                    "features": GRAPH_FEATURES, "workers": [0, 1], "fanouts": PROBE_FANOUTS,
                                    "batch_size": PROBE_BATCH, "convs": list(CONVS),
                                    "conv_sizes": [list(s) for s in CONV_SIZES], "channels": CONV_CHANNELS,
                                    "heads": CONV_HEADS}, deadline, CHILD_MALLOC, on_progress)
    except Interrupted:
        record.update(state="interrupted", cut=record["running"], running=None)
        raise
    complete = len(facts.get("graphs") or []) == len(GRAPH_SIZES) and \
        len(facts.get("conv") or []) == len(CONVS) * len(CONV_SIZES)
    if problem is not None or not complete:
        record.update(state="failed", cut=record["running"], running=None)
        return None, [problem["error"] if problem else "the calibration child ended before every measurement"]
    record["finished"].append(record["running"])
    record.update(state="finished", running=None)
    return coefficients(facts), []


def committed_processes():
    """The processes figures --calibrate keeps: measuring them takes a job per launch shape (processes.py)."""
    from .coefficients import load_committed
    return load_committed()["processes"]


def loader_record(run, workers, is_sorted):
    return [r for r in run["loader"] if r["workers"] == workers and r["is_sorted"] == is_sorted][0]


def coefficients(facts):
    runs, conv_facts = facts["graphs"], facts
    def points(pick):
        return [(run["graph"]["edges"], run["graph"]["nodes"], pick(run)) for run in runs]

    loader = {}
    for name, workers, is_sorted in (("private", 0, False), ("private_workers", 1, False),
                                     ("sorted", 0, True), ("sorted_workers", 1, True)):
        for quantity in ("peak_bytes", "steady_bytes", "shm_bytes"):
            loader["%s_%s" % (name, quantity)] = fit(points(
                lambda run: loader_record(run, workers, is_sorted)[quantity]))
    preprocess = dict((step, fit(points(lambda run: run[step]["peak_bytes"])))
                      for step in ("sort", "to_undirected", "save"))
    conv = {}
    for kind in CONVS:
        records = [r for r in conv_facts["conv"] if r["conv"] == kind]
        per_channel = lambda key: [(r["edges"], r["nodes"], r[key] / float(r["channels"])) for r in records]
        conv[kind] = {"saved_per_channel": fit(per_channel("saved_bytes")),
                      "gathered_per_channel": fit(per_channel("gathered_bytes")),
                      "measured_at": {"channels": CONV_CHANNELS, "heads": CONV_HEADS}}
    return {"provenance": dict(facts["versions"], date=time.strftime("%Y-%m-%d", time.gmtime()),
                               how="plan_capacity.py --calibrate: PyG's NeighborLoader (num_workers 0 and 1, "
                                   "is_sorted False and True), Data.sort, ToUndirected and torch.save on random "
                                   "graphs of %s (nodes, edges), %d float32 features; forward/backward of each conv "
                                   "at %s, %d channels; memory from /proc/self/status, peaks via clear_refs"
                                   % (list(GRAPH_SIZES), GRAPH_FEATURES, list(CONV_SIZES), CONV_CHANNELS)),
            "process_base_bytes": facts["base"]["VmRSS"],
            "loader": loader, "preprocess": preprocess, "conv": conv, "processes": committed_processes(),
            "runs": {"graph": runs, "conv": conv_facts["conv"]}}
