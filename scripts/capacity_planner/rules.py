"""Rules: each a small function from the plan's facts to findings."""

from .findings import finding

GIB = float(1 << 30)


def gib(value):
    return "%.1f GiB" % (value / GIB)


def failed_checks(design):
    return [name for name, passed in design["fits"].items() if name != "all" and not passed]


def cheapest_fit(facts, options):
    chosen = facts.get("cheapest_fit")
    if not chosen:
        return []
    design = [d for d in facts["designs"] if d["design"] == chosen][0]
    evidence = {"design": chosen, "host_ram_per_node_peak": design["host"]["per_node_peak"]["bytes"],
                "shm_per_node": design["host"]["shm_per_node"]["bytes"], "gpu_per_rank": design["gpu"]["bytes"],
                "gpus_used": design["gpus"], "fits_all_gpus": facts.get("fits_all_gpus")}
    fix = "%s  # a launch line to adapt, not run by this tool" % design["launch"]
    widest = facts.get("fits_all_gpus")
    if widest and widest != chosen:
        # The cheapest design may leave GPUs idle; the one that uses them all is the launch most want.
        wide = [d for d in facts["designs"] if d["design"] == widest][0]
        evidence["all_gpus"] = {"design": widest, "gpus": wide["gpus"], "launch": wide["launch"]}
        fix += "; it uses %d GPU(s): to use all %d, %s: %s" % (design["gpus"], wide["gpus"], widest, wide["launch"])
    return [finding("plan-cheapest-fit", evidence, fix)]


def nothing_fits(facts, options):
    if facts.get("cheapest_fit"):
        return []
    evidence = dict((d["design"], failed_checks(d)) for d in facts["designs"])
    return [finding("plan-nothing-fits", evidence,
                    "keep node features out of RAM with a store pair (plan it with --store), lower --num-workers "
                    "(no /dev/shm copy), or plan a machine with more --host-ram / --gpu-memory")]


def shm_too_small(facts, options):
    found = []
    for design in facts["designs"]:
        if failed_checks(design) == ["shm"]:
            found.append(finding("plan-shm-too-small", {
                "design": design["design"], "shm_needed_per_node": design["host"]["shm_per_node"]["bytes"],
                "shm_available": options.hardware["shm"], "shm_source": options.hardware["shm_source"]},
                "give the container more shared memory (docker run --shm-size=%dg ..., or --ipc=host), or "
                "num_workers=0 in that design's loader" % (design["host"]["shm_per_node"]["bytes"] // (1 << 30) + 1)))
    return found


def second_node(facts, options):
    multi = [d for d in facts["designs"] if d["design"] == "multi-node"][0]
    needed = multi.get("nodes_needed")
    if needed is None or needed <= options.hardware["machines"] and multi["ranks_per_node_that_fit"] >= \
            options.hardware["gpus_per_node"]:
        return []
    return [finding("plan-second-node-needed", {
        "ranks_per_node_that_fit": multi["ranks_per_node_that_fit"], "gpus_per_node": options.hardware["gpus_per_node"],
        "nodes_needed": needed, "nodes_available": options.hardware["machines"]},
        "%s  # not run by this tool" % multi["launch"])]


def shared_copy_not_shared(facts, options):
    if not options.sampling["workers"]:
        return []
    design = [d for d in facts["designs"] if d["design"] == "ddp-shared-copy"][0]
    per_rank = design["host"]["shm_per_rank"]
    return [finding("plan-shared-copy-not-shared", {
        "shm_per_rank": per_rank["bytes"], "ranks_per_node": design["host"]["ranks_per_node"],
        "shm_per_node": design["host"]["shm_per_node"]["bytes"], "how": per_rank["terms"][0]["source"]},
        "budget %s of /dev/shm per rank, or build the loader with num_workers=0 to keep the mapped edges in the "
        "page cache" % gib(per_rank["bytes"]))]


def coefficient_versions(facts, options):
    used = facts["coefficients"]
    if used["used"] == "calibrated" or not used.get("version_mismatch"):
        return []
    return [finding("plan-coefficients-other-versions", {"measured_on": used["provenance"],
                                                         "installed": used["installed"]},
                    "%s  # measures the coefficients on this machine's torch and PyG (about a minute)"
                    % options.rerun_calibrated)]


def calibration_failed(facts, options):
    problems = facts["coefficients"].get("calibration_problems")
    if not problems:
        return []
    return [finding("plan-calibration-failed", {"problems": problems},
                    "%s  # rerun with a longer deadline; the plan above used the committed coefficients"
                    % options.rerun_calibrated)]


RULES = (nothing_fits, shm_too_small, second_node, calibration_failed, coefficient_versions,
         shared_copy_not_shared, cheapest_fit)


def diagnose(facts, options):
    found = []
    for rule in RULES:
        found += rule(facts, options)
    return found
