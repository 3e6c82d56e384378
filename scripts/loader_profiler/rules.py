"""Each rule: the run's facts in, findings out, with a stable id. No rule measures anything, and a fix is a
value: a command in it is built from words (diagnostics_core.command, TOOL.command), each quoted, so a path
or module name from the command line runs nothing when the fix is pasted."""

import argparse
import os
import re
import sys

from diagnostics_core import command
from diagnostics_core.contract import script_command
from . import plan
from .findings import TOOL, finding
from .request import file_reference, words

SAMPLER_BOUND_SHARE = 0.6  # of a default batch's time, for sampler-bound / fetch-bound
# What the kernel and torch say when shared memory runs out (the workers' errors, not this tool's words).
SHM_ERRORS = re.compile(r"No space left on device|shared memory|Bus error|shm_open|unable to (write to|mmap)", re.I)


def python():
    return command.word(sys.executable)


def rerun(options, **changed):
    """This run's command line with some options changed (rerun(options, budget=120)), from any folder: a
    data file by its absolute path; a MODULE:CALLABLE from the folder it was imported from."""
    line, folder = words(argparse.Namespace(**dict(vars(options), **changed)))
    again = TOOL.command(*line)
    return "%s && %s" % (command.line("cd", folder), again) if folder else again


def no_backend(facts, options):
    backend = facts.get("backend")
    if not backend or backend["pyg_lib"] or backend["torch_sparse"]:
        return []
    return [finding("loader-no-sampler-backend", dict(backend, interpreter=sys.executable),
                    fix="%s  # names the install command that fits this torch" % script_command(
                        "check_sampling_backends.py", "--require-neighbor-backend", python=python()))]


def store_check(reference):
    """The store checker on the user's pair, from any folder; it imports the module, this tool does not."""
    return script_command("check_store_contract.py", file_reference(reference), "--path", os.getcwd(),
                          "--skip-sampling", python=python())


def input_fix(problem_id, options):
    """No fix loads the refused file or imports the user's module: a fix never runs what was diagnosed."""
    if problem_id == "loader-data-unsafe-pickle":
        return ("in the script that made the file (not by loading this one: it names code, see evidence), save "
                "tensors only: torch.save(data.to_dict(), 'graph-tensors.pt'); then rebuild it with "
                "Data.from_dict (HeteroData.from_dict for a HeteroData) from torch.load('graph-tensors.pt', "
                "weights_only=True), torch.save it and pass that file as --data")
    if problem_id == "loader-data-load-failed":
        return "torch.save(dataset[0], 'graph.pt')  # in your script: one Data or HeteroData per file, then --data graph.pt"
    if problem_id == "loader-store-failed":
        return "%s  # names what is wrong with the pair; the traceback is in evidence" % store_check(options.store)
    if problem_id == "loader-step-failed":
        return ("%s  # times the loader alone meanwhile; the step's traceback is in evidence: fix it so that it "
                "runs on one batch, then run the profiler with it again"
                % rerun(options, step=None, model=None, stand_in=None, loader_only=True))
    flag = "input_edges" if options.link else "input_nodes"
    return "%s  # name %s that exists (see evidence)" % (
        rerun(options, **{flag: ["SRC", "REL", "DST"] if options.link else "NAME"}),
        "an edge type" if options.link else "an attribute or type")


def input_problem(facts, options):
    problem = facts.get("input_problem")
    if not problem:
        return []
    return [finding(problem["finding"], problem["evidence"], fix=input_fix(problem["finding"], options))]


def stopped(facts, options):
    """A configuration that hung or a process that died: what was running and how it ended."""
    how = facts.get("stopped")
    if not how or how["how"] == "out-of-time":  # the budget-short finding says that
        return []
    evidence = dict(how, stderr_tail=facts.get("child", {}).get("stderr_tail", "")[-1500:])
    if how["how"] == "hung":
        return [finding("loader-config-hung", evidence,
                        fix="%s -X faulthandler -c \"import faulthandler, sys; faulthandler.dump_traceback_later(30, "
                            "exit=True); ...\"  # run your loader for one batch with num_workers=0 to see where it "
                            "blocks; give store calls a timeout" % python())]
    return [finding("loader-rank-crashed", evidence,
                    fix="%s -X faulthandler your_train.py  # with num_workers=0: the native stack of the crash "
                        "is printed on stderr" % python())]


