"""Plans from sizes, in process through the planner's Spec (the runner's own steps: prepare, gather, rules, gates,
compose; no tool process, no torch): the designs and verdicts for the papers100M-sized job, each finding on the
sizes or edited facts that produce it, the gates, the markdown, and an interrupted calibration's document."""

import copy
import time

import pytest

from capacity_planner import calibrate, cli
from capacity_planner.render import to_markdown
from capacity_planner.rules import RULES
from diagnostics_core import runner
from diagnostics_core.cli import UsageError
from diagnostics_core.interrupt import Interrupted

PAPERS = ["--nodes", "111000000", "--edges", "1600000000", "--undirected", "--features", "128", "--conv", "sage",
          "--layers", "3", "--hidden", "256", "--num-neighbors", "15,10,5", "--batch-size", "1024",
          "--gpus-per-node", "4", "--gpu-memory", "80GB", "--host-ram", "512GB", "--cores", "64"]


def prepared(*argv):
    """-> the Run after the runner's first step on `argv`: parsed, checked, its bounds planned."""
    run = runner.Run(cli.SPEC, [str(word) for word in argv], time.time())
    runner.prepare(run)
    return run


def planned(*argv):
    """-> the Run after the runner's steps on `argv` (a refusal in run.usage), as runner.main takes them;
    sizes from flags only: a run that would start a child (a file, a store, --calibrate) is a test's mistake."""
    run = runner.Run(cli.SPEC, [str(word) for word in argv], time.time())
    try:
        runner.prepare(run)
        assert not cli.runs_children(run.options), "the fast tier starts no child"
        cli.SPEC.gather(run)
        findings(run)
    except UsageError as error:
        run.usage = error
    return run


def findings(run):
    run.findings = [found for rule in RULES for found in rule(run.facts, run.options)]
    run.gates = cli.SPEC.gates(run.facts, run.findings, run.options)
    return run


def plan(*argv):
    return runner.compose(planned(*argv))


def ids(document):
    return [f["id"] for f in document["findings"]]


def design(document, name):
    return [d for d in document["designs"] if d["design"] == name][0]


def figures(value):
    """Every figure (a dict with bytes, how, source) anywhere in the document."""
    if isinstance(value, dict):
        if "how" in value and "source" in value and "bytes" in value:
            yield value
        for item in value.values():
            yield from figures(item)
    elif isinstance(value, list):
        for item in value:
            yield from figures(item)


@pytest.mark.finding("plan-cheapest-fit")
def test_the_papers100m_plan_names_what_fits_and_why_with_every_figure_sourced():
    document, code = plan(*PAPERS)
    assert code == 0 and document["gates"]["fits"]["passed"] and document["gates"]["planned"]["passed"]
    nodes, edges = 111000000, 3200000000
    graph = document["request"]["graph"]
    assert graph["edges"] == edges and graph["node_bytes"] == 128 * 4 + 8 and graph["edge_bytes"] == 16
    assert design(document, "full-batch")["fits"]["gpu"] is False
    private, shared = design(document, "ddp-private-copies"), design(document, "ddp-shared-copy")
    assert private["fits"]["host_ram"] is False and shared["fits"]["all"] is True
    # one mapped copy per node: the page cache holds the graph once, each rank only its colptr and itself
    assert shared["host"]["page_cache_per_node"]["bytes"] == nodes * 520 + edges * 16
    assert document["cheapest_fit"] == "one-process-loader" and document["fits_all_gpus"] == "ddp-shared-copy"
    found = [f for f in document["findings"] if f["id"] == "plan-cheapest-fit"][0]
    assert found["evidence"]["design"] == "one-process-loader" and "NeighborLoader(" in found["fix"]
    # It uses one GPU of four: the design that uses them all comes with its own launch line.
    assert found["evidence"]["gpus_used"] == 1 and found["evidence"]["all_gpus"]["gpus"] == 4
    assert found["evidence"]["all_gpus"]["launch"] == shared["launch"] and shared["launch"] in found["fix"]
    assert "to use all 4, ddp-shared-copy:" in found["fix"]
    everything = list(figures(document))
    assert len(everything) > 40
    for item in everything:
        assert item["how"] in ("measured", "formula", "cited") and item["source"].startswith(item["how"])
    cited = [f for f in everything if f["how"] == "cited"]
    assert cited and all("docs" in f["source"] or "discuss.pytorch.org" in f["source"] for f in cited)
    steps = dict((s["step"], s) for s in document["preprocessing"])
    assert "ToUndirected" in steps and steps["ToUndirected"]["peak"]["terms"][2]["how"] == "measured"


