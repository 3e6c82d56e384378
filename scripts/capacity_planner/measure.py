"""--measure, the parent's side: which design runs and how (the job's settings, from the plan), whether this
machine can run it (refused, saying what it would need), the measuring child (meter.py, through probe.py)
within the measure stage's bound, and its peaks beside the model's with their ratio, in run.facts["measure"]
as they arrive (a run cut short still shows them)."""

import os
import socket
import sys

from diagnostics_core import container
from diagnostics_core.cli import UsageError
from .children import run_probe
from .findings import TOOL

DESIGNS = ("one-process-loader", "ddp-shared-copy", "ddp-private-copies", "cpu-ddp-shared-copy",
           "cpu-ddp-private-copies", "cpu-ddp-sampling-in-rank")
BATCHES = 3        # per rank: the first batch, then enough for the workers' prefetch to fill
SETTLE_S = 0.15    # every rank rests after each stage, so the stages' windows do not overlap
CLEANUP_S = 6.0    # the child ends the job this long before the stage's bound, to end it and report
PROCESSES_PER_CORE = 8  # more interpreters than this per core do not start within a bound worth waiting
MEMORY_MARGIN = 1.25    # over the model's node peak: the refusal leaves room for the model to be off
AGREES = 0.15           # model / measured within this of 1: the model holds for this job
NOISE_BYTES = 2 << 20   # differences below this are the allocator's and the sampling's, not the model's
MIB = float(1 << 20)


def refuse(why):
    return UsageError("plan_capacity.py: error: --measure: %s" % why, TOOL.usage_id, {"message": why},
                      TOOL.command("--help"))


def check(options):
    """Command lines --measure cannot run here: a usage error each."""
    request = options.request
    if options.store:
        raise refuse("a store pair is not measured; give the sizes (--nodes, --edges, --features) or a --data file")
    if request["graph"] is not None and request["graph"]["kind"] == "hetero":
        raise refuse("heterogeneous graphs are planned, not measured; measure one node and edge type with "
                     "--nodes, --edges and --features")
    if options.launch == "srun":
        raise refuse("srun starts the ranks outside this process tree; measure the same shape with --launch "
                     "torchrun (fresh interpreters whose workers start the same way), inside the allocation")
    python = request["sampling"]["python"]
    if tuple(python) != tuple(sys.version_info[:2]):
        raise refuse("the job runs with this interpreter (Python %d.%d), not %d.%d: plan that Python without "
                     "--measure, or run the planner with it" % (tuple(sys.version_info[:2]) + tuple(python)))
    name = design_name(request, options)
    if (request["hardware"]["gpus_per_node"] == 0) != name.startswith("cpu-"):
        raise refuse("--measure-design %s is not planned with --gpus-per-node %d" % (
            name, request["hardware"]["gpus_per_node"]))


def design_name(request, options):
    if options.measure_design:
        return options.measure_design
    return "cpu-ddp-private-copies" if request["hardware"]["gpus_per_node"] == 0 else "ddp-private-copies"


def job_settings(request, design, options):
    """What the job does: the design's launch shape, the loader asked for, the graph (the user's file, or a
    random one of the planned sizes)."""
    shape, sampling, graph = design["launch_shape"], request["sampling"], request["graph"]
    if options.data:
        source = {"path": os.path.abspath(options.data)}
    else:
        source = {"nodes": graph["nodes"], "edges": graph["edges"], "features": graph["features"],
                  "feature_dtype": options.feature_dtype, "labels": options.labels,
                  "edge_features": options.edge_features}
    with socket.socket() as probe:  # a free port for mp.spawn's process group (torchrun finds its own)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return {"launch": shape["launch"], "ranks": shape["ranks"], "workers": shape["workers"],
            "prefetch_factor": shape["prefetch_factor"], "start_method": sampling["start_method_asked"],
            "layout": shape["layout"], "fanouts": sampling["fanouts"], "batch_size": sampling["batch_size"],
            "batches": BATCHES, "threads": shape.get("threads_per_rank") or 1, "settle_s": SETTLE_S,
            "port": port, "graph": source}


def memory_available():
    """MemAvailable of /proc/meminfo: what a new job may take here without pushing others out."""
    text = container.read("/", "/proc/meminfo") or ""
    for line in text.splitlines():
        fields = line.split()
        if fields[:1] == ["MemAvailable:"] and len(fields) > 1 and fields[1].isdigit():
            return int(fields[1]) * 1024
    return None


