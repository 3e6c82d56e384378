"""--measure in process, on recorded and edited facts: what it refuses (the command lines it cannot run here,
and sizes this machine cannot hold, saying what they would need), the findings and the gate its record gives
(the ratios, a figure off by more than 15 %, each way a run fails), the markdown, the interrupted run's fix,
and the measuring child's own arithmetic on synthetic /proc readings (stage windows, process roles, node
memory, failures, what the job left). The real runs: tests/test_planner_measure.py."""

import json
import os
import time

import pytest

from capacity_planner import cli, designs, measure, meter
from capacity_planner.render import to_markdown
from capacity_planner.rules import RULES
from diagnostics_core import runner
from diagnostics_core.cli import UsageError
from diagnostics_core.interrupt import Interrupted

JOB = ["--nodes", "200000", "--edges", "2000000", "--features", "64", "--num-neighbors", "10,5", "--gpus-per-node",
       "0", "--ranks-per-node", "2", "--num-workers", "4", "--launch", "spawn", "--host-ram", "24GB", "--cores", "2",
       "--shm", "1GB"]
MIB = 1 << 20


def prepared(*argv):
    run = runner.Run(cli.SPEC, [str(word) for word in argv], time.time())
    runner.prepare(run)
    return run


def planned(*argv):
    """The plan without running anything (a --measure on the line is checked, not run)."""
    run = prepared(*argv)
    measuring, run.options.measure = run.options.measure, False
    cli.SPEC.gather(run)
    run.options.measure = measuring
    return run


def refused(*argv):
    with pytest.raises(UsageError) as caught:
        prepared(*argv)
    return caught.value


@pytest.mark.finding("plan-usage-error")
@pytest.mark.parametrize("argv, message", [
    (["--store", "m:f", "--edges", "10", "--measure"], "a store pair is not measured"),
    (["--node-type", "a:10:4", "--edge-type", "a,r,a:20", "--measure"], "heterogeneous graphs"),
    (JOB + ["--launch", "srun", "--measure"], "--launch torchrun"),
    (JOB + ["--python-version", "3.14", "--measure"], "runs with this interpreter"),
    (JOB + ["--measure", "--measure-design", "ddp-private-copies"], "not planned with --gpus-per-node 0"),
    (["--nodes", "10", "--edges", "10", "--measure", "--measure-design", "cpu-ddp-shared-copy"],
     "not planned with --gpus-per-node 1"),
    (JOB + ["--measure-design", "cpu-ddp-shared-copy"], "give --measure too"),
])
def test_a_measure_it_cannot_run_here_is_a_usage_error(argv, message):
    error = refused(*argv)
    assert error.finding_id == "plan-usage-error" and message in error.line, error.line


@pytest.mark.finding("plan-measure-refused")
@pytest.mark.parametrize("available, cores, short", [(1 << 30, 4, ["memory"]), (64 << 30, 1, ["cores"]),
                                                     (1 << 29, 1, ["memory", "cores"])])
def test_a_job_this_machine_cannot_hold_is_refused_saying_what_it_would_need(monkeypatch, available, cores, short):
    run = planned(*JOB + ["--num-workers", "12", "--measure"])  # 2 x (1 + 12) processes: 4 cores' worth
    design = designs.by_name(run.facts["designs"], "cpu-ddp-private-copies")
    monkeypatch.setattr(measure, "memory_available", lambda: available)
    monkeypatch.setattr(measure.container, "get_usable_cores", lambda: {"usable": cores})
    need = measure.needs(design, run.facts["preprocessing"])
    assert need["processes"] == 2 + 2 * 12 + 2 and need["cores"] == 4  # the launcher and its tracker too
    assert need["memory_bytes"] >= design["host"]["per_node_peak"]["bytes"]
    error = measure.refusal(need, cli.command_words(run.argv), run.facts["request"], run.options)
    assert error.finding_id == "plan-measure-refused" and error.evidence["short_of"] == short
    assert error.evidence["has"] == {"memory_available_bytes": available, "cores": cores}
    words = error.fix.split("  #")[0].split()
    nodes = int(words[words.index("--nodes") + 1])
    assert (nodes < 200000) is ("memory" in short) and words.count("--nodes") == 1 and "--measure" in words