def config_failures(facts, options):
    found = []
    for config in facts.get("configs") or []:
        if config.get("status") != "failed" or SHM_ERRORS.search(config.get("error") or ""):
            continue
        fix = ("# measured without %s; the other configurations stand. Reproduce: %s"
               % (config["name"], advice_code_for(config, facts)))
        found.append(finding("loader-config-failed", {"config": config["name"], "settings": config["settings"],
                                                      "error": config.get("error")}, fix=fix))
    return found


def loader_spec(facts):
    """The loader the user asked for, as the recommendation's code writes it."""
    return dict(facts["request"], hetero=(facts.get("graph") or {}).get("kind") == "hetero")


def advice_code_for(config, facts):
    """The loader of one configuration as code on one line (after a comment: each newline becomes '; ')."""
    from .advice import code, env_of, kwargs_of, worker_threads_of
    settings = config["settings"]
    return code(loader_spec(facts), kwargs_of(settings), env_of(settings), worker_threads_of(settings)).replace(
        "\n", "; ")


def budget_short(facts, options):
    skipped = [c["name"] for c in facts.get("configs") or [] if c.get("status") in ("skipped", "out-of-time")]
    out_of_time = (facts.get("stopped") or {}).get("how") == "out-of-time"
    cut = facts.get("child", {}).get("killed_for") == "deadline" or out_of_time
    if not skipped and not cut:
        return []
    return [finding("loader-budget-short", {"budget_s": options.budget, "skipped": skipped,
                                            "measured": len(plan.measured(facts.get("configs") or [])),
                                            "cut_at_deadline": cut,
                                            "during": (facts.get("stopped") or {}).get("during")},
                    fix=rerun(options, budget=options.bounds["retry"]))]


PAIRED_EVIDENCE = ("config", "verdict", "baseline", "speedup", "speedup_range", "speedup_over_default",
                   "median_epoch_batches_per_s", "baseline_median_epoch_batches_per_s",
                   "default_median_epoch_batches_per_s", "epoch_s", "baseline_epoch_s", "rounds", "load",
                   "fastest_measured", "decided", "epochs")


def recommendation(facts, options):
    """From interleaved rounds: faster settings, the baseline kept, or too busy to tell."""
    advice = facts.get("recommendation")
    if not advice:
        return []
    evidence = {k: advice.get(k) for k in PAIRED_EVIDENCE}
    if advice["verdict"] == "faster":
        return [finding("loader-faster-settings", evidence, fix=advice["code"])]
    if advice["verdict"] == "under-load":
        return []  # faster under the load measured only: load_decides says so, with both sides
    load = advice.get("load") or {}
    if advice["verdict"] == "undecided" and plan.busy_load(load):
        contenders = (advice.get("decided") or {}).get("contenders") or []
        meanwhile = ("keep your settings until then" if not contenders else
                     "%s beat your settings in every round here, but which of them is fastest the load decided"
                     % " and ".join(contenders))
        return [finding("loader-too-busy-to-tell", evidence,
                        fix="%s  # when the machine is quiet (other processes' CPU was %.1f cores here); %s"
                            % (rerun(options, budget=options.bounds["quiet_retry"]), load["other_cpu_cores_median"],
                               meanwhile))]
    return [finding("loader-default-is-best", evidence, fix=advice["code"])]


