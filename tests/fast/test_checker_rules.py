"""The checker's rules on facts assembled by its own code from what the static stage and the probe child report
(tests/support/fakes.py: a torch 2.13 CPU build, PyG 2.8.1, torch-scatter/torch-sparse source builds, no
pyg-lib, no GPU), each case edited the way a real environment differs: the container's limits, thread and
launch variables, a missing backend. In process: no child, no torch."""

import time

import pytest

from diagnostics_core import runner
from diagnostics_core.wheels import WHEEL_INDEX, WHEEL_INDEX_CHECKED
from sampling_checker import rules, static_facts
from sampling_checker.cli import SPEC
from support.fakes import FAKE_PYTHON, checker_facts

GiB, MiB = 1 << 30, 1 << 20


def parsed(*argv):
    """The options a run of `argv` gets, bounds included (as the runner plans them)."""
    run = runner.Run(SPEC, list(argv), time.time())
    run.options = SPEC.parser().parse_args(list(argv))
    run.plan_time()
    return run.options


def diagnose(facts, *argv):
    return rules.diagnose(facts, parsed(*argv))


def ids(found):
    return sorted(f["id"] for f in found)


def only(found, finding_id):
    matches = [f for f in found if f["id"] == finding_id]
    assert len(matches) == 1, (finding_id, ids(found))
    return matches[0]


def container(facts, **sections):
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(facts["container"].get(key), dict):
            facts["container"][key].update(value)
        else:
            facts["container"][key] = value
    return facts


CONTAINER_IDS = {"container-shm-small", "container-shm-full", "container-cpu-quota", "container-memory-limit",
                 "open-files-low"}


def test_the_typical_environment_gets_its_known_findings_and_no_container_one():
    found = diagnose(checker_facts())
    assert ids(found) == sorted([
        "cpu-threads-unset", "distributed-sampling-unavailable", "ext-source-build", "ext-source-build",
        "metis-unavailable", "pyg-dist-loader-typeerror", "pyg-distributed-deprecated",
        "pyg-from-partition-edge-feats", "temporal-sampling-unavailable", "weighted-sampling-unavailable"])
    assert not CONTAINER_IDS & set(ids(found))


# ---------------------------------------------------------------------------
# The container's limits
# ---------------------------------------------------------------------------

@pytest.mark.finding("container-shm-small", "container-shm-full")
@pytest.mark.parametrize("total, free, expected, docker", [
    (64 * MiB, 64 * MiB, "container-shm-small", True),      # docker run's default --shm-size
    (64 * MiB, 1 * MiB, "container-shm-small", True),
    (512 * MiB, 512 * MiB, "container-shm-small", False),
    (GiB - 1, GiB - 1, "container-shm-small", False),
    (8 * GiB, 100 * MiB, "container-shm-full", False),      # big, but left full by killed jobs
    (8 * GiB, GiB - 1, "container-shm-full", False),
    (GiB, GiB, None, False),
    (16 * GiB, 16 * GiB, None, False),
])
def test_a_small_or_full_dev_shm_is_named_with_the_planner_command(total, free, expected, docker):
    facts = container(checker_facts(), shm={"total_bytes": total, "free_bytes": free})
    found = [f for f in diagnose(facts) if f["id"] in ("container-shm-small", "container-shm-full")]
    if expected is None:
        assert found == []
        return
    [item] = found
    assert item["id"] == expected and item["severity"] == "warning"
    assert item["evidence"]["total_bytes"] == total and item["evidence"]["free_bytes"] == free
    assert item["evidence"]["docker_default"] is docker
    if expected == "container-shm-small":
        assert "/plan_capacity.py --data GRAPH.pt --num-workers 4 --shm " in item["fix"]
        assert "--shm-size" in item["fix"] and "64 MB" in item["fix"]
        if total == 64 * MiB:
            assert "--shm 64MiB " in item["fix"]
    else:
        assert item["fix"].startswith("ls -la /dev/shm")