@pytest.mark.finding("plan-shared-copy-not-shared", "plan-second-node-needed")
def test_workers_copy_the_mapped_graph_per_rank_and_can_force_more_nodes():
    document, _ = plan(*PAPERS + ["--num-workers", "4"])
    shared = design(document, "ddp-shared-copy")
    per_rank = shared["host"]["shm_per_rank"]["terms"][0]["bytes"]
    assert abs(per_rank - (16 * 3200000000 + 8 * 111000000)) < 0.02 * per_rank  # 16 B/edge + 8 B/node, measured
    found = [f for f in document["findings"] if f["id"] == "plan-shared-copy-not-shared"][0]
    assert found["evidence"]["ranks_per_node"] == 4
    document, _ = plan(*PAPERS + ["--num-workers", "4", "--host-ram", "256GB", "--machines", "2"])
    found = [f for f in document["findings"] if f["id"] == "plan-second-node-needed"][0]
    assert found["evidence"]["ranks_per_node_that_fit"] < 4 and found["evidence"]["nodes_needed"] > 2
    assert found["fix"].startswith("torchrun --nnodes %d" % found["evidence"]["nodes_needed"])


@pytest.mark.finding("plan-shm-too-small")
@pytest.mark.parametrize("workers, too_small", [("2", True), ("0", False)])
def test_a_docker_sized_shm_fails_the_worker_designs_alone(workers, too_small):
    document, _ = plan("--nodes", "2000000", "--edges", "20000000", "--features", "64", "--num-workers", workers,
                       "--shm", "64MB", "--host-ram", "64GB", "--gpus-per-node", "2")
    found = [f for f in document["findings"] if f["id"] == "plan-shm-too-small"]
    assert bool(found) is too_small  # without workers nothing goes through /dev/shm
    for item in found:
        assert item["evidence"]["shm_available"] == 64 * 10 ** 6 and "--shm-size" in item["fix"]
        assert design(document, item["evidence"]["design"])["fits"]["host_ram"] is True


@pytest.mark.finding("plan-nothing-fits")
def test_nothing_fits_is_a_failed_gate_naming_each_design():
    document, code = plan(*PAPERS + ["--host-ram", "16GB", "--gpu-memory", "4GB"])
    assert code == 1 and document["gates"]["fits"]["passed"] is False and document["status"] == "gate-failed"
    found = [f for f in document["findings"] if f["id"] == "plan-nothing-fits"][0]
    assert "host_ram" in found["evidence"]["ddp-shared-copy"] and "gpu" in found["evidence"]["full-batch"]


@pytest.mark.parametrize("argv, cheapest", [
    (["--nodes", "1000", "--edges", "5000"], "full-batch"),
    (["--nodes", "1000", "--edges", "5000", "--gpus-per-node", "0"], "cpu-ddp-shared-copy"),  # CPU ranks (gloo)
    (PAPERS, "one-process-loader"),
    (PAPERS + ["--gpu-memory", "4GB"], None),
    (["--node-type", "paper:500:4", "--node-type", "author:200", "--edge-type", "author,writes,paper:900"],
     "full-batch"),
])
def test_the_cheapest_design_that_fits(argv, cheapest):
    document, _ = plan(*argv)
    assert document["cheapest_fit"] == cheapest
    fitting = [d["design"] for d in document["designs"] if d["fits"]["all"]]
    assert (cheapest in fitting) if cheapest else fitting == []


def test_the_multi_node_design_applies_only_when_one_node_is_not_enough():
    document, _ = plan(*PAPERS)
    multi = design(document, "multi-node")
    assert multi["applies"] is False and multi["fits"]["all"] is False and multi["note"].startswith("not needed")


@pytest.mark.finding("plan-coefficients-other-versions")
def test_coefficients_from_other_versions_are_flagged_with_a_calibrate_fix():
    run = planned("--nodes", "1000", "--edges", "5000")
    assert "plan-coefficients-other-versions" not in ids(runner.compose(run)[0])  # committed matches this venv
    run.facts["coefficients"].update(version_mismatch=True, used="file")
    run.facts["coefficients"]["provenance"] = dict(run.facts["coefficients"]["provenance"], torch_geometric="2.5.0")
    found = [f for f in runner.compose(findings(run))[0]["findings"] if f["id"] == "plan-coefficients-other-versions"]
    assert found[0]["evidence"]["measured_on"]["torch_geometric"] == "2.5.0"
    assert found[0]["fix"].split("  #")[0].endswith("--nodes 1000 --edges 5000 --calibrate")


@pytest.mark.finding("plan-calibration-failed")
def test_a_calibration_cut_by_its_deadline_falls_back_and_says_where():
    run = planned("--nodes", "1000", "--edges", "5000")  # then edited as a calibration cut short leaves it
    record = calibrate.new_record()
    record["finished"] = record["planned"][:2]
    record.update(state="failed", cut=record["planned"][2])
    run.facts.update(calibration=record)
    run.facts["coefficients"]["calibration_problems"] = ["the calibrate probe did not finish in time"]
    document, code = runner.compose(findings(run))
    [found] = [f for f in document["findings"] if f["id"] == "plan-calibration-failed"]
    assert code == 0 and found["evidence"]["cut"] == record["planned"][2] and found["evidence"]["finished"] == 2
    assert found["fix"].split("  #")[0].endswith("--calibrate --timeout 600")
    assert document["calibration"]["measured"] == {}  # not finished: what it measured is shown
    assert "Calibration failed after 2 of 8 steps, cut at graph of 80000 nodes" in to_markdown(document)


