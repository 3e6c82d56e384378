"""The DDP recipe's command line, in process: what it accepts and refuses before torch is imported, alone and
inside the skill (the same flags, the same refusals)."""

import argparse

import pytest

import ddp_neighbor_training as recipe
from ddp_recipe import cli

GRAPH = __file__  # any existing file stands for --data here: nothing is loaded


def parsed(*words):
    return recipe.parse_arguments([str(word) for word in words])


@pytest.mark.parametrize("words, message", [
    (["--fail-rank", "-1"], "--fail-rank must be >= 0"),
    (["--timeout", "0"], "--timeout must be a positive number"),
    (["--timeout", "nan"], "--timeout must be a positive number"),
    (["--timeout", "inf"], "--timeout must be a positive number"),
    (["--lr", "-0.1"], "--lr must be a positive number"),
    (["--num-workers", "-2"], "--num-workers must be >= 0"),
    (["--threads", "-1"], "--threads must be >= 0"),
    (["--master-port", "70000"], "--master-port must be within 0..65535"),
    (["--master-port", "-5"], "--master-port must be within 0..65535"),
    (["--data", "/no/such/graph.pt"], "--data /no/such/graph.pt: no such file"),
    (["--num-neighbors", "10,x"], "--num-neighbors"),
    (["--num-neighbors", "10,0"], "each positive or -1"),
    (["--num-neighbors", "-2"], "each positive or -1"),
    (["--num-neighbors", ""], "each positive or -1"),
    (["--nprocs", "0"], "expected a whole number >= 1"),
    (["--batch-size", "1.5"], "expected a whole number >= 1"),
    (["--backend", "mpi"], "invalid choice"),
    (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
])
def test_a_refused_value_is_a_usage_error_naming_the_flag(words, message):
    with pytest.raises(recipe.UsageError) as refused:
        parsed(*words)
    assert message in str(refused.value)


@pytest.mark.parametrize("words, expected", [
    ([], {"nprocs": None, "num_neighbors": [10, 5], "batch_size": 64, "num_workers": 0, "load_per_rank": False}),
    (["--num-neighbors", "15,-1,3"], {"num_neighbors": [15, -1, 3]}),
    (["--num-neighbors", " 4 , 2 "], {"num_neighbors": [4, 2]}),
    (["--nprocs", "3", "--master-port", "0"], {"nprocs": 3, "master_port": 0}),
    (["--data", GRAPH, "--load-per-rank", "--num-workers", "0"], {"data": GRAPH, "load_per_rank": True}),
    (["--timeout", "0.5", "--threads", "0", "--fail-rank", "0"], {"timeout": 0.5, "threads": 0, "fail_rank": 0}),
])
def test_an_accepted_line_parses_to_its_values(words, expected):
    options = vars(parsed(*words))
    assert {key: options[key] for key in expected} == expected


def flags(parser):
    return sorted(option for action in parser._actions for option in action.option_strings)


def test_the_skill_declares_the_recipes_flags_and_only_adds_its_metadata_commands():
    alone, inside = flags(recipe.build_parser()), flags(cli.build_parser())
    assert sorted(set(inside) - set(alone)) == ["--explain", "--list-findings"]
    assert set(alone) <= set(inside)


@pytest.mark.parametrize("words", [["--timeout", "0"], ["--data", "/no/such/graph.pt"], ["--num-workers", "-1"]])
def test_the_skill_refuses_what_the_recipe_refuses_as_ddp_usage_error(words):
    parser = cli.build_parser()
    options = parser.parse_args(words)
    with pytest.raises(cli.cli.UsageError) as refused:
        cli.check(parser, options)
    error = refused.value
    assert error.finding_id == "ddp-usage-error" and error.line.startswith("ddp_neighbor_training.py: error: ")
    assert error.evidence["message"] in error.line and error.fix.endswith("ddp_neighbor_training.py --help")


def test_a_bad_flag_inside_the_skill_names_it_with_the_skills_usage_finding():
    with pytest.raises(cli.cli.UsageError) as refused:
        cli.build_parser().parse_args(["--num-neighbors", "10,x"])
    assert refused.value.finding_id == "ddp-usage-error" and "--num-neighbors" in refused.value.line


def test_the_recipe_alone_imports_only_the_standard_library_at_its_top():
    """Run as a script or spawned as a rank, the file's top level needs nothing else (torch comes later)."""
    import ast
    tree = ast.parse(open(recipe.__file__).read())
    top = {alias.name.split(".")[0] for node in tree.body if isinstance(node, ast.Import) for alias in node.names}
    top |= {node.module.split(".")[0] for node in tree.body if isinstance(node, ast.ImportFrom)}
    import sys
    assert top <= set(sys.stdlib_module_names), top - set(sys.stdlib_module_names)


def test_every_option_the_recipe_reads_has_a_default():
    """check_arguments and the launch read every option; a parser that forgot one would fail in a rank."""
    options = parsed()
    assert isinstance(options, argparse.Namespace)
    for name in ("nprocs", "backend", "master_addr", "master_port", "timeout", "threads", "data", "load_per_rank",
                 "store", "num_nodes", "num_classes", "num_neighbors", "batch_size", "epochs", "hidden_channels",
                 "lr", "num_workers", "seed", "fail_rank", "report_details", "pretty"):
        assert hasattr(options, name), name