def test_no_dev_shm_no_finding():
    assert not CONTAINER_IDS & set(ids(diagnose(container(checker_facts(), shm=None))))


@pytest.mark.finding("container-cpu-quota")
@pytest.mark.parametrize("quota, affinity, env, threads", [
    (2.0, 8, {}, 2),
    (2.5, 8, {}, 2),            # whole cores, rounded down
    (0.5, 8, {}, 1),            # at least one thread
    (4.0, 8, {"LOCAL_WORLD_SIZE": "2"}, 2),   # shared by the node's ranks
    (6.0, 8, {"SLURM_NTASKS_PER_NODE": "4"}, 1),
    (3.0, 4, {}, 3),
])
def test_a_cpu_quota_below_the_affinity_gives_the_thread_count_to_set(quota, affinity, env, threads, monkeypatch):
    facts = container(checker_facts(), cgroup_cpu={"cores": quota, "quota_us": int(quota * 100000),
                                                   "period_us": 100000, "limited_at": "/sys/fs/cgroup"})
    facts["cpu"]["affinity"] = {"count": affinity, "cpus": "0-%d" % (affinity - 1)}
    set_launch(facts, env, monkeypatch)
    found = diagnose(facts)
    item = only(found, "container-cpu-quota")
    assert item["severity"] == "warning"
    assert item["evidence"]["quota_cores"] == quota and item["evidence"]["affinity_cores"] == affinity
    assert item["evidence"]["threads_to_set"] == threads
    assert item["fix"].startswith("export OMP_NUM_THREADS=%d  # or torch.set_num_threads(%d)" % (threads, threads))
    # cpu-threads-unset names the same value: the quota, not the affinity, is what runs
    assert only(found, "cpu-threads-unset")["fix"] == "export OMP_NUM_THREADS=%d" % threads


@pytest.mark.parametrize("quota, affinity", [(8.0, 8), (16.0, 8), (None, 8)])
def test_a_quota_at_or_above_the_affinity_is_no_finding(quota, affinity):
    facts = container(checker_facts(), cgroup_cpu={"cores": quota})
    facts["cpu"]["affinity"]["count"] = affinity
    assert "container-cpu-quota" not in ids(diagnose(facts))


def test_a_set_thread_count_above_the_quota_is_oversubscription_not_the_quota_finding(monkeypatch):
    facts = container(checker_facts(), cgroup_cpu={"cores": 2.0})
    facts["environment"]["threads"] = {"OMP_NUM_THREADS": "8"}
    found = diagnose(facts)
    assert "container-cpu-quota" not in ids(found)
    item = only(found, "cpu-threads-oversubscribed")
    assert item["evidence"]["allowed_cores"] == 2 and item["fix"] == "export OMP_NUM_THREADS=2"


@pytest.mark.finding("container-memory-limit")
@pytest.mark.parametrize("limit, host, expected_word", [
    (8 * GiB, 32 * GiB, "8GiB"),
    (512 * MiB, 32 * GiB, "512MiB"),
    (3 * GiB + 12345, 32 * GiB, str(3 * GiB + 12345)),
    (32 * GiB - 4096, 32 * GiB, str(32 * GiB - 4096)),
])
def test_a_memory_limit_below_the_host_ram_plans_against_the_limit(limit, host, expected_word):
    facts = container(checker_facts(), cgroup_memory={"limit_bytes": limit, "limited_at": "/sys/fs/cgroup/job"},
                      host_memory_bytes=host)
    item = only(diagnose(facts), "container-memory-limit")
    assert item["severity"] == "warning"
    assert item["evidence"]["limit_bytes"] == limit and item["evidence"]["host_memory_bytes"] == host
    assert "/plan_capacity.py --data GRAPH.pt --num-workers 4 --host-ram %s  # " % expected_word in item["fix"]