@pytest.mark.finding("plan-store-hung", "plan-store-failed")
@pytest.mark.parametrize("hung, ended_by, expected", [
    (True, "deadline", "plan-store-hung"), (True, "call-timeout", "plan-store-hung"),
    (True, "the call's alarm in the child", "plan-store-hung"), (False, "an exception", "plan-store-failed"),
    (False, "the child died", "plan-store-failed")])
def test_a_store_that_gave_no_sizes_fails_the_planned_gate(hung, ended_by, expected):
    run = prepared("--store", "mystores:make", "--edges", "1000")  # not gathered: the store is a fact below
    run.facts = {"request": run.options.request, "rerun": cli.rerun_words(run.argv), "store_problem": {
        "store": "mystores:make", "path": None, "error": "get_tensor_size(x) did not return", "hung": hung,
        "call": "get_tensor_size(x)", "ended_by": ended_by, "timeout_s": 3.0}}
    document, code = runner.compose(findings(run))
    assert ids(document) == [expected] and code == 1 and document["gates"] == {"planned": {"passed": False}}
    assert document["findings"][0]["evidence"]["ended_by"] == ended_by
    assert "check_store_contract.py mystores:make" in document["findings"][0]["fix"]


@pytest.mark.finding("plan-interrupted")
def test_an_interrupted_calibration_prints_what_it_measured_and_where_it_was_cut():
    run = prepared("--nodes", "1000", "--edges", "5000", "--calibrate")  # not gathered: the record is below
    record = calibrate.new_record()
    record["finished"] = record["planned"][:1]
    record["measured"] = {"versions": {"torch": "2.13.0+cpu"}, "graphs": [{"graph": {"nodes": 50000}}]}
    record.update(state="interrupted", cut=record["planned"][1])
    run.facts = {"request": run.options.request, "rerun": cli.rerun_words(run.argv), "calibration": record}
    run.stopped, run.findings, run.gates = Interrupted(15), [], {}
    document, code = runner.compose(run)
    assert code == 143 and document["status"] == "interrupted" and ids(document)[0] == "plan-interrupted"
    assert document["calibration"]["measured"]["graphs"] == [{"graph": {"nodes": 50000}}]
    assert document["calibration"]["cut"] == {"kind": "graph", "nodes": 150000, "edges": 800000}
    fix = document["findings"][0]["fix"]
    assert "--calibrate" in fix and "cut at graph of 150000 nodes, 800000 edges" in fix
    assert "designs" not in document and "Calibration interrupted after 1 of 8 steps" in to_markdown(document)


def test_a_finished_calibrations_measurements_are_in_the_coefficients_not_twice():
    run = planned("--nodes", "1000", "--edges", "5000")
    record = calibrate.new_record()
    record.update(state="finished", finished=list(record["planned"]), measured={"graphs": [1, 2, 3]})
    run.facts["calibration"] = record
    document, _ = runner.compose(findings(run))
    assert "measured" not in document["calibration"] and run.facts["calibration"]["measured"] == {"graphs": [1, 2, 3]}


@pytest.mark.parametrize("argv", [[], ["--nodes", "-5", "--edges", "1"], ["--num-neighbors", "9" * 20]])
def test_a_refused_command_line_renders_no_plan(argv):
    document, code = plan(*argv)
    assert code == 2 and document["status"] == "usage-error" and document["gates"] == {}
    assert not set(document) & {"designs", "coefficients", "calibration"}
    assert to_markdown(document).startswith("# Capacity plan: usage-error (exit 2)")


def test_the_markdown_report_shows_every_design_and_the_whole_provenance():
    document, _ = plan(*PAPERS)
    report = to_markdown(document)
    for item in document["designs"]:
        assert "| %s |" % item["design"] in report
    # the calibration's description is ours and short: shown whole, not cut inside a list
    how = document["coefficients"]["provenance"]["how"].replace("[", "\\[").replace("]", "\\]")
    assert how in report
    assert "Cheapest that fits: `%s`; the first that uses every GPU: `%s`." % (
        document["cheapest_fit"], document["fits_all_gpus"]) in report
    assert "| full-batch | 1 |" in report and "no (gpu)" in report


def test_the_rules_decide_on_the_facts_not_on_the_sizes_they_came_from():
    run = planned(*PAPERS)
    facts = copy.deepcopy(run.facts)
    for item in facts["designs"]:
        item["fits"] = dict(item["fits"], all=False, host_ram=False)
    facts["cheapest_fit"] = facts["fits_all_gpus"] = None
    found = [f["id"] for rule in RULES for f in rule(facts, run.options)]
    assert "plan-nothing-fits" in found and "plan-cheapest-fit" not in found
