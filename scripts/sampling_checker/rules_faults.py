"""Rules about hostile inputs (issue 21): files the static stage could not read, and NVML libraries
that crash, hang, are no shared object, or report more devices than are read."""

from diagnostics_core.command import line
from .findings import finding

SHOWN_PATHS = 5  # paths named in a fix; the evidence lists more


def rule_unreadable_files(facts, options):
    unread = (facts.get("environment") or {}).get("unreadable_files") or {}
    if not unread.get("count"):
        return []
    paths = [entry["path"] for entry in unread["paths"]]
    return [finding("files-unreadable", {
        "count": unread["count"], "paths": unread["paths"],
        "effect": "what these files say is missing from the facts (a package may show as absent or "
                  "without a version)"},
        fix="%s  # not run here; each should be a readable regular file or folder: reinstall the package that "
            "owns a broken .dist-info, or remount a hung file system" % line("ls", "-ld", "--", paths[:SHOWN_PATHS]))]


NVML_FAULT_WORDS = {
    "load": "while loading it (dlopen runs its constructors)",
    "init": "in nvmlInit",
    "devices": "while reading its devices",
    "shutdown": "in nvmlShutdown",
    None: "before it said which part it was in",
}


def nvml_fault_fix(nvml):
    if nvml.get("library_override"):
        return ("unset SCALABLE_DISTRIBUTED_NVML  # it names evidence.library; point it at the driver's "
                "libnvidia-ml.so.1 or leave it unset")
    return ("nvidia-smi  # not run here; it loads the same library: if it crashes or hangs too, reinstall the "
            "NVIDIA driver (its user-space part must match the loaded kernel module)")


def rule_nvml_faults(facts, options):
    nvml = (facts.get("cuda") or {}).get("nvml") or {}
    reason = nvml.get("reason")
    found = []
    if reason in ("crashed", "hung"):
        evidence = {"library": nvml.get("library"), "library_override": nvml.get("library_override"),
                    "what": "%s %s" % ("it crashed the probe child" if reason == "crashed" else
                                       "it did not return", NVML_FAULT_WORDS.get(nvml.get("stage"), "")),
                    "stage": nvml.get("stage")}
        for key in ("signal", "returncode", "seconds", "error", "stderr_tail"):
            if nvml.get(key) is not None:
                evidence[key] = nvml[key]
        evidence["effect"] = ("torch's NVML-based CUDA check (PYTORCH_NVML_BASED_CUDA_CHECK=1) and nvidia-smi load "
                              "the same library; the checker read no GPU facts")
        found.append(finding("nvml-%s" % reason, evidence, fix=nvml_fault_fix(nvml)))
    elif reason == "library-invalid":
        found.append(finding("nvml-library-invalid", {
            "library": nvml.get("library"), "variable": "SCALABLE_DISTRIBUTED_NVML", "loader_says": nvml.get("message")},
            fix="unset SCALABLE_DISTRIBUTED_NVML  # or point it at the driver's libnvidia-ml.so.1 "
                "(ldconfig -p | grep libnvidia-ml)"))
    if nvml.get("devices_capped_at"):
        found.append(finding("nvml-devices-capped", {
            "reported": nvml.get("device_count_reported"), "read": len(nvml.get("devices") or []),
            "cap": nvml["devices_capped_at"],
            "why": "each device costs several NVML calls; a count this large is more likely a driver fault"},
            fix="nvidia-smi -L | wc -l  # not run here; compare with the count NVML reported"))
    return found