@pytest.mark.parametrize("limit, host", [(None, 32 * GiB), (32 * GiB, 32 * GiB), (64 * GiB, 32 * GiB),
                                         (8 * GiB, None)])
def test_no_memory_finding_without_a_limit_below_the_host(limit, host):
    facts = container(checker_facts(), cgroup_memory={"limit_bytes": limit}, host_memory_bytes=host)
    assert "container-memory-limit" not in ids(diagnose(facts))


@pytest.mark.finding("open-files-low")
@pytest.mark.parametrize("soft, hard, severity, fix_start", [
    (1024, 1048576, "info", "ulimit -Sn 65536  # "),
    (1024, None, "info", "ulimit -Sn 65536  # "),
    (1024, 8192, "info", "ulimit -Sn 8192  # "),
    (256, 4096, "info", "ulimit -Sn 4096  # "),
    (1024, 1024, "warning", "torch.multiprocessing.set_sharing_strategy('file_system')"),
    (512, 2048, "warning", "torch.multiprocessing.set_sharing_strategy('file_system')"),
])
def test_a_low_open_files_limit_is_raised_within_the_hard_limit(soft, hard, severity, fix_start):
    facts = container(checker_facts(), open_files={"soft": soft, "hard": hard})
    item = only(diagnose(facts), "open-files-low")
    assert item["severity"] == severity and item["fix"].startswith(fix_start)
    assert item["evidence"]["soft"] == soft and item["evidence"]["hard"] == hard
    assert item["evidence"]["hard_limit_command"] == "ulimit -Hn"
    if severity == "warning":  # ulimit -Sn cannot help: say why, and what can
        assert "The hard limit (ulimit -Hn) is %d" % hard in item["fix"] and "--ulimit nofile=" in item["fix"]


@pytest.mark.parametrize("soft", [4096, 65536, None])
def test_an_open_files_limit_of_4096_or_more_is_no_finding(soft):
    facts = container(checker_facts(), open_files={"soft": soft, "hard": None})
    assert "open-files-low" not in ids(diagnose(facts))


def test_a_container_section_the_stage_could_not_read_is_no_finding():
    facts = checker_facts()
    facts["container"] = None
    assert not CONTAINER_IDS & set(ids(diagnose(facts)))


# ---------------------------------------------------------------------------
# CPU and threads (moved from subprocess runs: the variables are read by the static stage's own code)
# ---------------------------------------------------------------------------

def set_launch(facts, env, monkeypatch, drop=("OMP_NUM_THREADS",)):
    """The environment section the static stage reads from `env` (and nothing else launch-like)."""
    for name in list(static_facts.THREAD_VARIABLES + static_facts.LAUNCH_INT_VARIABLES
                     + static_facts.LAUNCH_STR_VARIABLES) + ["TORCHELASTIC_RUN_ID", "GROUP_RANK"] + list(drop):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    section = static_facts.get_environment_facts()
    facts["environment"].update(threads=section["threads"], launch=section["launch"], launcher=section["launcher"])
    return facts


@pytest.mark.finding("cpu-threads-unset")
@pytest.mark.parametrize("cores, env, per_process", [
    (8, {}, 8), (8, {"LOCAL_WORLD_SIZE": "2"}, 4), (8, {"LOCAL_WORLD_SIZE": "16"}, 1),
    (6, {"SLURM_NTASKS_PER_NODE": "4(x2)"}, 1), (16, {"SLURM_NTASKS_PER_NODE": "2,4", "SLURM_NODEID": "1"}, 4)])
def test_omp_num_threads_unset_exports_cores_per_local_process(cores, env, per_process, monkeypatch):
    facts = set_launch(checker_facts(), env, monkeypatch)
    facts["cpu"]["affinity"]["count"] = cores
    item = only(diagnose(facts), "cpu-threads-unset")
    assert item["severity"] == "info" and item["evidence"]["allowed_cores"] == cores
    assert item["fix"] == "export OMP_NUM_THREADS=%d" % per_process


