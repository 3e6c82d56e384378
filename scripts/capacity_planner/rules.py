"""Rules: each a small function from the plan's facts (and the options) to findings, deciding on data only."""

from . import designs, measure, render
from .findings import TOOL, finding

MIB = float(1 << 20)


def shm_size_word(value):
    """What to ask Docker for: the figure and a quarter more, in whole MiB (--shm-size=NNNm)."""
    return "--shm-size=%dm" % max(64, int(-(-value * 1.25 // MIB)))


def failed_checks(design):
    return [name for name, passed in design["fits"].items() if name != "all" and not passed]


def by_name(facts, name):
    return designs.by_name(facts["designs"], name)


def hardware(facts):
    return facts["request"]["hardware"]


def store_unread(facts, options):
    """The store gave no sizes: hung (a call past its bound, or the child's deadline) or failed."""
    problem = facts.get("store_problem")
    if not problem:
        return []
    from diagnostics_core.contract import script_command
    words = [problem["store"]] + (["--path", problem["path"]] if problem["path"] else [])
    evidence = dict((key, problem[key]) for key in ("store", "error", "call", "ended_by", "timeout_s"))
    return [finding("plan-store-hung" if problem["hung"] else "plan-store-failed", evidence,
                    "%s  # checks the pair call by call, each bounded" % script_command("check_store_contract.py",
                                                                                       *words))]


def cheapest_fit(facts, options):
    chosen = facts.get("cheapest_fit")
    if not chosen:
        return []
    design = by_name(facts, chosen)
    shape = design["launch_shape"]
    evidence = {"design": chosen, "host_ram_per_node_peak": design["host"]["per_node_peak"]["bytes"],
                "shm_per_node": design["host"]["shm_per_node"]["bytes"],
                "gpu_per_rank": design["gpu"]["bytes"] if design["gpu"] else None,
                "gpus_used": design["gpus"], "fits_all_gpus": facts.get("fits_all_gpus"),
                "launch": shape["launch"], "ranks_per_node": shape["ranks"], "num_workers": shape["workers"],
                "threads_per_rank": shape.get("threads_per_rank")}
    fix = "%s  # a launch line to adapt, not run by this tool" % design["launch"]
    widest = facts.get("fits_all_gpus")
    if widest and widest != chosen:
        # The cheapest design may leave GPUs idle; the one that uses them all is the launch most want.
        wide = by_name(facts, widest)
        evidence["all_gpus"] = {"design": widest, "gpus": wide["gpus"], "launch": wide["launch"]}
        fix += "; it uses %d GPU(s): to use all %d, %s: %s" % (design["gpus"], wide["gpus"], widest, wide["launch"])
    return [finding("plan-cheapest-fit", evidence, fix)]


def nothing_fits(facts, options):
    if "designs" not in facts or facts.get("cheapest_fit"):
        return []
    evidence = dict((d["design"], failed_checks(d)) for d in facts["designs"])
    return [finding("plan-nothing-fits", evidence,
                    "keep node features out of RAM with a store pair (plan it with --store), lower --num-workers "
                    "(no /dev/shm copy), or plan a machine with more --host-ram / --gpu-memory")]


def shm_too_small(facts, options):
    found = []
    for design in facts.get("designs", ()):
        failed = failed_checks(design)
        if "shm" in failed and set(failed) <= {"shm", "cores"}:  # the memory fits: /dev/shm is what stops it
            host, available = design["host"], hardware(facts)["shm"]
            fails_at = next(level for level in host["shm_by_stage"] if level["bytes"] > available)
            found.append(finding("plan-shm-too-small", {
                "design": design["design"], "shm_needed_per_node": host["shm_per_node"]["bytes"],
                "shm_available": available, "shm_source": hardware(facts)["shm_source"],
                "fails_at": fails_at, "terms": dict((t["name"], t["bytes"]) for t in host["shm_per_node"]["terms"])},
                "give the container more shared memory (docker run %s ..., or --ipc=host), or num_workers=0 in "
                "that design's loader; --measure runs it here for the real peak" % shm_size_word(
                    host["shm_per_node"]["bytes"])))
    return found


def second_node(facts, options):
    multi = by_name(facts, "multi-node") if "designs" in facts else None
    if multi is None:
        return []
    machines = hardware(facts)["machines"]
    needed = multi.get("nodes_needed")
    if needed is None or needed <= machines and multi["ranks_per_node_that_fit"] >= hardware(facts)["gpus_per_node"]:
        return []
    return [finding("plan-second-node-needed", {
        "ranks_per_node_that_fit": multi["ranks_per_node_that_fit"], "gpus_per_node": hardware(facts)["gpus_per_node"],
        "nodes_needed": needed, "nodes_available": machines},
        "%s  # not run by this tool" % multi["launch"])]


def shared_copy_not_shared(facts, options):
    if "designs" not in facts or not facts["request"]["sampling"]["workers"]:
        return []
    design = by_name(facts, "ddp-shared-copy") or by_name(facts, "cpu-ddp-shared-copy")
    per_rank = design["host"]["shm_per_rank"]
    return [finding("plan-shared-copy-not-shared", {
        "shm_per_rank": per_rank["bytes"], "ranks_per_node": design["host"]["ranks_per_node"],
        "shm_per_node": design["host"]["shm_per_node"]["bytes"], "how": per_rank["terms"][0]["source"]},
        "budget %s of /dev/shm per rank, or build the loader with num_workers=0 to keep the mapped edges in the "
        "page cache" % render.size(per_rank["bytes"]))]


def coefficient_versions(facts, options):
    used = facts.get("coefficients")
    if not used or used["used"] == "calibrated" or not used.get("version_mismatch"):
        return []
    return [finding("plan-coefficients-other-versions", {"measured_on": used["provenance"],
                                                         "installed": used["installed"]},
                    "%s  # measures the coefficients on this machine's torch and PyG (about a minute)"
                    % TOOL.command(*facts["rerun"]))]


def calibration_failed(facts, options):
    calibration = facts.get("calibration") or {}
    if calibration.get("state") != "failed":
        return []
    return [finding("plan-calibration-failed", {
        "problems": facts["coefficients"]["calibration_problems"], "cut": calibration["cut"],
        "finished": len(calibration["finished"]), "planned": len(calibration["planned"])},
        "%s  # a longer deadline (the last --timeout counts); the plan above used the committed coefficients"
        % TOOL.command(*facts["rerun"] + ["--timeout", "600"]))]


def graph_pickled(facts, options):
    """The design as asked moves the graph's tensors into /dev/shm: its workers get the loader pickled
    (spawn or forkserver), or the launcher passes the graph in mp.spawn's args."""
    design = by_name(facts, measure.design_name(facts["request"], options)) if "designs" in facts else None
    if design is None:
        return []
    terms = dict((t["name"], t["bytes"]) for t in design["host"]["shm_per_node"]["terms"])
    pickled = terms.get("graph_pickled_to_workers", 0) + terms.get("input_nodes_pickled", 0)
    passed = terms.get("graph_in_spawn_args", 0)
    if not pickled and not passed:
        return []
    shape = design["launch_shape"]
    ways = []
    if pickled:
        ways.append("multiprocessing_context='fork' in the NeighborLoader (forked workers inherit the graph: "
                    "nothing is pickled), or ranks started by torchrun (fresh interpreters: their workers fork up "
                    "to Python 3.13), or num_workers=0")
    if passed:
        ways.append("load the graph in each rank instead of passing it in mp.spawn(args=...)")
    return [finding("plan-graph-pickled-to-workers", {
        "design": design["design"], "launch": shape["launch"], "worker_start_method": shape["worker_start_method"],
        "why": shape["worker_start_method_source"], "pickled_per_rank_bytes": pickled,
        "spawn_args_per_node_bytes": passed, "ranks_per_node": shape["ranks"],
        "shm_per_node_bytes": design["host"]["shm_per_node"]["bytes"]},
        "%s; the plan with forked workers: %s" % ("; ".join(ways), TOOL.command(*start_method_words(facts))))]


def start_method_words(facts):
    """This command line with --start-method fork, without --measure."""
    words, skip = [], False
    for word in facts["command"]:
        if skip:
            skip = False
        elif word in ("--start-method", "--measure-design"):
            skip = True
        elif word != "--measure" and not word.startswith(("--start-method=", "--measure-design=")):
            words.append(word)
    return words + ["--start-method", "fork"]


def measured(facts, options):
    record = facts.get("measure")
    if not record or record["state"] != "finished":
        return []
    peak, model, private = record["measured"]["peak"], record["model"], record["private_shm"] or {}
    evidence = {"design": record["design"], "private_shm": bool(private.get("private")),
                "why_not_private": private.get("why_not"),
                "shm_per_node": {"model_bytes": model["shm_per_node_bytes"], "measured_bytes": peak["shm_bytes"],
                                 "ratio": record["ratio"]["shm_per_node"]},
                "node_memory": {"model_bytes": model["node_memory_peak_bytes"], "measured_bytes": peak["node_bytes"],
                                "ratio": record["ratio"]["node_memory"]},
                "worker_start_method": {"model": record["job"]["worker_start_method"],
                                        "measured": record["measured"]["worker_start_methods"]},
                "processes": {"model": sum(model["processes"].values()), "measured": peak["processes"]}}
    need = max(model["shm_per_node_bytes"], peak["shm_bytes"])
    fix = ("docker run %s ... (this job's /dev/shm peak and a quarter more), or --ipc=host" % shm_size_word(need)
           if need else "this job puts nothing in /dev/shm: Docker's 64 MB default holds it")
    return [finding("plan-measured", evidence, fix)]


def off(model, measured_value):
    return measured_value is not None and abs(model - measured_value) > max(
        measure.NOISE_BYTES, measure.AGREES * measured_value)


def measure_disagrees(facts, options):
    record = facts.get("measure")
    if not record or record["state"] != "finished":
        return []
    peak, model = record["measured"]["peak"], record["model"]
    figures = dict((name, {"model_bytes": model[key], "measured_bytes": peak[measured_key],
                           "ratio": record["ratio"][name]})
                   for name, key, measured_key in (("shm_per_node", "shm_per_node_bytes", "shm_bytes"),
                                                   ("node_memory", "node_memory_peak_bytes", "node_bytes"))
                   if off(model[key], peak[measured_key]))
    if not figures:
        return []
    return [finding("plan-measure-disagrees", dict(figures, design=record["design"], tolerance=measure.AGREES,
                                                   worker_start_method={
                                                       "model": record["job"]["worker_start_method"],
                                                       "measured": record["measured"]["worker_start_methods"]}),
                    "size this job from the measured figure (evidence), not the model's; if the workers' start "
                    "method differs from the model's, give it with --start-method")]


def measure_failed(facts, options):
    record = facts.get("measure")
    if not record or record["state"] != "failed":
        return []
    failure = record["failure"] or {"kind": "measure-failed"}
    kind = failure["kind"]
    evidence = {"design": record["design"], "kind": kind, "detail": failure.get("detail"),
                "stages_reached": [s["stage"] for s in (record["measured"] or {}).get("stages", [])],
                "peak": (record["measured"] or {}).get("peak"), "model": record["model"]}
    if kind == "deadline":
        fix = "%s  # a longer --timeout: the job's processes import torch each" % TOOL.command(
            *facts["command"] + ["--timeout", str(int(min(3600, 3 * options.timeout)))])
    elif kind == "shm-full":
        fix = ("the job filled the private /dev/shm sized from the model: the model is off for this job; size "
               "/dev/shm from evidence.peak, or num_workers=0")
    else:
        fix = "the job itself failed (evidence.detail holds its last output); run its loader alone to see why"
    return [finding("plan-measure-failed", evidence, fix)]


RULES = (store_unread, nothing_fits, shm_too_small, second_node, calibration_failed, coefficient_versions,
         shared_copy_not_shared, graph_pickled, measure_failed, measure_disagrees, measured, cheapest_fit)
