"""Rules about CPUs, threads, NVML, GPUs and the CUDA/distributed gates."""

import os

from diagnostics_core.command import line
from diagnostics_core.wheels import parse_version, platform_key, torch_install_command
from .gpu_facts import capability_number, driver_gap, match_visible_entry, torch_builds_covering
from .findings import FINDINGS, finding
from .install import interpreter, pip, uses_uv, with_pip
from .rules_container import export_threads, local_processes, usable_cores
from .parsing import parse_int_variable
from .tables import CUDA_MAJOR_MIN_DRIVER, NVML_FATAL_ERRORS


def rule_cpu(facts, options):
    cpu = facts["cpu"]
    threads = facts["environment"]["threads"]
    found = []
    logical = cpu.get("logical_cores") or 0
    if cpu.get("affinity") and cpu["affinity"]["count"] < logical:
        found.append(finding("cpu-affinity-restricted", {
            "allowed": cpu["affinity"], "logical_cores": logical},
            fix=None))
    invalid = {}
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        if name in threads:
            value, error = parse_int_variable(threads[name].split(",")[0])
            if error or value < 1:
                invalid[name] = threads[name]
    allowed = usable_cores(facts)  # the affinity count, or the cgroup's CPU quota where that is smaller
    if invalid:
        found.append(finding("cpu-threads-invalid", {"invalid": invalid}, fix=export_threads(max(1, allowed))))
    local_procs = local_processes(facts)
    per_process = max(1, allowed // local_procs)
    if "OMP_NUM_THREADS" not in threads:
        found.append(finding("cpu-threads-unset", {
            "allowed_cores": allowed, "local_processes": local_procs,
            "torch_num_threads": facts["torch"].get("num_threads")},
            fix=export_threads(per_process)))
    elif "OMP_NUM_THREADS" not in invalid:
        value = parse_int_variable(threads["OMP_NUM_THREADS"].split(",")[0])[0]
        if value * local_procs > allowed:
            found.append(finding("cpu-threads-oversubscribed", {
                "OMP_NUM_THREADS": value, "local_processes": local_procs, "allowed_cores": allowed},
                fix=export_threads(per_process)))
    numa = cpu.get("numa_nodes") or []
    if len(numa) > 1:
        found.append(finding("cpu-numa-multi-node", {"numa_nodes": numa},
                             fix=None))
    return found


NVML_INIT_FIXES = {
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH":
        "sudo reboot  # unrun; the loaded kernel module is older than the upgraded user-space driver; "
        "without a reboot: sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe nvidia",
    "NVML_ERROR_DRIVER_NOT_LOADED":
        "sudo modprobe nvidia  # unrun; in a container, start it with the GPUs: docker run --gpus all ...",
    "NVML_ERROR_NO_PERMISSION":
        "ls -l /dev/nvidia*  # unrun; this user needs read/write on them (the video group, or the scheduler's "
        "GPU allocation)",
}


def rule_nvml(facts, options):
    nvml = (facts.get("cuda") or {}).get("nvml") or {}
    if nvml.get("reason") != "init-failed":
        return []
    error = nvml.get("error") or {}
    return [finding("nvml-init-failed", {
        "library": nvml.get("library"), "error": error,
        "nvidia_smi_says": "Failed to initialize NVML: %s" % error.get("message"),
        "cuda_after_this": "fails too" if error.get("name") in NVML_FATAL_ERRORS else
                           "may still work; the checker cannot tell without a CUDA call"},
        severity="error" if error.get("name") in NVML_FATAL_ERRORS else None,
        fix=NVML_INIT_FIXES.get(error.get("name"), "nvidia-smi  # unrun; shows the same NVML error with more context"))]


def gpu_summary(devices):
    return [dict((key, device.get(key)) for key in ("index", "name", "capability", "uuid")) for device in devices]


def torch_build_fix(facts, builds, comment):
    release = (facts["torch"].get("version") or "").split("+")[0]
    if not builds or not release:
        return None
    command = torch_install_command(release, builds[0], interpreter(facts), platform_key(facts["python"]),
                                    uses_uv(facts))
    return with_pip(facts, "%s  # unrun; %s" % (command, comment))


def rule_gpu(facts, options):
    """GPU failures predicted from NVML and torch's build facts, before any CUDA call."""
    cuda = facts.get("cuda") or {}
    nvml = cuda.get("nvml") or {}
    devices = (nvml.get("devices") or []) if nvml.get("available") else []
    torch = facts["torch"]
    if torch.get("status") != "ok" or "visible_devices" not in cuda or not devices:
        return []
    found = []
    capabilities = sorted(set(c for c in (capability_number(d.get("capability")) for d in devices) if c))
    if not cuda.get("compiled"):
        if not torch.get("hip"):
            builds = torch_builds_covering(cuda, capabilities)
            found.append(finding("cuda-torch-cpu-only", {
                "torch": torch.get("version"), "gpus": gpu_summary(devices),
                "driver_cuda": nvml.get("cuda_driver_version"), "builds_with_kernels": builds,
                "predicted_error": "AssertionError: Torch not compiled with CUDA enabled (at the first .cuda())"},
                fix=torch_build_fix(facts, builds, "the CUDA build of the same torch release; then reinstall "
                                    "PyG's extensions for it (install.command of a new run)")))
        return found
    visibility = cuda["visible_devices"]
    if visibility["set"] and not visibility["visible"]:
        found.append(finding("cuda-visible-devices-hides-all", {
            "CUDA_VISIBLE_DEVICES": visibility["value"], "unmatched": visibility["unmatched"],
            "nvml_devices": gpu_summary(devices),
            "predicted_error": "torch.cuda.is_available() is False; .cuda() raises RuntimeError: "
                               "No CUDA GPUs are available"},
            fix="%s  # or unset it; under SLURM let the allocation set it" % line(
                "export", "CUDA_VISIBLE_DEVICES=" + ",".join(str(d["index"]) for d in devices))))
    elif visibility["unmatched"]:
        named = []
        for entry in visibility["value"].split(","):
            if match_visible_entry(entry.strip(), devices)[0] is not None and entry.strip() not in named:
                named.append(entry.strip())
        found.append(finding("cuda-visible-devices-unknown-device", {
            "CUDA_VISIBLE_DEVICES": visibility["value"], "unmatched": visibility["unmatched"],
            "ignored_after_it": visibility["ignored"],
            "visible": [v["entry"] for v in visibility["visible"]], "nvml_devices": gpu_summary(devices)},
            fix=line("export", "CUDA_VISIBLE_DEVICES=" + ",".join(named))))
    built, driver = cuda.get("built_with"), nvml.get("cuda_driver_version")
    gap = driver_gap(built, driver)
    if gap:
        major = parse_version(built)[0]
        other_major = gap == "major"
        builds = torch_builds_covering(cuda, capabilities, within_driver=True)
        evidence = {"driver_version": nvml.get("driver_version"), "driver_cuda": driver, "torch_cuda": built,
                    "torch": torch.get("version"),
                    "minimum_driver_for_cuda_%d" % major: ">= %s" % CUDA_MAJOR_MIN_DRIVER.get(major, "?")}
        if other_major:
            found_version = parse_version(driver)[0] * 1000 + parse_version(driver)[1] * 10  # as CUDA prints it
            evidence["predicted_error"] = (
                "RuntimeError: The NVIDIA driver on your system is too old (found version %d); "
                "torch.cuda.is_available() is False" % found_version)
        else:
            evidence["compatibility"] = (
                "minor-version compatibility: a CUDA %s build runs on a CUDA %s driver for its precompiled "
                "kernels; JIT of newer PTX fails ('the provided PTX was compiled with an unsupported "
                "toolchain') and features that need a newer driver are refused" % (built, driver))
        # rebuilt from its numbers: torch.version.cuda is input, and this text ends up in a fix's comment
        upgrade = "or upgrade the NVIDIA driver to one whose CUDA version (nvidia-smi, top right) is >= %d.%d" % (
            parse_version(built)[:2])
        found.append(finding("cuda-driver-too-old", evidence, severity=None if other_major else "warning",
                             title=None if other_major else "the NVIDIA driver is one CUDA minor behind torch "
                                                            "(minor-version compatibility)",
                             fix=torch_build_fix(facts, builds, "a torch build this driver runs; " + upgrade)
                             or "%s (unrun)" % upgrade[3:]))
    missing = [a for a in cuda.get("device_archs") or [] if a["kernels"] is False]
    if missing:
        by_index = dict((d["index"], d) for d in devices)
        lacking = sorted(set(capability_number(a["capability"]) for a in missing))
        builds = torch_builds_covering(cuda, lacking)
        evidence = {"gpus": gpu_summary([by_index[a["index"]] for a in missing]), "arch_list": cuda.get("arch_list"),
                    "torch": torch.get("version"), "builds_with_kernels": builds,
                    "predicted_error": "torch.AcceleratorError: CUDA error: no kernel image is available for "
                                       "execution on the device",
                    "raised_at": "the first CUDA kernel (torch only warns when CUDA initialises)"}
        if (cuda.get("cudnn_version") or 0) >= 91100 and min(lacking) < 75:
            evidence["cudnn"] = ("cuDNN %d refuses SM < 7.5: RuntimeError: cuDNN version %d is not compatible "
                                 "with devices with SM < 7.5" % (cuda["cudnn_version"], cuda["cudnn_version"]))
        found.append(finding("cuda-arch-not-compiled", evidence, fix=torch_build_fix(
            facts, builds, "its kernels cover sm_%s; then reinstall PyG's extensions for it" % ", sm_".join(
                str(c) for c in lacking))))
    return found


def blocking_fix(cuda):
    """Point at the finding whose fix unblocks CUDA, when one does."""
    named = [reason for reason in cuda.get("blocked_by") or [] if reason in FINDINGS]
    return "apply the fix of the %s finding" % " and ".join(named) if named else None


def rule_gates_cuda_distributed(facts, options):
    found = []
    torch = facts["torch"]
    cuda = facts.get("cuda") or {}
    if torch.get("status") == "ok" and (cuda.get("device_count") or 0) == 0:
        if options.require_cuda or torch.get("cuda"):
            found.append(finding("cuda-unavailable", {
                "torch_cuda": torch.get("cuda"), "nvml": cuda.get("nvml"), "blocked_by": cuda.get("blocked_by"),
                "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")},
                severity="error" if options.require_cuda else "info",
                fix=None if torch.get("cuda") else with_pip(facts, pip(facts, ["install", "torch"]) + (
                    "  # the default Linux wheel is a CUDA build; or pick one at https://pytorch.org/get-started"))))
            if torch.get("cuda"):
                found[-1]["fix"] = blocking_fix(cuda)
    distributed = facts.get("distributed") or {}
    if torch.get("status") == "ok" and not distributed.get("available", False):
        found.append(finding("distributed-unavailable", {"distributed": distributed},
                             severity="error" if options.require_distributed else "info",
                             fix="install a torch build with distributed support (the PyPI Linux wheels have it)"))
    return found