@pytest.mark.finding("cpu-threads-invalid")
@pytest.mark.parametrize("name, value", [("OMP_NUM_THREADS", "0"), ("OMP_NUM_THREADS", "four"),
                                         ("MKL_NUM_THREADS", "-2"), ("OPENBLAS_NUM_THREADS", "")])
def test_a_thread_count_that_is_not_a_positive_integer(name, value, monkeypatch):
    facts = set_launch(checker_facts(), {name: value}, monkeypatch)
    item = only(diagnose(facts), "cpu-threads-invalid")
    assert item["severity"] == "warning" and item["evidence"]["invalid"] == {name: value}
    assert item["fix"] == "export OMP_NUM_THREADS=8"


@pytest.mark.parametrize("value", ["1", "4,2", "8"])
def test_valid_thread_counts_are_not_invalid(value, monkeypatch):
    facts = set_launch(checker_facts(), {"OMP_NUM_THREADS": value}, monkeypatch)
    assert "cpu-threads-invalid" not in ids(diagnose(facts))


@pytest.mark.finding("cpu-threads-oversubscribed")
@pytest.mark.parametrize("threads, local, oversubscribed", [(8, "2", True), (4, "2", False), (5, "2", True),
                                                            (1, "8", False), (2, "8", True)])
def test_threads_times_local_processes_against_the_cores(threads, local, oversubscribed, monkeypatch):
    facts = set_launch(checker_facts(), {"OMP_NUM_THREADS": str(threads), "LOCAL_WORLD_SIZE": local}, monkeypatch)
    found = diagnose(facts)
    assert ("cpu-threads-oversubscribed" in ids(found)) is oversubscribed
    if oversubscribed:
        item = only(found, "cpu-threads-oversubscribed")
        assert item["evidence"] == {"OMP_NUM_THREADS": threads, "local_processes": int(local), "allowed_cores": 8}
        assert item["fix"] == "export OMP_NUM_THREADS=%d" % max(1, 8 // int(local))


@pytest.mark.finding("cpu-numa-multi-node")
def test_several_numa_nodes():
    facts = checker_facts()
    facts["cpu"]["numa_nodes"] = [{"node": 0, "cpus": "0-15"}, {"node": 1, "cpus": "16-31"}]
    item = only(diagnose(facts), "cpu-numa-multi-node")
    assert item["severity"] == "info" and item["evidence"]["numa_nodes"][1] == {"node": 1, "cpus": "16-31"}
    assert "cpu-numa-multi-node" not in ids(diagnose(checker_facts()))


# ---------------------------------------------------------------------------
# Launch variables (moved from subprocess runs; read by the static stage's own code)
# ---------------------------------------------------------------------------

@pytest.mark.finding("launch-env-invalid")
@pytest.mark.parametrize("env, invalid", [
    ({"WORLD_SIZE": "two", "MASTER_ADDR": "node0", "MASTER_PORT": "70000"},
     {"WORLD_SIZE": "two", "MASTER_PORT": "70000"}),
    ({"RANK": "-1"}, {"RANK": "-1"}),
    ({"LOCAL_WORLD_SIZE": "0"}, {"LOCAL_WORLD_SIZE": "0"}),
    ({"SLURM_NTASKS_PER_NODE": "4(x)"}, {"SLURM_NTASKS_PER_NODE": "4(x)"}),
])
def test_launch_values_not_valid(env, invalid, monkeypatch):
    item = only(diagnose(set_launch(checker_facts(), env, monkeypatch)), "launch-env-invalid")
    assert item["severity"] == "error" and item["evidence"]["invalid"] == invalid
    assert item["fix"] == "unset or correct them, e.g.: unset %s" % " ".join(sorted(invalid))


@pytest.mark.finding("launch-rank-out-of-range")
def test_rank_not_below_world_size(monkeypatch):
    item = only(diagnose(set_launch(checker_facts(), {"RANK": "4", "WORLD_SIZE": "4"}, monkeypatch)),
                "launch-rank-out-of-range")
    assert item["severity"] == "error" and item["evidence"] == {"RANK": {"RANK": 4, "WORLD_SIZE": 4}}
    assert item["fix"].startswith("let the launcher set ranks: torchrun")


@pytest.mark.finding("launch-local-rank-no-device")
def test_local_rank_past_visible_gpus(monkeypatch):
    facts = set_launch(checker_facts(), {"LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "4"}, monkeypatch)
    assert "launch-local-rank-no-device" not in ids(diagnose(facts))  # no GPU: nothing to point past
    facts["cuda"]["device_count"] = 2
    item = only(diagnose(facts), "launch-local-rank-no-device")
    assert item["severity"] == "error"
    assert item["evidence"]["LOCAL_RANK"] == 3 and item["evidence"]["visible_devices"] == 2
    assert "torchrun --nproc_per_node 2" in item["fix"]


@pytest.mark.finding("launch-master-incomplete")
@pytest.mark.parametrize("env, missing, fix", [
    ({"MASTER_ADDR": "node0"}, "MASTER_PORT", "export MASTER_PORT=29500"),
    ({"MASTER_PORT": "29500"}, "MASTER_ADDR", "export MASTER_ADDR=HOST  # HOST: the hostname of rank 0")])
def test_master_addr_and_port_go_together(env, missing, fix, monkeypatch):
    item = only(diagnose(set_launch(checker_facts(), env, monkeypatch)), "launch-master-incomplete")
    assert item["severity"] == "error" and item["evidence"]["missing"] == missing and item["fix"] == fix


@pytest.mark.finding("launch-torchrun-slurm-mismatch")
def test_torchrun_and_slurm_variables_disagree(monkeypatch):
    plain = {"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_JOB_ID": "77", "RANK": "1", "WORLD_SIZE": "4"}
    item = only(diagnose(set_launch(checker_facts(), plain, monkeypatch)), "launch-torchrun-slurm-mismatch")
    assert item["severity"] == "warning" and item["evidence"] == {"RANK": {"RANK": 1, "SLURM_PROCID": 0}}
    assert "export RANK=$SLURM_PROCID" in item["fix"]
    # torchrun inside an allocation renumbers ranks on purpose
    under_torchrun = set_launch(checker_facts(), dict(plain, TORCHELASTIC_RUN_ID="job"), monkeypatch)
    assert "launch-torchrun-slurm-mismatch" not in ids(diagnose(under_torchrun))


@pytest.mark.finding("launch-slurm-rank-out-of-range")
def test_slurm_ranks_outside_their_counts(monkeypatch):
    env = {"SLURM_PROCID": "5", "SLURM_NTASKS": "4", "SLURM_LOCALID": "4", "SLURM_NTASKS_PER_NODE": "4(x2)",
           "SLURM_NODEID": "2", "SLURM_NNODES": "2", "SLURM_JOB_ID": "7"}
    found = diagnose(set_launch(checker_facts(), env, monkeypatch))
    item = only(found, "launch-slurm-rank-out-of-range")
    assert item["severity"] == "error"
    assert item["evidence"] == {
        "SLURM_PROCID": {"SLURM_PROCID": 5, "SLURM_NTASKS": 4},
        "SLURM_LOCALID": {"SLURM_LOCALID": 4, "SLURM_NTASKS_PER_NODE": 4, "SLURM_NTASKS_PER_NODE_raw": "4(x2)"},
        "SLURM_NODEID": {"SLURM_NODEID": 2, "SLURM_NNODES": 2}}
    assert "launch-env-invalid" not in ids(found)  # "4(x2)" is SLURM's own notation, not an error
    assert item["fix"].startswith("do not export SLURM_* by hand")


def test_slurm_ranks_inside_uneven_node_counts_are_fine(monkeypatch):
    # "3,2": node 1 runs two tasks, so local id 1 is valid there
    env = {"SLURM_PROCID": "4", "SLURM_NTASKS": "5", "SLURM_LOCALID": "1", "SLURM_NTASKS_PER_NODE": "3,2",
           "SLURM_NODEID": "1", "SLURM_NNODES": "2"}
    assert not {"launch-slurm-rank-out-of-range", "launch-env-invalid"} & set(
        ids(diagnose(set_launch(checker_facts(), env, monkeypatch))))
    env["SLURM_LOCALID"] = "2"
    assert only(diagnose(set_launch(checker_facts(), env, monkeypatch)), "launch-slurm-rank-out-of-range")[
        "evidence"] == {"SLURM_LOCALID": {"SLURM_LOCALID": 2, "SLURM_NTASKS_PER_NODE": 2,
                                          "SLURM_NTASKS_PER_NODE_raw": "3,2"}}


@pytest.mark.finding("launch-mpi-rank-out-of-range")
def test_mpi_ranks_outside_their_sizes(monkeypatch):
    env = {"PMI_RANK": "2", "PMI_SIZE": "2", "OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2",
           "OMPI_COMM_WORLD_LOCAL_RANK": "3", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
    item = only(diagnose(set_launch(checker_facts(), env, monkeypatch)), "launch-mpi-rank-out-of-range")
    assert item["severity"] == "error"
    assert item["evidence"] == {
        "PMI_RANK": {"PMI_RANK": 2, "PMI_SIZE": 2},
        "OMPI_COMM_WORLD_LOCAL_RANK": {"OMPI_COMM_WORLD_LOCAL_RANK": 3, "OMPI_COMM_WORLD_LOCAL_SIZE": 2}}
    assert "mpirun -np N" in item["fix"]


@pytest.mark.finding("launch-socket-ifname-missing")
@pytest.mark.parametrize("variable, value, absent", [
    ("GLOO_SOCKET_IFNAME", "nosuch0", ["nosuch0"]), ("GLOO_SOCKET_IFNAME", "eth0,ib9", ["ib9"]),
    ("GLOO_SOCKET_IFNAME", "eth", ["eth"]),           # gloo takes exact names
    ("NCCL_SOCKET_IFNAME", "eth", []),                # NCCL takes prefixes...
    ("NCCL_SOCKET_IFNAME", "=eth", ["eth"]),          # ...unless told exact
    ("NCCL_SOCKET_IFNAME", "^lo", []), ("TP_SOCKET_IFNAME", "eth0", [])])
def test_a_socket_interface_variable_naming_no_interface(variable, value, absent, monkeypatch):
    found = diagnose(set_launch(checker_facts(), {variable: value}, monkeypatch))
    if not absent:
        assert "launch-socket-ifname-missing" not in ids(found)
        return
    item = only(found, "launch-socket-ifname-missing")
    assert item["severity"] == "error" and item["evidence"][variable]["absent"] == absent
    assert item["evidence"]["interfaces"] == ["eth0", "lo"]


# ---------------------------------------------------------------------------
# A missing pyg-lib: the index the fix installs from, and what of it was verified here
# ---------------------------------------------------------------------------

def no_backend(facts):
    facts["pyg"]["flags"].update(WITH_TORCH_SPARSE=False)
    facts["pyg"]["neighbor_backend"] = None
    facts["sampling"]["neighbor_backend"] = None
    return facts


@pytest.mark.finding("neighbor-sampling-unavailable")
@pytest.mark.parametrize("finding_id, edit", [
    ("neighbor-sampling-unavailable", no_backend),
    ("weighted-sampling-unavailable", lambda facts: facts),
    ("temporal-sampling-unavailable", lambda facts: facts),
    ("metis-unavailable", lambda facts: facts),
    ("distributed-sampling-unavailable", lambda facts: facts),
])
def test_a_fix_for_a_missing_pyg_lib_names_its_index_pattern_and_date(finding_id, edit):
    item = only(diagnose(edit(checker_facts())), finding_id)
    url = "https://data.pyg.org/whl/torch-2.13.0+cpu.html"
    assert item["fix"] == "%s -m pip install --only-binary=:all: pyg_lib -f %s" % (FAKE_PYTHON, url)
    index = item["evidence"]["pyg_lib_index"]
    assert index["url"] == url and index["pattern"] == WHEEL_INDEX == \
        "https://data.pyg.org/whl/torch-{torch}+{variant}.html"
    assert index["pattern_checked"] == WHEEL_INDEX_CHECKED and "pyg-lib" in index["pattern_source"]
    assert "torch 2.13 and variant cpu" in index["verified_here"]
    assert "pyg-lib" in index["cited"] and "nothing" not in index["verified_here"].split(",")[0]


@pytest.mark.finding("no-prebuilt-wheels")
def test_no_pyg_lib_wheel_names_the_index_pattern_and_the_torch_that_has_all_wheels():
    def cu121(static):
        static["torch_build"].update(version="2.13.0+cu121", cuda="12.1", variant="cu121")
    facts = checker_facts(static_only=True, edit_static=cu121)
    item = only(diagnose(facts, "--static-only"), "no-prebuilt-wheels")
    assert item["evidence"]["missing"][0] == "pyg-lib" and item["evidence"]["variant"] == "cu121"
    assert item["evidence"]["pyg_lib_index"]["url"] == "https://data.pyg.org/whl/torch-2.13.0+cu121.html"
    assert "-m pip install torch==2.5.0+cu121 --index-url https://download.pytorch.org/whl/cu121 && " in item["fix"]
    assert "pyg_lib torch_scatter torch_sparse -f https://data.pyg.org/whl/torch-2.5.0+cu121.html" in item["fix"]


# ---------------------------------------------------------------------------
# Without static facts; the probe's deadline
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("argv, again", [
    (["--timeout", "6"], "--timeout 12"),
    (["--timeout", "3000"], "--timeout 3600"),
    (["--timeout", "5", "--static-only"], "--timeout 10 --static-only"),
    (["--timeout", "5", "--python", "/opt/venv/bin/python"], "--timeout 10 --python /opt/venv/bin/python"),
])
def test_without_static_facts_only_the_stage_finding_and_every_gate_asked_fails(argv, again):
    options = parsed(*(argv + ([] if "--static-only" in argv else ["--require-cuda"])))
    facts = {"interpreter": None, "static_failure": {"how": "deadline", "step_running": "static"}}
    [item] = rules.diagnose(facts, options)
    assert item["id"] == "static-stage-incomplete" and item["evidence"]["how"] == "deadline"
    assert item["fix"].split("  #")[0].endswith("check_sampling_backends.py " + again)
    gates = rules.evaluate_gates(facts, [item], options)
    assert gates == ({} if "--static-only" in argv else {"cuda": {
        "passed": False, "reason": "not decided: the static stage gave no facts"}})


@pytest.mark.parametrize("timeout, doubled", [(2, 4), (60, 120), (1800, 3600), (3600, 3600)])
def test_the_probe_deadline_fix_doubles_the_timeout_within_its_range(timeout, doubled):
    facts = checker_facts()
    facts["probe"].update(complete=False, attempts=[dict(facts["probe"]["attempts"][0], killed_for="deadline",
                                                         culprit="ext:pyg_lib", finished=False)])
    item = only(diagnose(facts, "--timeout", str(timeout)), "probe-deadline")
    assert item["fix"].endswith("check_sampling_backends.py --timeout %d" % doubled)
    assert item["evidence"]["step_running"] == "ext:pyg_lib"
