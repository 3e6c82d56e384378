"""RULES, the complete list of the checker's rules, and the gates (the Spec's rules and gates)."""

from .findings import checker_command, finding

from .rules_environment import (rule_interpreter_choice, rule_probe_deadline, rule_pyg_shadowed,
                                rule_python_supported_by_pyg, rule_torch_and_pyg_presence, rule_torch_shadowed)
from .rules_extensions import (rule_conda_pip_mixed, rule_duplicate_distributions, rule_extension_imports,
                               rule_feature_verdicts, rule_legacy_extensions, rule_neighbor_sampling,
                               rule_no_prebuilt_wheels, rule_pyg_defects, rule_stale_local_build,
                               rule_wheel_tags)
from .rules_container import rule_cgroup_cpu, rule_cgroup_memory, rule_open_files, rule_shm
from .rules_hardware import rule_cpu, rule_gates_cuda_distributed, rule_gpu, rule_nvml
from .rules_faults import rule_nvml_faults, rule_unreadable_files
from .rules_launch import (rule_backend_requested, rule_launch_values_invalid, rule_launcher_rank_ranges,
                           rule_local_rank_device, rule_master_incomplete, rule_multi_node_names,
                           rule_several_agents_per_node, rule_socket_ifnames, rule_torch_rank_ranges,
                           rule_torchrun_slurm_mismatch, rule_world_size_layout)


RULES = (
    rule_interpreter_choice,
    rule_torch_and_pyg_presence,
    rule_torch_shadowed,
    rule_pyg_shadowed,
    rule_python_supported_by_pyg,
    rule_probe_deadline,
    rule_wheel_tags,
    rule_extension_imports,
    rule_no_prebuilt_wheels,
    rule_stale_local_build,
    rule_neighbor_sampling,
    rule_feature_verdicts,
    rule_legacy_extensions,
    rule_duplicate_distributions,
    rule_conda_pip_mixed,
    rule_pyg_defects,
    rule_launch_values_invalid,
    rule_torch_rank_ranges,
    rule_launcher_rank_ranges,
    rule_local_rank_device,
    rule_master_incomplete,
    rule_torchrun_slurm_mismatch,
    rule_backend_requested,
    rule_socket_ifnames,
    rule_multi_node_names,
    rule_world_size_layout,
    rule_several_agents_per_node,
    rule_cpu,
    rule_shm,
    rule_cgroup_cpu,
    rule_cgroup_memory,
    rule_open_files,
    rule_nvml,
    rule_gpu,
    rule_gates_cuda_distributed,
    rule_unreadable_files,
    rule_nvml_faults,
)


def diagnose(facts, options):
    """Every rule on the facts, in RULES' order; when the static stage gave no facts, only that."""
    if "static_failure" in facts:
        return [rule_static_stage(facts, options)]
    findings = []
    for rule in RULES:
        findings.extend(rule(facts, options))
    return findings


def rule_static_stage(facts, options):
    """No static facts, so no rule can run: one finding saying why, with the run again at twice the deadline."""
    again = ["--timeout", "%d" % options.bounds["retry"]]
    if options.static_only:
        again.append("--static-only")
    if options.python is not None:
        again += ["--python", options.python]
    return finding("static-stage-incomplete", facts["static_failure"], fix=(
        "%s  # not run here; if it still does not finish, a file system it reads is hung: ls -l the paths in the "
        "evidence" % checker_command(*again)))


GATE_FLAGS = (("require_neighbor_backend", "neighbor_backend"), ("require_cuda", "cuda"),
              ("require_distributed", "distributed"))


def evaluate_gates(facts, findings, options):
    """The gates asked for (--require-*); without static facts each fails undecided."""
    if "static_failure" in facts:
        return dict((gate, {"passed": False, "reason": "not decided: the static stage gave no facts"})
                    for flag, gate in GATE_FLAGS if getattr(options, flag, None))
    gates = {}
    if options.require_neighbor_backend:
        backend = facts["sampling"]["neighbor_backend"]
        passed = bool(backend) and facts["sampling"]["smoke"].get(backend, {}).get("passed", False)
        gates["neighbor_backend"] = {"passed": passed, "backend": backend}
    if options.require_cuda:
        cuda = facts.get("cuda") or {}
        count = cuda.get("device_count") or 0
        gates["cuda"] = {"passed": cuda.get("available") is True and count > 0, "device_count": count}
    if options.require_distributed:
        distributed = facts.get("distributed") or {}
        backend = options.require_distributed
        passed = bool(distributed.get("available")) and (
            backend == "any" or bool(distributed.get("backends", {}).get(backend)))
        gates["distributed"] = {"passed": passed, "backend": backend}
    return gates