def test_a_job_this_machine_holds_is_not_refused(monkeypatch):
    run = planned(*JOB + ["--measure"])
    design = designs.by_name(run.facts["designs"], "cpu-ddp-private-copies")
    monkeypatch.setattr(measure, "memory_available", lambda: 20 << 30)
    monkeypatch.setattr(measure.container, "get_usable_cores", lambda: {"usable": 2})
    need = measure.needs(design, run.facts["preprocessing"])
    assert measure.refusal(need, cli.command_words(run.argv), run.facts["request"], run.options) is None


def test_the_job_runs_the_designs_shape_on_the_planned_sizes():
    run = planned(*JOB + ["--measure", "--prefetch-factor", "3", "--start-method", "forkserver"])
    design = designs.by_name(run.facts["designs"], "cpu-ddp-private-copies")
    job = measure.job_settings(run.facts["request"], design, run.options)
    assert (job["launch"], job["ranks"], job["workers"], job["prefetch_factor"], job["start_method"]) == (
        "spawn", 2, 4, 3, "forkserver")
    assert job["graph"] == {"nodes": 200000, "edges": 2000000, "features": 64, "feature_dtype": "float32",
                            "labels": True, "edge_features": 0}
    assert job["layout"] == "private" and job["threads"] == 1 and job["batches"] == measure.BATCHES


def recorded(run, shm, node, state="finished", failure=None, methods=("spawn",)):
    design = designs.by_name(run.facts["designs"], measure.design_name(run.facts["request"], run.options))
    record = measure.new_record(design["design"], design, measure.job_settings(
        run.facts["request"], design, run.options), run.options)
    record.update(state=state, failure=failure, private_shm={"private": True, "why_not": None, "size_bytes": 1 << 30},
                  measured={"peak": {"shm_bytes": shm, "node_bytes": node, "processes": 12},
                            "stages": [{"stage": "init"}, {"stage": "construction"}],
                            "worker_start_methods": list(methods)})
    measure.compare(record)
    run.facts["measure"] = record
    run.findings = [found for rule in RULES for found in rule(run.facts, run.options)]
    run.gates = cli.SPEC.gates(run.facts, run.findings, run.options)
    return runner.compose(run)


def found(document, finding_id):
    return [f for f in document["findings"] if f["id"] == finding_id]


@pytest.mark.finding("plan-measured")
def test_a_measure_that_agrees_reports_both_figures_and_their_ratio():
    run = planned(*JOB + ["--measure"])
    model = designs.by_name(run.facts["designs"], "cpu-ddp-private-copies")["host"]
    document, code = recorded(run, int(model["shm_per_node"]["bytes"] * 1.02),
                              int(model["per_node_peak"]["bytes"] * 0.97))
    assert code == 0 and document["gates"]["measured"] == {"passed": True}
    [item] = found(document, "plan-measured")
    assert item["evidence"]["shm_per_node"]["ratio"] == pytest.approx(1 / 1.02, abs=0.001)
    assert item["evidence"]["node_memory"]["ratio"] == pytest.approx(1 / 0.97, abs=0.001)
    assert item["evidence"]["worker_start_method"] == {"model": "spawn", "measured": ["spawn"]}
    assert "--shm-size=" in item["fix"] and not found(document, "plan-measure-disagrees")
    report = to_markdown(document)
    assert "## Measured: `cpu-ddp-private-copies` (finished)" in report and "| /dev/shm peak |" in report


@pytest.mark.finding("plan-measure-disagrees")
@pytest.mark.parametrize("shm_factor, node_factor, off", [(0.5, 1.0, ["shm_per_node"]), (1.0, 1.3, ["node_memory"]),
                                                          (2.0, 0.6, ["shm_per_node", "node_memory"]),
                                                          (1.1, 0.9, [])])
def test_a_figure_off_by_more_than_15_percent_is_a_warning(shm_factor, node_factor, off):
    run = planned(*JOB + ["--measure"])
    model = designs.by_name(run.facts["designs"], "cpu-ddp-private-copies")["host"]
    document, _ = recorded(run, int(model["shm_per_node"]["bytes"] * shm_factor),
                           int(model["per_node_peak"]["bytes"] * node_factor), methods=("fork",))
    items = found(document, "plan-measure-disagrees")
    assert sorted(k for k in ("shm_per_node", "node_memory") if items and k in items[0]["evidence"]) == sorted(off)
    if items:
        assert items[0]["evidence"]["worker_start_method"]["measured"] == ["fork"]


