"""Assembly: the child's step records and the static facts become one facts dictionary (CUDA
usability, the sampling feature matrix, install facts)."""

import re

from diagnostics_core.wheels import EXTENSIONS, parse_version
from .install import install_facts
from .parsing import cuda_variant
from .probe import nvml_library, step_data, step_outcome
from .tables import EXACT_ONLY_CAPABILITIES, NVML_FATAL_ERRORS, TORCH_CUDA_BUILD_ARCHS


def assemble_facts(static, probe, python, options):
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


def capability_number(text):
    """'9.0' -> 90, '12.1' -> 121 (the numbering of sm_XY)."""
    major, _, minor = (text or "").partition(".")
    return int(major) * 10 + int(minor or 0) if major.isdigit() and (minor or "0").isdigit() else None


def code_runs_on(code, ptx, device):
    """Whether code compiled for sm_<code> (or PTX compute_<code>) runs on a device of that capability.

    A cubin runs on later minors of its own major; PTX is JIT-compiled by the
    driver for any later capability.
    """
    if code in EXACT_ONLY_CAPABILITIES or device in EXACT_ONLY_CAPABILITIES:
        return code == device
    if ptx:
        return device >= code
    return device // 10 == code // 10 and device >= code


def arch_flags_cover(arch_list, device):
    for flag in arch_list:
        match = re.match(r"^(sm|compute)_(\d+)[af]?$", flag)
        if match and code_runs_on(int(match.group(2)), match.group(1) == "compute", device):
            return True
    return False


def match_visible_entry(entry, devices):
    """What one CUDA_VISIBLE_DEVICES entry names: (NVML index, MIG UUID or None) or (None, why not)."""
    if entry.startswith(("GPU-", "MIG-")):
        if entry.startswith("MIG-"):
            migs = [(d["index"], m["uuid"]) for d in devices for m in d.get("mig_devices") or []]
            if not migs:
                return None, "no GPU has MIG instances (MIG mode off or none created)"
            found = [(index, mig) for index, mig in migs if mig.startswith(entry)]
        else:
            found = [(d["index"], None) for d in devices if (d.get("uuid") or "").startswith(entry)]
        if len(found) == 1:
            return found[0], None
        return None, "matches no device UUID NVML lists" if not found else "ambiguous UUID prefix"
    # CUDA reads entries like strtoul: '1gpu' is 1; only ASCII digits count ('０', fullwidth, is no device).
    number = re.match(r"^\+?([0-9]+)", entry)
    if number:
        index = int(number.group(1))
        if index < len(devices):
            return (index, None), None
        return None, "no device %d: NVML lists %d (indices 0-%d)" % (index, len(devices), len(devices) - 1)
    if entry.startswith("-"):
        return None, "a negative index"
    return None, "neither a device index nor a GPU-/MIG- UUID" if entry else "empty"


ASCII_SPACE = " \t\n\r\f\v"  # what C's isspace() skips; str.strip() would also drop Unicode spaces


def resolve_visible_devices(value, devices):
    """CUDA's reading of CUDA_VISIBLE_DEVICES against NVML's device list.

    CUDA stops at the first entry that names no device (later entries are
    ignored too), and torch reads a repeated device as no device at all.
    """
    if value is None or not devices:
        return {"set": value is not None, "value": value, "unmatched": [], "ignored": [],
                "visible": [{"index": d["index"], "mig": None} for d in devices]}
    visible, unmatched, ignored = [], [], []
    entries = [e.strip(ASCII_SPACE) for e in value.split(",")]
    for position, entry in enumerate(entries):
        named, why = match_visible_entry(entry, devices)
        if named is None:
            unmatched.append({"entry": entry, "reason": why})
            ignored = entries[position + 1:]
            break
        if any(v["index"] == named[0] and v["mig"] == named[1] for v in visible):
            unmatched.append({"entry": entry, "reason": "repeats an earlier entry: torch then sees no device"})
            visible = []
            break
        visible.append({"index": named[0], "mig": named[1], "entry": entry})
    return {"set": True, "value": value, "visible": visible, "unmatched": unmatched, "ignored": ignored}


