"""CPU jobs and the hardware defaults, in process through the planner's Spec: --gpus-per-node 0 plans gloo ranks
(ranks per node from the cores or --ranks-per-node, threads per rank, host RAM, /dev/shm and the cores as each
design's own checks), the cheapest CPU design with its launch line, and --host-ram, --shm and --cores taken
from this machine's container facts when not given (each saying so)."""

import shlex
import time

import pytest

from capacity_planner import cli, designs, spec
from capacity_planner.render import to_markdown
from capacity_planner.rules import RULES
from diagnostics_core import runner

ISSUE = ["--nodes", "200000", "--edges", "2000000", "--features", "64", "--num-neighbors", "10,5", "--batch-size",
         "512", "--gpus-per-node", "0", "--ranks-per-node", "2", "--num-workers", "4", "--host-ram", "24GB",
         "--cores", "2", "--shm", "64MB"]
MIB = float(1 << 20)


def plan(*argv):
    run = runner.Run(cli.SPEC, [str(word) for word in argv], time.time())
    runner.prepare(run)
    assert not cli.runs_children(run.options)
    cli.SPEC.gather(run)
    run.findings = [found for rule in RULES for found in rule(run.facts, run.options)]
    run.gates = cli.SPEC.gates(run.facts, run.findings, run.options)
    return runner.compose(run)[0]


def design(document, name):
    return designs.by_name(document["designs"], name)


def ids(document):
    return [f["id"] for f in document["findings"]]


@pytest.mark.finding("plan-cheapest-fit")
@pytest.mark.parametrize("how, line", [
    ("spawn", "OMP_NUM_THREADS=1 python train.py  # torch.multiprocessing.spawn(main, nprocs=2); each rank: "
              "dist.init_process_group('gloo')"),
    ("torchrun", "OMP_NUM_THREADS=1 torchrun --standalone --nproc-per-node 2 train.py  # each rank: "
                 "dist.init_process_group('gloo')"),
    ("srun", "OMP_NUM_THREADS=1 srun --ntasks-per-node 2 --cpus-per-task 1 python train.py  # each rank:"),
])
def test_the_issues_job_gets_a_cpu_design_that_fits_two_cores_and_24_gb(how, line):
    document = plan(*ISSUE + ["--launch", how])
    assert [d["design"] for d in document["designs"]] == list(designs.CPU_ORDER)
    assert document["cheapest_fit"] == "cpu-ddp-sampling-in-rank" and document["gates"]["fits"]["passed"]
    chosen = design(document, "cpu-ddp-sampling-in-rank")
    assert chosen["launch"].startswith(line) and "num_workers=0" in chosen["launch"]
    assert chosen["host"]["shm_per_node"]["bytes"] == 0 and chosen["launch_shape"]["threads_per_rank"] == 1
    [found] = [f for f in document["findings"] if f["id"] == "plan-cheapest-fit"]
    assert found["evidence"]["gpus_used"] == 0 and found["evidence"]["ranks_per_node"] == 2
    assert found["evidence"]["gpu_per_rank"] is None and found["fix"].startswith(chosen["launch"])
    asked = design(document, "cpu-ddp-private-copies")
    assert asked["fits"] == {"host_ram": True, "shm": False, "cores": False, "all": False}  # 10 processes, 2 cores


def test_no_design_on_a_cpu_node_claims_or_checks_a_gpu():
    document = plan(*ISSUE)
    for item in document["designs"]:
        assert item["gpus"] == 0 and item["gpu"] is None and "gpu" not in item["fits"]
        assert set(item["fits"]) == {"host_ram", "shm", "cores", "all"}
    report = to_markdown(document)
    assert "no (gpu)" not in report and "1 GPU" not in report
    assert "| cpu-ddp-sampling-in-rank | 0 | torchrun, 2 x 1 threads; 0 workers (main) |" in report


@pytest.mark.parametrize("how, method, per_node_mib", [("spawn", "spawn", 357.3), ("torchrun", "fork", 192.5)])
def test_the_issues_job_as_asked_needs_what_the_measurements_found(how, method, per_node_mib):
    # issue 40's measurements of this job: 357.8 MiB under mp.spawn, 192.6 under torchrun (model 357.3, 192.5)
    asked = design(plan(*ISSUE + ["--launch", how]), "cpu-ddp-private-copies")
    assert asked["launch_shape"]["worker_start_method"] == method
    assert asked["host"]["shm_per_node"]["bytes"] / MIB == pytest.approx(per_node_mib, rel=0.01)
    assert asked["host"]["shm_per_rank"]["bytes"] * 2 == asked["host"]["shm_per_node"]["bytes"]