def load_decides(facts, options):
    """The answer depends on the load: the run was busy and its answer holds for that load only
    (verdict "under-load": the quiet side measured in too few rounds, or picking another setting), or
    rounds under load and quiet rounds picked different winners. Say so and give the setting under load
    and the quiet one, or the command that measures the quiet one."""
    advice = facts.get("recommendation")
    if not advice:
        return []
    configs = {c["name"]: c for c in plan.measured(facts.get("configs") or [])}
    by_load = advice.get("by_load") or {}
    load = advice.get("load") or {}
    if advice["verdict"] == "under-load" and configs.get(advice["config"]):
        busy, quiet = configs[advice["config"]], configs.get(by_load.get("quiet"))
    elif by_load.get("busy") and by_load.get("quiet") and by_load["busy"] != by_load["quiet"]:
        busy, quiet = configs[by_load["busy"]], configs[by_load["quiet"]]
    else:
        return []
    if quiet is not None and busy["settings"] == quiet["settings"]:
        return []
    from .advice import env_of, kwargs_of

    def described(config):
        return {"config": config["name"], "settings": kwargs_of(config["settings"]), "env": env_of(config["settings"])}

    def setting(config):
        kwargs = ", ".join("%s=%r" % item for item in kwargs_of(config["settings"]).items())
        return "export OMP_NUM_THREADS=%d%s" % (config["settings"]["torch_threads"],
                                                " with NeighborLoader(..., %s)" % kwargs if kwargs else "")
    under_load = dict(described(busy), ratio_to_baseline=busy.get("ratio_to_baseline"),
                      ratio_to_baseline_range=busy.get("ratio_to_baseline_range"))
    if busy["name"] == advice["config"]:
        under_load["code"] = advice["code"]
    evidence = {"under_load": under_load, "quiet": dict(described(quiet), measured=True) if quiet else
                {"config": None, "measured": False}, "load": load, "verdict": advice["verdict"]}
    if quiet:
        when_quiet = "%s (measured in the quiet rounds)" % setting(quiet)
    else:
        retry = rerun(options, budget=options.bounds["quiet_retry"])
        when_quiet = ("not measured (fewer than two rounds were quiet, and the ranking can differ there): "
                      "rerun when quiet: %s" % retry)
    speedup = busy.get("ratio_to_baseline")
    return [finding("loader-load-decides", evidence,
                    fix="under load (other processes' CPU %s cores): %s%s; when the machine is quiet: %s"
                        % (load.get("other_cpu_cores_median"), setting(busy),
                           " (%.2fx your settings, paired)" % speedup if speedup else "", when_quiet))]


def bound_by(facts, options):
    split = facts.get("breakdown")
    if not split or split.get("status") != "ok" or not split["batch_s"]:
        return []
    evidence = {k: round(split[k], 5) for k in ("sample_s", "fetch_s", "collate_s", "batch_s")}
    advice = facts.get("recommendation") or {}
    if split["sample_s"] / split["batch_s"] >= SAMPLER_BOUND_SHARE:
        evidence["sample_share"] = round(split["sample_s"] / split["batch_s"], 3)
        return [finding("loader-sampler-bound", evidence, fix=sampler_fix(facts, options, advice))]
    if split["fetch_s"] / split["batch_s"] >= SAMPLER_BOUND_SHARE:
        evidence["fetch_share"] = round(split["fetch_s"] / split["batch_s"], 3)
        return [finding("loader-fetch-bound", evidence,
                        fix="data.x = data.x.to(torch.bfloat16)  # half the bytes gathered per batch; or keep "
                            "filter_per_worker=True (PyG's default on CPU) with num_workers > 0 so workers fetch "
                            "in parallel")]
    return []


