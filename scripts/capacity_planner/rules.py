"""Rules: each a small function from the plan's facts (and the options) to findings, deciding on data only."""

from .findings import TOOL, finding

GIB = float(1 << 30)


def gib(value):
    return "%.1f GiB" % (value / GIB)


def failed_checks(design):
    return [name for name, passed in design["fits"].items() if name != "all" and not passed]


def by_name(facts, name):
    return [d for d in facts["designs"] if d["design"] == name][0]


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
    evidence = {"design": chosen, "host_ram_per_node_peak": design["host"]["per_node_peak"]["bytes"],
                "shm_per_node": design["host"]["shm_per_node"]["bytes"], "gpu_per_rank": design["gpu"]["bytes"],
                "gpus_used": design["gpus"], "fits_all_gpus": facts.get("fits_all_gpus")}
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
        if failed_checks(design) == ["shm"]:
            found.append(finding("plan-shm-too-small", {
                "design": design["design"], "shm_needed_per_node": design["host"]["shm_per_node"]["bytes"],
                "shm_available": hardware(facts)["shm"], "shm_source": hardware(facts)["shm_source"]},
                "give the container more shared memory (docker run --shm-size=%dg ..., or --ipc=host), or "
                "num_workers=0 in that design's loader" % (design["host"]["shm_per_node"]["bytes"] // (1 << 30) + 1)))
    return found


def second_node(facts, options):
    if "designs" not in facts:
        return []
    multi, machines = by_name(facts, "multi-node"), hardware(facts)["machines"]
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
    design = by_name(facts, "ddp-shared-copy")
    per_rank = design["host"]["shm_per_rank"]
    return [finding("plan-shared-copy-not-shared", {
        "shm_per_rank": per_rank["bytes"], "ranks_per_node": design["host"]["ranks_per_node"],
        "shm_per_node": design["host"]["shm_per_node"]["bytes"], "how": per_rank["terms"][0]["source"]},
        "budget %s of /dev/shm per rank, or build the loader with num_workers=0 to keep the mapped edges in the "
        "page cache" % gib(per_rank["bytes"]))]


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


RULES = (store_unread, nothing_fits, shm_too_small, second_node, calibration_failed, coefficient_versions,
         shared_copy_not_shared, cheapest_fit)
