"""What the CUDA facts mean, decided once: which compiled code runs on which device, CUDA_VISIBLE_DEVICES
as CUDA reads it, whether torch could use the GPUs (cuda_usability, assembled into facts["cuda"]) and how far
the driver is behind torch (driver_gap). Assembly and the GPU rule both read them from here."""

import re

from diagnostics_core.wheels import parse_version
from .parsing import cuda_variant
from .tables import EXACT_ONLY_CAPABILITIES, NVML_FATAL_ERRORS, TORCH_CUDA_BUILD_ARCHS


def driver_gap(built, driver):
    """How far the NVML driver's CUDA is behind torch's: "major" (torch cannot use the GPU), "minor"
    (minor-version compatibility: precompiled kernels run, newer PTX does not), or None."""
    if not built or not driver:
        return None
    if parse_version(driver)[0] < parse_version(built)[0]:
        return "major"
    if parse_version(driver)[:2] < parse_version(built)[:2]:
        return "minor"
    return None


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
    if driver_gap(built, driver) == "major":
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
