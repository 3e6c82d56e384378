"""The planner's command line, in process: what the parser and check refuse (each size bounded, the refusal
naming the flag), the request they make, the bound of every stage (the Spec's stage table, nowhere else),
and the words a fix rebuilds the command line from."""

import os
import time

import pytest

from capacity_planner import cli, spec
from diagnostics_core import cli as core_cli, runner

GRAPH = ["--nodes", "1000", "--edges", "5000"]


def checked(*argv):
    parser = cli.SPEC.parser()
    options = parser.parse_args([str(word) for word in argv])
    cli.SPEC.check(parser, options)
    return options


def refused(*argv):
    with pytest.raises(core_cli.UsageError) as caught:
        checked(*argv)
    assert "\n" not in caught.value.line
    return caught.value


@pytest.mark.finding("plan-size-invalid")
@pytest.mark.parametrize("argv, flag", [
    (["--nodes", "-5", "--edges", "10"], "--nodes"),
    (["--nodes", "0", "--edges", "10"], "--nodes"),
    (["--nodes", str(10 ** 12 + 1), "--edges", "10"], "--nodes"),
    (["--nodes", "100", "--edges", str(10 ** 15)], "--edges"),
    (["--nodes", "100", "--edges", "-1"], "--edges"),
    (GRAPH + ["--features", str(10 ** 7)], "--features"),
    (GRAPH + ["--edge-features", "-2"], "--edge-features"),
    (GRAPH + ["--layers", "0"], "--layers"),
    (GRAPH + ["--layers", "65"], "--layers"),
    (GRAPH + ["--hidden", str(10 ** 20)], "--hidden"),
    (GRAPH + ["--heads", "0"], "--heads"),
    (GRAPH + ["--classes", "-1"], "--classes"),
    (GRAPH + ["--batch-size", "0"], "--batch-size"),
    (GRAPH + ["--batch-size", "9" * 20], "--batch-size"),
    (GRAPH + ["--num-workers", "-1"], "--num-workers"),
    (GRAPH + ["--num-workers", "100000"], "--num-workers"),
    (GRAPH + ["--gpus-per-node", "-1"], "--gpus-per-node"),
    (GRAPH + ["--cores", "0"], "--cores"),
    (GRAPH + ["--machines", str(10 ** 9)], "--machines"),
    (GRAPH + ["--num-neighbors", "9" * 20], "--num-neighbors"),
    (GRAPH + ["--num-neighbors", "15,99999999999999999999"], "--num-neighbors"),
    (GRAPH + ["--num-neighbors", "0"], "--num-neighbors"),
    (GRAPH + ["--num-neighbors", "-2"], "--num-neighbors"),
    (GRAPH + ["--num-neighbors", ",".join(["2"] * 17)], "--num-neighbors"),
    (GRAPH + ["--num-neighbors", "ten"], "--num-neighbors"),
    (GRAPH + ["--num-neighbors", "9" * 5000], "--num-neighbors"),
    (GRAPH + ["--host-ram", "lots"], "--host-ram"),
    (GRAPH + ["--host-ram", "9" * 500], "--host-ram"),
    (GRAPH + ["--gpu-memory", "9" * 30], "--gpu-memory"),
    (GRAPH + ["--gpu-memory", "80XB"], "--gpu-memory"),
    (GRAPH + ["--shm", "1e9"], "--shm"),
    (["--node-type", "paper:-3:4", "--edge-type", "paper,cites,paper:10"], "--node-type"),
    (["--node-type", "paper:3:-4", "--edge-type", "paper,cites,paper:10"], "--node-type"),
    (["--node-type", "paper", "--edge-type", "paper,cites,paper:10"], "--node-type"),
    (["--node-type", "paper:3", "--edge-type", "paper,cites,author:10"], "--edge-type"),
    (["--node-type", "paper:3", "--edge-type", "paper,cites,paper:-10"], "--edge-type"),
    (["--node-type", "paper:3", "--edge-type", "paper:10"], "--edge-type"),
    (["--node-type", "a:%d" % 10 ** 12, "--node-type", "b:%d" % 10 ** 12, "--edge-type", "a,r,b:1"], "--node-type"),
    (["--store", "m:f", "--edges", str(10 ** 14)], "--edges"),
    (["--store", "m:f", "--edges", "10", "--nodes", "-1"], "--nodes"),
    (GRAPH + ["--prefetch-factor", "0"], "--prefetch-factor"),
    (GRAPH + ["--gpus-per-node", "0", "--ranks-per-node", "0"], "--ranks-per-node"),
    (GRAPH + ["--gpus-per-node", "0", "--ranks-per-node", "5000"], "--ranks-per-node"),
])
def test_an_absurd_size_is_refused_naming_its_flag(argv, flag):
    error = refused(*argv)
    assert error.finding_id == "plan-size-invalid" and error.evidence["flag"] == flag
    assert flag in error.line and error.evidence["why"]