def sampler_fix(facts, options, advice):
    """Parallel workers where they measured faster; else pyg-lib where it is missing; else a smaller fan-out."""
    from .advice import loader_line
    spec, kwargs, threads = loader_spec(facts), advice.get("settings") or {}, advice.get("worker_threads") or 1
    checker = script_command("check_sampling_backends.py", "--require-neighbor-backend", python=python())
    has_pyg_lib = (facts.get("backend") or {}).get("pyg_lib")
    if kwargs.get("num_workers"):
        return "%s  # sample in parallel worker processes (measured faster)%s" % (
            loader_line(spec, kwargs, threads), "" if has_pyg_lib else "; pyg-lib samples faster than torch-sparse: "
            + checker)
    if not has_pyg_lib:
        return "%s  # names the install command of pyg-lib, which samples faster than torch-sparse" % checker
    fewer = [max(1, hop // 2) if hop > 0 else hop for hop in spec["num_neighbors"]]
    return "%s  # fewer neighbours per hop, if the model's accuracy allows" % loader_line(
        dict(spec, num_neighbors=fewer), kwargs, threads)


def pairs(configs, differs):
    """(variant, base) pairs of measured configurations equal in every setting but `differs`."""
    ok = plan.measured(configs)
    for variant in ok:
        for base in ok:
            if base is variant:
                continue
            same = all(variant["settings"][k] == base["settings"][k] for k in variant["settings"] if k != differs)
            if same and variant["settings"][differs] != base["settings"][differs]:
                yield variant, base


def comparison(variant, base):
    return {"variant": variant["name"], "base": base["name"],
            "variant_epoch_batches_per_s": variant["epoch_batches_per_s"],
            "base_epoch_batches_per_s": base["epoch_batches_per_s"],
            "noise_batches_per_s": round(max(plan.spread(variant), plan.spread(base)), 3)}


def threads_oversubscribed(facts, options):
    cores = len((facts.get("host") or {}).get("allowed_cores") or []) or None
    for variant, base in pairs(facts.get("configs") or [], "torch_threads"):
        fewer = variant["settings"]["torch_threads"] < base["settings"]["torch_threads"]
        if fewer and plan.wins(facts.get("blocks") or [], variant["name"], base["name"]):
            threads = variant["settings"]["torch_threads"]
            evidence = dict(comparison(variant, base), threads=threads,
                            base_threads=base["settings"]["torch_threads"], ranks=facts["request"]["ranks"],
                            workers=base["settings"]["num_workers"], cores=cores)
            return [finding("loader-threads-oversubscribed", evidence,
                            fix="export OMP_NUM_THREADS=%d  # before Python starts, in every rank" % threads)]
    return []


def startup_unpaid(facts, options):
    configs = facts.get("configs") or []
    default = next((c for c in plan.measured(configs) if c["name"] == "default"), None)
    if default is None:
        return []
    for config in plan.measured(configs):
        workers = config["settings"]["num_workers"]
        if not workers or config["settings"]["persistent_workers"]:
            continue
        steady = plan.beats(config, default, "batches_per_s")
        if steady and not plan.beats(config, default):
            evidence = {"config": config["name"], "restart_s": config["restart_s"],
                        "batches_per_s": config["batches_per_s"], "default_batches_per_s": default["batches_per_s"],
                        "epoch_batches_per_s": config["epoch_batches_per_s"],
                        "default_epoch_batches_per_s": default["epoch_batches_per_s"],
                        "batches_per_epoch": (facts.get("graph") or {}).get("batches_per_epoch")}
            return [finding("loader-worker-startup-unpaid", evidence,
                            fix="loader = NeighborLoader(..., num_workers=%d, persistent_workers=True)  # workers "
                                "start once, not every epoch" % workers)]
    return []


def shm_too_small(facts, options):
    failed = [c for c in facts.get("configs") or []
              if c.get("status") == "failed" and SHM_ERRORS.search(c.get("error") or "")]
    shm = (facts.get("host") or {}).get("shm")
    graph = facts.get("graph") or {}
    need = None
    if graph.get("feature_bytes") and graph.get("num_edges"):
        # Workers get the graph's CSC in shared memory, and with filter_per_worker=True each batch's
        # features travel through it too; a bound from below is the shared CSC plus the features once.
        need = facts["request"]["ranks"] * (graph["feature_bytes"] + graph["num_edges"] * 16)
    small = shm is not None and need is not None and shm["free_bytes"] < need
    if not failed and not small:
        return []
    size_gb = max(2, int((need or 0) * 2 / 2 ** 30) + 1)
    evidence = {"shm": shm, "estimated_need_bytes": need,
                "failed": [{"config": c["name"], "error": c.get("error")} for c in failed]}
    return [finding("loader-shm-too-small", evidence, severity="error" if failed else "warning",
                    fix="sudo mount -o remount,size=%dG /dev/shm  # in Docker: docker run --shm-size=%dg ..."
                    % (size_gb, size_gb))]


RULES = [no_backend, input_problem, stopped, config_failures, shm_too_small, budget_short, recommendation,
         load_decides, bound_by, threads_oversubscribed, startup_unpaid]