@pytest.mark.parametrize("workers, shm, ratio", [("0", 0, 1.0), ("0", 4096, 0.0), ("4", 0, None)])
def test_nothing_in_shm_on_both_sides_agrees(workers, shm, ratio):
    run = planned(*JOB + ["--num-workers", workers, "--launch", "torchrun", "--measure"])
    document, _ = recorded(run, shm, 10 ** 9)
    model = document["measure"]["model"]["shm_per_node_bytes"]
    expected = ratio if model == 0 or shm == 0 else round(model / float(shm), 3)
    assert document["measure"]["ratio"]["shm_per_node"] == expected
    if workers == "0" and shm == 0:
        assert "nothing in /dev/shm" in found(document, "plan-measured")[0]["fix"]


@pytest.mark.finding("plan-measure-failed")
@pytest.mark.parametrize("failure, fix", [
    ({"kind": "deadline", "detail": "cut"}, "--timeout 360"),
    ({"kind": "shm-full", "exit_code": 1, "detail": "Bus error"}, "size /dev/shm from evidence.peak"),
    ({"kind": "job-failed", "exit_code": 1, "detail": "Traceback"}, "evidence.detail"),
])
def test_a_measure_that_did_not_finish_fails_its_gate_saying_how(failure, fix):
    run = planned(*JOB + ["--measure", "--timeout", "120"])
    document, code = recorded(run, 10 << 20, 10 ** 9, state="failed", failure=failure)
    assert code == 1 and document["gates"]["measured"] == {"passed": False}
    [item] = found(document, "plan-measure-failed")
    assert item["evidence"]["kind"] == failure["kind"] and fix in item["fix"]
    assert item["evidence"]["stages_reached"] == ["init", "construction"]
    assert document["measure"]["ratio"] is None and not found(document, "plan-measured")


@pytest.mark.finding("plan-interrupted")
def test_an_interrupted_measure_keeps_what_it_measured_and_reruns_the_line():
    run = planned(*JOB + ["--measure"])
    document, _ = recorded(run, 10 << 20, 10 ** 9, state="interrupted")
    run.stopped, run.findings, run.gates = Interrupted(15), [], {}
    document, code = runner.compose(run)
    assert code == 143 and document["measure"]["measured"]["peak"]["shm_bytes"] == 10 << 20
    fix = document["findings"][0]["fix"]
    assert "--measure" in fix.split("  #")[0] and "let --measure finish" in fix


def test_no_private_shm_without_root(monkeypatch):
    monkeypatch.setattr(meter.os, "geteuid", lambda: 1000)
    assert "not root" in meter.private_shm(64 << 20)


@pytest.mark.parametrize("launch, expected", [
    ("torchrun", ["-c", "--standalone", "--nproc-per-node", "2", meter.JOB, "job.json"]),
    ("spawn", [meter.JOB, "job.json"]), ("single", [meter.JOB, "job.json"]),
])
def test_the_job_starts_in_its_launch_shape(launch, expected):
    command = meter.job_command({"launch": launch, "ranks": 2}, "job.json")
    assert [word for word in command[2:] if not word.startswith("import ")] == expected
    if launch == "torchrun":
        assert "run_module('torch.distributed.run'" in command[3] and "prctl(1, 9" in command[3]


def marks(*items):
    return [{"who": who, "pid": pid, "stage": stage, "t": t} for who, pid, stage, t in items]


def test_stage_windows_peaks_and_ends_from_the_ranks_marks():
    samples = [(t / 10.0, int(t) << 20, (100 + t) << 20 if t != 7 else None, 3, 50 << 20, 10 << 20)
               for t in range(20)]
    found_stages = meter.stages(samples, marks(("rank0", 1, "init", 0.4), ("rank1", 2, "init", 0.5),
                                               ("launcher", 3, "start", 0.0), ("rank0", 1, "construction", 1.1),
                                               ("rank1", 2, "construction", 1.2)), 0.2)
    assert [s["stage"] for s in found_stages] == ["init", "construction"]  # the launcher's mark is not a stage
    init, construction = found_stages
    assert init["peak_shm_bytes"] == 7 << 20 and init["end_shm_bytes"] == 6 << 20  # sample 7: no node figure
    assert init["peak_node_bytes"] == 106 << 20
    assert construction["peak_shm_bytes"] == 14 << 20 and construction["peak_node_bytes"] == 114 << 20
    assert construction["end_anon_bytes"] == 50 << 20 and construction["end_libraries_bytes"] == 10 << 20