@pytest.mark.parametrize("extra, sampling_in_rank, threads", [
    (["--cores", "8", "--num-workers", "3"], {"ranks": 8, "workers": 0}, {"asked": 1, "in_rank": 1}),
    (["--cores", "12", "--num-workers", "1", "--ranks-per-node", "3"], {"ranks": 3, "workers": 0},
     {"asked": 3, "in_rank": 4}),
    (["--cores", "5", "--num-workers", "0"], None, {"asked": 1, "in_rank": None}),
])
def test_ranks_and_threads_per_rank_come_from_the_cores(extra, sampling_in_rank, threads):
    argv = ["--nodes", "10000", "--edges", "50000", "--gpus-per-node", "0", "--host-ram", "64GB"] + extra
    document = plan(*argv)
    workers = int(extra[extra.index("--num-workers") + 1])
    cores = int(extra[extra.index("--cores") + 1])
    asked = design(document, "cpu-ddp-private-copies")["launch_shape"]
    if "--ranks-per-node" not in extra:
        assert asked["ranks"] == max(1, cores // (1 + workers)) and "fits %d cores" % cores in asked["ranks_source"]
    assert asked["threads_per_rank"] == threads["asked"]
    in_rank = design(document, "cpu-ddp-sampling-in-rank")
    if sampling_in_rank is None:
        assert in_rank is None  # no workers asked: it would be the private-copies design again
    else:
        shape = in_rank["launch_shape"]
        assert {"ranks": shape["ranks"], "workers": shape["workers"]} == sampling_in_rank
        assert shape["threads_per_rank"] == threads["in_rank"]


def test_a_cpu_plan_that_fits_nothing_names_what_each_design_lacks():
    document = plan(*ISSUE[:-6] + ["--host-ram", "1GB", "--cores", "2", "--shm", "64MB"])
    [found] = [f for f in document["findings"] if f["id"] == "plan-nothing-fits"]
    assert found["evidence"]["cpu-ddp-sampling-in-rank"] == ["host_ram"]
    assert document["cheapest_fit"] is None and document["fits_all_gpus"] is None


@pytest.mark.finding("plan-shm-too-small")
@pytest.mark.parametrize("shm, term", [("64MiB", "sampler_copy"), ("200MiB", "graph_pickled_to_workers"),
                                       ("300MiB", "batches_in_flight")])
def test_a_small_shm_names_the_term_it_fails_at_and_a_size_that_holds_the_job(shm, term):
    document = plan(*ISSUE[:-2] + ["--shm", shm, "--launch", "spawn"])
    found = [f for f in document["findings"] if f["id"] == "plan-shm-too-small" and
             f["evidence"]["design"] == "cpu-ddp-private-copies"]
    assert found and found[0]["evidence"]["fails_at"]["term"] == term
    words = shlex.split(found[0]["fix"].split("(docker run ")[1].split(" ...")[0])
    size = int(words[0].split("=")[1].rstrip("m")) * MIB
    assert size >= found[0]["evidence"]["shm_needed_per_node"]  # asking for the fix's size would hold the job


@pytest.mark.finding("plan-graph-pickled-to-workers")
@pytest.mark.parametrize("extra, pickled", [
    (["--launch", "spawn"], True), (["--launch", "torchrun"], False),
    (["--launch", "torchrun", "--python-version", "3.14"], True),
    (["--launch", "spawn", "--start-method", "fork"], False),
    (["--launch", "spawn", "--num-workers", "0", "--graph-in-spawn-args"], True),
    (["--launch", "spawn", "--num-workers", "0"], False),
])
def test_the_graph_pickled_into_shm_is_named_with_the_start_method_and_why(extra, pickled):
    document = plan(*ISSUE[:-6] + ["--host-ram", "24GB", "--cores", "2", "--shm", "8GB"] + extra)
    found = [f for f in document["findings"] if f["id"] == "plan-graph-pickled-to-workers"]
    assert bool(found) is pickled
    if found:
        evidence = found[0]["evidence"]
        assert evidence["design"] == "cpu-ddp-private-copies" and evidence["why"]
        assert evidence["pickled_per_rank_bytes"] + evidence["spawn_args_per_node_bytes"] > 0
        assert found[0]["fix"].split("  #")[0].endswith("--start-method fork")


class Machine(object):
    def __init__(self, memory, shm, cores):
        self.facts = {"memory": memory, "shm": shm, "cores": cores}

    def __call__(self):
        return self.facts


LIMITED = Machine({"host_bytes": 64 << 30, "cgroup_limit_bytes": 24 << 30, "usable_bytes": 24 << 30},
                  {"path": "/dev/shm", "total_bytes": 64 << 20, "free_bytes": 60 << 20, "fstype": "tmpfs",
                   "size_option": "65536k"}, {"affinity": 8, "cgroup_cores": 2.0, "usable": 2})


@pytest.mark.parametrize("given, machine, expected", [
    ([], LIMITED, {"host_ram": 24 << 30, "shm": 60 << 20, "cores": 2,
                   "host_ram_source": "cgroup memory limit", "shm_source": "60 MiB free of 64 MiB",
                   "cores_source": "cgroup quota 2.0"}),
    (["--host-ram", "32GB"], LIMITED, {"host_ram": 32 * 10 ** 9, "shm": 16 * 10 ** 9, "cores": 2,
                                       "shm_source": "half of --host-ram"}),
    (["--shm", "1GB", "--cores", "16"], LIMITED, {"shm": 10 ** 9, "cores": 16, "shm_source": "--shm"}),
    ([], Machine({"host_bytes": 16 << 30, "cgroup_limit_bytes": None, "usable_bytes": 16 << 30}, None,
                 {"affinity": 4, "cgroup_cores": None, "usable": 4}),
     {"host_ram": 16 << 30, "shm": 8 << 30, "cores": 4, "host_ram_source": "MemTotal",
      "shm_source": "has no /dev/shm"}),
    ([], Machine({"host_bytes": None, "cgroup_limit_bytes": None, "usable_bytes": None}, None,
                 {"affinity": 1, "cgroup_cores": None, "usable": 1}),
     {"host_ram": 512 * 10 ** 9, "host_ram_source": "give --host-ram"}),
])
def test_unset_hardware_comes_from_this_machines_container_facts(monkeypatch, given, machine, expected):
    monkeypatch.setattr(spec, "this_machine", machine)
    hardware = plan("--nodes", "1000", "--edges", "5000", *given)["request"]["hardware"]
    for key, value in expected.items():
        assert (value in hardware[key]) if key.endswith("_source") else hardware[key] == value, (key, hardware)