@pytest.mark.finding("plan-usage-error")
@pytest.mark.parametrize("argv, message", [
    ([], "give the graph"),
    (GRAPH + ["--data", "g.pt"], "give one graph"),
    (["--data", "g.pt", "--store", "m:f", "--edges", "1"], "give one graph"),
    (GRAPH + ["--calibrate", "--coefficients", "c.json"], "give one"),
    (["--store", "nocolon", "--edges", "5"], "MODULE:CALLABLE"),
    (["--store", "m:f"], "--store needs --edges"),
    (["--nodes", "1e9", "--edges", "5"], "invalid int value"),
    (GRAPH + ["--conv", "cheb"], "invalid choice"),
    (GRAPH + ["--timeout", "0"], "between 1 and 3600"),
    (GRAPH + ["--calib"], "unrecognized arguments"),  # no abbreviations: a fix rebuilds the line from its words
    (GRAPH + ["--launch", "mpirun"], "invalid choice"),
    (GRAPH + ["--start-method", "thread"], "invalid choice"),
    (GRAPH + ["--graph-in-spawn-args"], "needs --launch spawn"),
    (GRAPH + ["--graph-in-spawn-args", "--launch", "torchrun"], "needs --launch spawn"),
    (GRAPH + ["--ranks-per-node", "2"], "one rank per GPU"),
    (GRAPH + ["--python-version", "3"], "--python-version 3"),
    (GRAPH + ["--python-version", "2.7"], "from 3.8"),
    (GRAPH + ["--python-version", "3.x"], "expected the job's Python"),
])
def test_a_command_line_the_planner_cannot_run_is_a_usage_error(argv, message):
    error = refused(*argv)
    assert error.finding_id == "plan-usage-error" and message in error.line, error.line


@pytest.mark.parametrize("argv, key, expected", [
    (GRAPH + ["--host-ram", "512GiB"], ("hardware", "host_ram"), 512 << 30),
    (GRAPH + ["--host-ram", "64GB"], ("hardware", "shm"), 32 * 10 ** 9),  # tmpfs: half of RAM by default
    (GRAPH + ["--shm", "64MB"], ("hardware", "shm"), 64 * 10 ** 6),
    (GRAPH + ["--gpu-memory", "1.5TiB"], ("hardware", "gpu_memory"), int(1.5 * (1 << 40))),
    (GRAPH + ["--num-neighbors", "25,-1,5"], ("sampling", "fanouts"), [25, -1, 5]),
    (GRAPH + ["--num-neighbors=-1,-1"], ("sampling", "fanouts"), [-1, -1]),
    (GRAPH + ["--undirected"], ("graph", "edges"), 10000),
    (GRAPH + ["--features", "128", "--feature-dtype", "bfloat16"], ("graph", "node_bytes"), 128 * 2 + 8),
    (GRAPH + ["--features", "128", "--no-labels"], ("graph", "node_bytes"), 128 * 4),
    (GRAPH + ["--edge-features", "4"], ("graph", "edge_bytes"), 16 + 16),
    (["--node-type", "paper:500:4", "--node-type", "author:200", "--edge-type", "author,writes,paper:900"],
     ("graph", "nodes"), 700),
    (["--store", "m:f", "--edges", "10"], ("graph",), None),  # read later, in a child
    (["--data", "g.pt"], ("graph",), None),
    (GRAPH, ("sampling", "launch"), "torchrun"),
    (GRAPH + ["--launch", "spawn"], ("sampling", "worker_start_method"), "spawn"),
    (GRAPH + ["--python-version", "3.14"], ("sampling", "worker_start_method"), "forkserver"),
    (GRAPH + ["--python-version", "3.13"], ("sampling", "worker_start_method"), "fork"),
    (GRAPH + ["--launch", "spawn", "--start-method", "forkserver"], ("sampling", "worker_start_method"), "forkserver"),
    (GRAPH + ["--python-version", " 3.14 "], ("sampling", "python"), [3, 14]),
    (GRAPH + ["--launch", "spawn", "--graph-in-spawn-args"], ("sampling", "graph_in_spawn_args"), True),
    (GRAPH + ["--prefetch-factor", "4"], ("sampling", "prefetch_factor"), 4),
    (GRAPH + ["--gpus-per-node", "0", "--ranks-per-node", "3"], ("hardware", "ranks_per_node"), 3),
    (GRAPH + ["--gpus-per-node", "0"], ("hardware", "ranks_per_node"), None),
])
def test_the_request_holds_the_checked_sizes(argv, key, expected):
    value = checked(*argv).request
    for part in key:
        value = value[part]
    assert value == expected


