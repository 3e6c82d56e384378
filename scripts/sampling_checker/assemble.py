"""Assembly: the child's step records and the static facts become one facts dictionary (CUDA
usability from gpu_facts, the sampling feature matrix, install facts)."""

from diagnostics_core.wheels import EXTENSIONS
from .gpu_facts import cuda_usability
from .install import install_facts
from .probe import nvml_library, step_data, step_outcome


def assemble_facts(static, probe, python):
    results = probe["results"] if probe else {}
    facts = dict(static)
    facts["probe"] = None
    if probe is not None:
        facts["probe"] = {
            "interpreter": python,
            "complete": probe["complete"],
            "hang_limit_s": probe["hang_limit_s"],
            "blocked_modules": probe["blocked_modules"],
            "refused_sockets": step_data(results, "refused_sockets") or [],
            "culprits": probe["culprits"],
            "attempts": probe["attempts"],
        }
    torch_data = step_data(results, "torch")
    facts["torch"] = dict(torch_data, status="ok") if torch_data else step_outcome(results, "torch")
    if probe is None:
        facts["torch"] = {"status": "not-probed"}
    facts["cuda"] = step_data(results, "cuda") or dict(step_outcome(results, "cuda"), nvml=step_data(results, "nvml"))
    if probe is not None and not facts["cuda"].get("nvml"):
        facts["cuda"]["nvml"] = nvml_fault(results)
    facts["cuda"].update(cuda_usability(facts["cuda"]))
    facts["distributed"] = step_data(results, "distributed") or step_outcome(results, "distributed")
    pyg = step_data(results, "pyg")
    facts["pyg"] = dict(pyg, status="ok") if pyg else step_outcome(results, "pyg")
    extensions = {}
    for module, dist in EXTENSIONS:
        step = "ext:" + module
        data = step_data(results, step)
        entry = dict(data) if data else step_outcome(results, step)
        if entry.get("status") == "deadline":
            entry["status"] = "hung"
            entry["deadline"] = True
        elif entry.get("status") == "error":  # the probe itself failed, not the import
            entry["status"] = "probe-error"
        entry["distribution"] = dist
        extensions[module] = entry
    facts["extensions"] = extensions
    smoke = {}
    for backend in ("pyg-lib", "torch-sparse"):
        step = "smoke:" + backend
        data = step_data(results, step)
        if data is not None:
            smoke[backend] = data
        else:
            outcome = step_outcome(results, step)
            outcome["passed"] = False
            smoke[backend] = outcome
    # A failed features step must show, not read as "nothing available".
    features = step_data(results, "features") or (step_outcome(results, "features") if probe else {})
    facts["sampling"] = {
        "neighbor_backend": (pyg or {}).get("neighbor_backend"),
        "smoke": smoke,
        "features": feature_matrix(facts, smoke, features),
        "probe": features,
    }
    if probe is None:
        mark_not_probed(facts)
    facts["install"] = install_facts(facts, python)
    return facts


# How the nvml step ended -> the reason in the facts ("error": the probing code raised inside the library).
NVML_FAULTS = {"crashed": "crashed", "hung": "hung", "deadline": "hung", "error": "crashed"}


def nvml_fault(results):
    """NVML facts when the nvml step itself failed (the library crashed the child, never returned,
    or the probing code raised): which library, in which part, and how; None when it was not run."""
    record = results.get("nvml") or {}
    if record.get("status") not in NVML_FAULTS:
        return None
    library, override = nvml_library()
    fault = {"available": False, "library": library, "library_override": override,
             "reason": NVML_FAULTS[record["status"]], "stage": record.get("stage")}
    for key in ("signal", "returncode", "seconds", "error"):
        if record.get(key) is not None:
            fault[key] = record[key]
    if record.get("stderr_tail"):
        fault["stderr_tail"] = record["stderr_tail"][-1000:]
    return fault


def mark_not_probed(facts):
    """--static-only imports nothing: what only the probe can know is "not-probed"/null, never false."""
    for section in ("torch", "cuda", "distributed", "pyg"):
        facts[section] = {"status": "not-probed"}
    for entry in facts["extensions"].values():
        entry["status"] = "not-probed"
    sampling = facts["sampling"]
    sampling["smoke"] = {backend: {"status": "not-probed", "passed": None} for backend in sampling["smoke"]}
    sampling["features"] = {name: None for name in sampling["features"]}


def feature_matrix(facts, smoke, features):
    pyg = facts["pyg"] if facts["pyg"].get("status") == "ok" else {}
    flags = pyg.get("flags", {})
    pyg_lib_works = bool(flags.get("WITH_PYG_LIB")) and smoke["pyg-lib"].get("passed", False)
    sparse_works = bool(flags.get("WITH_TORCH_SPARSE")) and smoke["torch-sparse"].get("passed", False)
    backend = pyg.get("neighbor_backend")
    cuda = facts.get("cuda") or {}
    metis = features.get("pyg_lib_partition") or bool((features.get("torch_sparse_metis") or {}).get("works"))
    dist_ops = features.get("dist_ops") or {}
    return {
        "neighbor": bool(backend) and smoke.get(backend, {}).get("passed", False),
        "induced": sparse_works,
        "disjoint": pyg_lib_works,
        "weighted": pyg_lib_works and bool(flags.get("WITH_WEIGHTED_NEIGHBOR_SAMPLE")),
        "temporal_node": pyg_lib_works,
        "temporal_edge": pyg_lib_works and bool(flags.get("WITH_EDGE_TIME_NEIGHBOR_SAMPLE")),
        "metis": bool(metis),
        "distributed": bool(dist_ops) and all(dist_ops.values()),
        "gpu": bool(features.get("pyg_lib_cuda_sampling")) and (cuda.get("device_count") or 0) > 0,
        "hgt_shadow": sparse_works,
    }