def needs(design, preprocessing):
    """-> {"memory_bytes", "processes", "cores"} the measurement needs here."""
    memory = design["host"]["per_node_peak"]["bytes"] * MEMORY_MARGIN
    if design["launch_shape"]["layout"] == "mapped":  # the sorted file is made first, by one process
        memory = max(memory, max(step["peak"]["bytes"] for step in preprocessing))
    busy = sum(design["host"]["processes"].values())
    return {"memory_bytes": int(memory), "processes": busy, "cores": -(-busy // PROCESSES_PER_CORE)}


def refusal(need, words, request, options):
    """None when this machine can run the measurement, else the usage error that says what it would need."""
    available, cores = memory_available(), container.get_usable_cores()["usable"]
    short = [what for what, missing in (("memory", available is not None and need["memory_bytes"] > available),
                                         ("cores", need["cores"] > cores)) if missing]
    if not short:
        return None
    if "memory" in short:
        scale = max(0.01, 0.5 * available / float(need["memory_bytes"])) if available else 0.5
        graph = request["graph"]
        words = replace_sizes(words, ["--nodes", max(1000, int(graph["nodes"] * scale)),
                                      "--edges", max(1000, int(graph["edges"] * scale))], graph["features"])
    fix = "%s  # %s; or --measure where %.1f GiB is free and %d cores" % (
        TOOL.command(*words), "the same shape on a graph this machine holds" if "memory" in short else
        "on a machine with the cores", need["memory_bytes"] / float(1 << 30), need["cores"])
    line = "this run needs about %.1f GiB of memory (%.1f GiB available here) and %d cores for its %d processes " \
           "(%d usable here)" % (need["memory_bytes"] / float(1 << 30), (available or 0) / float(1 << 30),
                                 need["cores"], need["processes"], cores)
    return UsageError("plan_capacity.py: error: --measure: %s" % line, "plan-measure-refused",
                      {"needs": need, "has": {"memory_available_bytes": available, "cores": cores},
                       "short_of": short}, fix)


def replace_sizes(words, sizes, features):
    """The command line's words with the graph given as `sizes` (--data dropped: the sizes stand for it)."""
    out, skip = [], False
    replaced = dict(zip(sizes[::2], sizes[1::2]))
    for word in words:
        if skip:
            skip = False
            continue
        flag = word.partition("=")[0]
        if flag in replaced or flag == "--data":
            skip = "=" not in word
            continue
        out.append(word)
    if not any(word.partition("=")[0] == "--features" for word in out):
        out += ["--features", features]
    return out + sizes


def new_record(name, design, job, options):
    host = design["host"]
    return {"state": "running", "design": name,
            "job": dict(job, worker_start_method=design["launch_shape"]["worker_start_method"],
                        graph=job["graph"] if options.data else "random, the planned sizes"),
            "model": {"shm_per_node_bytes": host["shm_per_node"]["bytes"],
                      "shm_per_rank_bytes": host["shm_per_rank"]["bytes"],
                      "node_memory_peak_bytes": host["per_node_peak"]["bytes"],
                      "node_memory_peak_stage": host["per_node_peak"]["stage"], "processes": host["processes"],
                      "shm_by_stage": host["shm_by_stage"]},
            "private_shm": None, "measured": None, "failure": None, "ratio": None}


def ratio(model, measured):
    """model / measured; 1.0 when both are nothing, None when only the model has something."""
    if measured is None:
        return None
    if not measured:
        return 1.0 if not model else None
    return round(model / float(measured), 3)


def compare(record):
    """The ratios of a measurement that ran to its end (a cut one's peaks are only what it reached)."""
    if record["state"] != "finished":
        return
    measured = (record["measured"] or {}).get("peak") or {}
    model = record["model"]
    record["ratio"] = {"shm_per_node": ratio(model["shm_per_node_bytes"], measured.get("shm_bytes")),
                       "node_memory": ratio(model["node_memory_peak_bytes"], measured.get("node_bytes"))}


def run(run, design, preprocessing, words):
    """Measure `design` here (run.facts["measure"] holds the record as it fills); a refusal is a usage error.
    `words`: this command line's, for a fix that reruns it on a smaller graph."""
    options, request = run.options, run.facts["request"]
    name = design["design"]
    need = needs(design, preprocessing)
    refused = refusal(need, words, request, options)
    if refused is not None:
        raise refused
    job = job_settings(request, design, options)
    record = run.facts["measure"] = new_record(name, design, job, options)
    shm_need = record["model"]["shm_per_node_bytes"]
    probe = {"probe": "measure", "job": job, "stop_at": run.by("measure") - CLEANUP_S,
             "shm_size": int(max(2 * shm_need + (256 << 20), 512 << 20)), "shm_needed": int(shm_need)}

    def on_progress(message):
        if message.get("event") != "facts":
            return
        key, value = message.get("key"), message.get("value")
        if key == "private_shm":
            record["private_shm"] = value
            if not value["private"]:
                run.say("measure: no private /dev/shm (%s): measuring the host's as a difference" % value["why_not"])
        elif key in ("measured", "result"):
            value = dict(value)
            record["failure"] = value.pop("failure", None)
            record["measured"] = dict(record["measured"] or {}, **value)
            record["ended"] = key == "result"
        elif key == "refused":
            record["refused"] = value["why"]
    run.say("measure: %s, %s x %d ranks, %d workers each (%s), %d batches per rank" % (
        name, job["launch"], job["ranks"], job["workers"], record["job"]["worker_start_method"], job["batches"]))
    from diagnostics_core.interrupt import Interrupted
    try:
        _, problem = run_probe(probe, run.by("measure"), on_progress=on_progress)
    except Interrupted:
        record["state"] = "interrupted"
        record.pop("ended", None)
        raise
    if record.get("refused"):
        del run.facts["measure"]
        raise UsageError("plan_capacity.py: error: --measure: %s" % record["refused"], "plan-measure-refused",
                         {"needs": dict(need, shm_bytes=shm_need), "has": {"shm_free_bytes": None},
                          "short_of": ["shm"]},
                         "run --measure as root (a private /dev/shm of its own), or where /dev/shm has %d MiB free"
                         % (shm_need / MIB + 1))
    if problem is not None and record["failure"] is None:
        record["failure"] = {"kind": "measure-failed", "detail": problem["error"]}
    finished = record.pop("ended", False) and record["failure"] is None and problem is None
    record["state"] = "finished" if finished else "failed"
    compare(record)
    if finished:
        peak = record["measured"]["peak"]
        run.say("measure: peak /dev/shm %.1f MiB (model %.1f), node memory %.1f MiB (model %.1f)" % (
            peak["shm_bytes"] / MIB, record["model"]["shm_per_node_bytes"] / MIB, (peak["node_bytes"] or 0) / MIB,
            record["model"]["node_memory_peak_bytes"] / MIB))