def test_each_process_is_named_by_its_marks_command_line_and_parent():
    procs = {10: {"ppid": 1, "cmd": "python -c import ctypes, runpy; ... torch.distributed.run ..."},
             11: {"ppid": 10, "cmd": "python job.py job.json"}, 12: {"ppid": 11, "cmd": "python job.py job.json"},
             13: {"ppid": 11, "cmd": "python -c from multiprocessing.forkserver import main; main(...)"},
             14: {"ppid": 13, "cmd": "python -c from multiprocessing.forkserver import main; main(...)"},
             15: {"ppid": 11, "cmd": "python -c from multiprocessing.resource_tracker import main;main(5)"},
             16: {"ppid": 10, "cmd": "sleep 1"}}
    kinds = meter.roles(procs, marks(("rank0", 11, "init", 1.0)))
    assert kinds == {10: "agent", 11: "rank", 12: "worker", 13: "forkserver", 14: "worker",
                     15: "resource_tracker", 16: "other"}


def test_node_memory_counts_anonymous_pages_once_the_libraries_once_and_the_mapped_file_once():
    sampler = meter.Sampler(0, "/g.pt", 0.0)
    sampler.procs = {1: {"roll": {"Pss_Anon": 100, "file_rss": 40, "file_pss": 20}, "roll_status": {"RssAnon": 500,
                                                                                                   "RssFile": 300}},
                     2: {"roll": {"Pss_Anon": 50, "file_rss": 40, "file_pss": 20}, "roll_status": {"RssAnon": 80,
                                                                                                  "RssFile": 200}},
                     3: {"roll": None, "roll_status": None}}
    current = {1: {"RssAnon": 530, "RssFile": 900}, 2: {"RssAnon": 60, "RssFile": 100}, 3: {"RssAnon": 10}}
    # anonymous: 100 + 30 of drift, 50 - 20; libraries: the largest RssFile read without the graph file
    assert sampler.memory(current) == (160, 260, 40)


@pytest.mark.parametrize("code, log, cut, kind", [
    (0, "", None, None), (1, "RuntimeError: unable to write to file </torch_12_34>: No space left on device", None,
                          "shm-full"),
    (-7, "ERROR: DataLoader worker (pid 5) is killed by signal: Bus error.", None, "shm-full"),
    (1, "Traceback...\nValueError: no", None, "job-failed"), (None, "", "the deadline", "deadline"),
])
def test_how_a_job_failed_is_data(code, log, cut, kind):
    failure = meter.failure(code, log, cut)
    assert (failure or {}).get("kind") == kind


def test_marks_are_read_by_whole_lines(tmp_path):
    path = tmp_path / "marks.jsonl"
    path.write_text(json.dumps({"who": "rank0"}) + "\n" + '{"who": "ra')
    first, position = meter.read_marks(str(path), 0)
    assert first == [{"who": "rank0"}]
    with open(str(path), "a") as handle:
        handle.write('nk1"}\n')
    assert meter.read_marks(str(path), position) == ([{"who": "rank1"}], os.path.getsize(str(path)))


def test_what_the_job_left_in_its_temporary_folder_is_counted_and_removed(tmp_path):
    for name in ("pymp-abc", "torchelastic_x", "measure-own"):
        (tmp_path / name).mkdir()
    (tmp_path / "torch_geometric.nn.conv_propagate_1.py").write_text("")
    (tmp_path / "notes.txt").write_text("")
    left = meter.leftovers(str(tmp_path), set(os.listdir(meter.SHM)))
    assert left["removed_from_temp"] == {"pymp-*": 1, "torchelastic_*": 1, "PyG templates (*.py)": 1}
    assert sorted(os.listdir(str(tmp_path))) == ["measure-own", "notes.txt"]