def cuda_usability(cuda):
    """Whether torch could really use the GPUs, derived without a CUDA call.

    available: true when NVML lists devices, CUDA_VISIBLE_DEVICES leaves some,
    the driver's CUDA major is at least torch's, and torch has kernels for at
    least one visible device; null when that cannot be told without a CUDA
    call (NVML fails in a way CUDA may survive) or nothing was probed.
    """
    nvml = cuda.get("nvml") or {}
    devices = (nvml.get("devices") or []) if nvml.get("available") else []
    visibility = resolve_visible_devices(cuda.get("visible_devices_env"), devices)
    by_index = dict((d["index"], d) for d in devices)
    archs = []
    for entry in visibility["visible"]:
        capability = capability_number(by_index[entry["index"]].get("capability"))
        archs.append({"index": entry["index"], "capability": by_index[entry["index"]].get("capability"),
                      "kernels": None if capability is None else arch_flags_cover(cuda.get("arch_list") or [],
                                                                                    capability)})
    built, driver = cuda.get("built_with"), nvml.get("cuda_driver_version")
    blocked = []
    if "compiled" not in cuda:
        blocked.append("torch-not-probed")  # --static-only, or torch failed first
    elif not cuda["compiled"]:
        blocked.append("torch-not-a-cuda-build")
    if not nvml:
        blocked.append("nvml-not-probed")
    elif nvml.get("reason") == "library-not-found":
        blocked.append("no-nvidia-driver")
    elif nvml.get("reason") == "init-failed":
        blocked.append("nvml-init-failed")
    elif nvml.get("reason") in ("crashed", "hung", "library-invalid"):
        blocked.append("nvml-" + nvml["reason"])
    elif not devices:
        blocked.append("no-devices")
    elif not visibility["visible"]:
        blocked.append("cuda-visible-devices-hides-all")
    if built and driver and parse_version(driver)[0] < parse_version(built)[0]:
        blocked.append("cuda-driver-too-old")
    if cuda.get("compiled") and archs and not any(a["kernels"] for a in archs):
        blocked.append("cuda-arch-not-compiled")
    # A broken NVML says nothing about CUDA itself (torch falls back to the CUDA runtime).
    undecided = ["torch-not-probed", "nvml-not-probed", "nvml-crashed", "nvml-hung", "nvml-library-invalid"]
    if (nvml.get("error") or {}).get("name") not in NVML_FATAL_ERRORS:
        undecided.append("nvml-init-failed")  # CUDA may work although NVML does not
    available = None if blocked and all(b in undecided for b in blocked) else not blocked
    return {
        "available": available,
        "device_count": len(visibility["visible"]) if available else 0,
        "blocked_by": blocked,
        "visible_devices": visibility,
        "device_archs": archs,
    }


def torch_builds_covering(cuda, capabilities, within_driver=False):
    """CUDA variants ('cu126') of the probed torch release with kernels for every capability.

    Newest first, those the NVML driver runs without minor-version caveats
    first; a build of a newer CUDA major than the driver's is left out, and
    with within_driver so is any build newer than the driver's CUDA.
    """
    table = cuda.get("releases_code_cc") or TORCH_CUDA_BUILD_ARCHS
    driver = (cuda.get("nvml") or {}).get("cuda_driver_version")
    covering = [version for version, codes in table.items()
                if all(any(code_runs_on(code, False, c) for code in codes) for c in capabilities)]
    covering.sort(key=parse_version, reverse=True)
    if driver:
        have = parse_version(driver)[:2]
        older = [v for v in covering if parse_version(v)[:2] <= have]
        newer_minor = [v for v in covering if parse_version(v)[0] == have[0] and parse_version(v)[:2] > have]
        covering = older + ([] if within_driver else newer_minor)
    return [cuda_variant(version) for version in covering]


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