@pytest.mark.parametrize("timeout, bounds", [
    ([], {"calibration": 120.0, "size_call": 120.0, "size_child": 125.0, "measure": 120.0}),
    (["--timeout", "3"], {"calibration": 3.0, "size_call": 3.0, "size_child": 8.0, "measure": 3.0}),
])
def test_every_stage_bound_comes_from_the_specs_stage_table(timeout, bounds):
    planned = runner.Run(cli.SPEC, GRAPH + timeout, 1000.0)
    planned.options = checked(*GRAPH + timeout)
    planned.plan_time()
    assert planned.bounds == bounds and planned.options.bounds == bounds
    assert planned.by("size_child") == 1000.0 + bounds["size_child"]
    assert planned.deadline == 1000.0 + bounds["calibration"]


@pytest.mark.parametrize("argv, expected", [
    (GRAPH, GRAPH + ["--calibrate"]),
    (GRAPH + ["--calibrate"], GRAPH + ["--calibrate"]),
    (GRAPH + ["--coefficients", "c.json", "--pretty"], GRAPH + ["--pretty", "--calibrate"]),
    (GRAPH + ["--coefficients=c.json"], GRAPH + ["--calibrate"]),
    (["--data", "g.pt"], ["--data", os.path.abspath("g.pt"), "--calibrate"]),
    (["--data=g.pt"], ["--data=" + os.path.abspath("g.pt"), "--calibrate"]),
    (["--store", "m:f", "--path", "proj", "--edges", "9"],
     ["--store", "m:f", "--path", os.path.abspath("proj"), "--edges", "9", "--calibrate"]),
])
def test_a_fix_reruns_the_same_line_from_any_folder_with_calibrate(argv, expected):
    assert cli.rerun_words(argv) == expected


@pytest.mark.parametrize("extreme", [
    ["--num-neighbors", ",".join(["1000000"] * 16), "--disjoint", "--batch-size", str(1 << 30)],
    ["--num-neighbors=" + ",".join(["-1"] * 16), "--disjoint"],  # "=": argparse reads "-1,..." as a flag
    ["--num-neighbors=" + ",".join(["-1"] * 16)],
    ["--num-neighbors", ",".join(["999999"] * 16), "--layers", "64", "--hidden", str(1 << 20), "--heads", "1024",
     "--conv", "gat"],
])
@pytest.mark.parametrize("graph", [["--nodes", "1", "--edges", str(10 ** 13)],
                                   ["--nodes", str(10 ** 12), "--edges", str(10 ** 13)],
                                   ["--nodes", str(10 ** 6), "--edges", str(10 ** 12)]])
def test_the_largest_sizes_accepted_are_planned_in_bounded_time(graph, extreme):
    from capacity_planner import coefficients
    from capacity_planner.designs import plan
    started = time.perf_counter()
    request = checked(*graph + extreme).request
    chosen, _ = coefficients.given(None, coefficients.load_committed())
    designs = plan(request, chosen)
    assert time.perf_counter() - started < 1.0
    assert all(d["gpu"]["bytes"] >= 0 and d["host"]["per_node_peak"]["bytes"] >= 0 for d in designs)


def test_the_bounds_the_help_states_are_the_checked_ones():
    text = cli.SPEC.parser().format_help()
    assert "10^12 nodes, 10^13 edges" in text and (spec.MAX_NODES, spec.MAX_EDGES) == (10 ** 12, 10 ** 13)
    assert "%d hops of at most 10^6" % spec.MAX_HOPS in text and spec.MAX_FANOUT == 10 ** 6
