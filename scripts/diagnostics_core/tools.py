"""Every tool of the skill, once: its entry file in scripts/ and the package beside it that holds its code,
its finding registry (findings.json) and its Spec (<package>/cli.py: SPEC). pyproject.toml's console
scripts and packages, the bundle's help texts, the finding index, the benchmarks and the contract tests all
read this list (tests/test_contract_every_tool.py pins pyproject.toml to it). Adding a tool: MAINTAINERS.md."""

TOOLS = (
    # (entry file without .py, package)
    ("check_sampling_backends", "sampling_checker"),
    ("check_store_contract", "store_checker"),
    ("check_partition", "partition_checker"),
    ("compare_reports", "cluster_compare"),
    ("ddp_neighbor_training", "ddp_recipe"),
    ("profile_loader", "loader_profiler"),
    ("plan_capacity", "capacity_planner"),
    ("check_launch", "launch_doctor"),
)


def console_script(script):
    """The command `pip install .` puts on PATH for an entry file: check_launch -> check-launch."""
    return script.replace("_", "-")
