"""The topology the launch doctor computes from parsed words, in this process: option tables, bounded
counts, srun's tasks and CPUs by SLURM version, torchrun agents and ranks, heterogeneous components,
the variables srun --export lets through, threads per rank."""

import re
from pathlib import Path

import pytest

from launch_doctor import counts, options, parse, topology

V22 = (22, 5, 8)
DOCS = Path(__file__).resolve().parents[2] / "references" / "distributed-workflows.md"


def shapes(text, overrides=(), version=V22, source=None):
    source = source or ("script" if text.startswith("#!") else "command")
    job = parse.read_job(text, list(overrides), source)
    return topology.topology(job, version)


def first(text, overrides=(), version=V22):
    return shapes(text, overrides, version)["steps"][0]


# --- option tables -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("words, expected", [
    (["-N", "2", "-n4", "-c", "8", "python"], {"nodes": "2", "ntasks": "4", "cpus-per-task": "8"}),
    (["--nodes", "2", "--exclusive", "python"], {"nodes": "2", "exclusive": ""}),
    (["-N2", "--ntasks-per-node=4", "--export=NONE", "x"], {"nodes": "2", "ntasks-per-node": "4", "export": "NONE"}),
    (["--het-group=0,1", "-l", "x"], {"het-group": "0,1", "label": True}),
])
def test_slurm_options(words, expected):
    found, rest, _ = options.slurm_options(words)
    assert found == expected and rest[0] in ("python", "x")


@pytest.mark.parametrize("words, expected, program", [
    (["--nnodes=2", "--nproc_per_node", "4", "t.py", "--lr", "1"], {"nnodes": "2", "nproc-per-node": "4"},
     ["t.py", "--lr", "1"]),
    (["--standalone", "--nproc-per-node=2", "t.py"], {"standalone": True, "nproc-per-node": "2"}, ["t.py"]),
    (["--no-python", "bash", "-c", "x"], {"no-python": True}, ["bash", "-c", "x"]),
])
def test_torchrun_options(words, expected, program):
    found, rest, _ = options.torchrun_options(words)
    assert found == expected and rest == program


# --- bounded counts ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, value, says", [
    ("ntasks-per-node", "-1", 'Invalid numeric value "-1" for --ntasks-per-node.'),
    ("cpus-per-task", "0", 'Invalid numeric value "0" for --cpus-per-task.'),
    ("ntasks", "0", 'Invalid numeric value "0" for --ntasks.'),
    ("ntasks-per-node", "1x", 'Invalid numeric value "1x" for --ntasks-per-node.'),
    ("nodes", "4-2", "Maximum node count 2 is less than minimum node count 4"),
    ("nodes", "2-", "Maximum node count -1 is less than minimum node count 2"),
    ("nodes", "12345678901234567890", '"12345678901234567890" is not a valid node count'),
    ("nodes", "abc", '"abc" is not a valid node count'),
    ("nodes", "1,3", '"1,3" is not a valid node count'),
    ("nodes", "0", "Batch job submission failed: Node count specification invalid"),
    ("nodes", "4294967295", '"4294967295" is not a valid node count'),
    ("ntasks", "12345678901234567890", "Numeric argument (9223372036854775807) to big for --ntasks."),
    ("gpus-per-node", "-1", "Invalid generic resource (gres) specification"),
])
def test_counts_slurm_refuses_with_what_it_says(name, value, says):
    assert counts.check(name, value)["slurm_says"] == says


@pytest.mark.parametrize("name, value, why", [
    ("cpus-per-task", "99999999999", "59391 here"),  # measured: sbatch 22.05 shows CPUs/Task=59391
    ("nodes", "4294967296", "becomes 0"), ("nodes", "5000000", "never starts"),
    ("ntasks-per-node", "100000", "more tasks on one node"), ("ntasks", "999999999", "more tasks than any"),
])
def test_counts_slurm_wraps_or_cannot_start(name, value, why):
    assert why in counts.check(name, value)["why"]


@pytest.mark.parametrize("name, value", [
    ("nodes", "2"), ("nodes", "1-2"), ("nodes", "2k"), ("ntasks", "8"), ("cpus-per-task", "65535"),
    ("gpus-per-node", "a100:4"), ("nodes", "$N"), ("ntasks", "${SLURM_NNODES}"),
])
def test_counts_that_are_fine_or_not_known_here(name, value):
    assert counts.check(name, value) is None


@pytest.mark.parametrize("name, value, suggested", [
    ("nnodes", "4:2", "2:4"), ("nnodes", "0", None), ("nnodes", "-2", None), ("nproc-per-node", "0", "1"),
    ("nproc-per-node", "-1", "1"), ("nproc-per-node", "x1", None),
])
def test_torchrun_counts_it_refuses(name, value, suggested):
    problem = counts.check_torchrun(name, value)
    assert problem is not None and problem["suggested"] == suggested


@pytest.mark.parametrize("name, value", [("nnodes", "1:4"), ("nnodes", "$SLURM_NNODES"), ("nproc-per-node", "gpu"),
                                         ("nproc-per-node", "8")])
def test_torchrun_counts_that_are_fine(name, value):
    assert counts.check_torchrun(name, value) is None


@pytest.mark.parametrize("text, value", [
    ("4", 4), ("4-8", 4), ("2k", 2048), ("a100:4", 4), ("9" * 40, None), ("-3", None), ("4-2", None), (None, None),
])
def test_whole_numbers_are_bounded(text, value):
    assert topology.whole(text) == value


def test_an_impossible_count_never_reaches_the_arithmetic():
    alloc = first("#!/bin/bash\n#SBATCH --nodes=%s\n#SBATCH --ntasks-per-node=-1\n#SBATCH -c 99999999999\n"
                  "srun python t.py\n" % ("9" * 20))["tasks"], shapes(
        "#!/bin/bash\n#SBATCH --nodes=%s\n#SBATCH -c 0\nsrun python t.py\n" % ("9" * 20))["allocation"]
    assert alloc[1]["nodes"] is None and alloc[1]["cpus_per_task_set"] is False


# --- srun's tasks and CPUs ----------------------------------------------------------------------------------

@pytest.mark.parametrize("head, line, tasks_per_node, cpus", [
    # measured on 22.05.8 (tests/test_launch_cluster.py: the CPU_STEPS job)
    ("-N2 --ntasks-per-node=2 -c1", "srun --ntasks-per-node=1 x", 2, 1),
    ("-N2 --ntasks-per-node=2 -c1", "srun --ntasks=2 --ntasks-per-node=1 x", 1, 2),
    ("-N2 --ntasks-per-node=1 -c8", "srun x", 1, 8),
    ("-N2 --ntasks-per-node=4", "srun x", 4, 1),
    ("-N1 -n2 -c2", "srun -c3 x", 2, 3),
])
def test_srun_tasks_and_cpus_on_22_05(head, line, tasks_per_node, cpus):
    step = first(line, overrides=head.split())
    assert (step["tasks_per_node"], step["cpus_per_task"]) == (tasks_per_node, cpus)


def test_ignored_tasks_per_node_is_a_structured_fact():
    step = first("srun --ntasks-per-node=1 x", overrides=["-N2", "--ntasks-per-node=2"])
    assert step["ntasks_per_node_ignored"] == {"ntasks_per_node": 1, "job_tasks": 4, "nodes": 2}


def test_cpus_per_task_by_version_range_when_the_version_is_unknown():
    step = first("srun --ntasks=2 --ntasks-per-node=1 x", overrides=["-N2", "--ntasks-per-node=2", "-c1"], version=None)
    assert step["by_version"]["22.05 to 23.02"]["cpus_per_task"] == 2
    assert step["by_version"]["23.11 and later"]["cpus_per_task"] == 1 and step["cpus_per_task"] is None


def test_too_many_cpus_per_task_fail_the_step():
    step = first("srun -c4 x", overrides=["-N1", "-n2", "-c1"])
    assert step["step_fails"] and "More processors requested than permitted" in step["notes"][0]


# --- srun --external-launcher (23.11+): one task per node holding the job's CPUs there; older srun refuses it ---

EXTERNAL = "srun --external-launcher %storchrun --nnodes=2 --nproc-per-node=4 t.py"


@pytest.mark.parametrize("srun_options, head, tasks, cpus", [
    ("", "-N2 --ntasks-per-node=4", 2, 4),             # 4 one-CPU tasks per node: the one task holds all 4
    ("", "-N2 --ntasks-per-node=2 -c4", 2, 8),
    ("--ntasks-per-node=4 -c1 ", "-N2 --ntasks-per-node=4", 2, 4),  # ignored, as srun.1 of 23.11 says
    ("-N1 ", "-N2 --ntasks-per-node=4", 1, 4),            # srun's own --nodes picks the nodes
])
def test_external_launcher_on_23_11_is_one_agent_per_node_with_the_nodes_cpus(srun_options, head, tasks, cpus):
    line = (EXTERNAL % srun_options).replace("--nnodes=2", "--nnodes=%d" % tasks)
    step = first(line, overrides=head.split(), version=(23, 11, 4))
    assert (step["tasks"], step["tasks_per_node"], step["cpus_per_task"], step["agents_per_node"]) == (tasks, 1, cpus, 1)
    assert (step["world_size"], step["ranks_per_node"], step["cpus_per_rank"]) == (4 * tasks, 4, cpus / 4)
    assert step["srun_refuses"] is None and bool(step["notes"]) == bool(srun_options.strip().startswith("--ntasks"))


@pytest.mark.parametrize("version", [(22, 5, 8), (23, 2, 7), (21, 8, 1)])
def test_external_launcher_before_23_11_starts_nothing(version):
    step = first(EXTERNAL % "", overrides=["-N2", "--ntasks-per-node=4"], version=version)
    assert step["srun_refuses"] == {"option": "--external-launcher", "since": "23.11"}
    assert (step["tasks"], step["agents"], step["world_size"], step["ranks_per_node"]) == (None, None, None, None)


def test_external_launcher_with_the_version_unknown_shows_each_range():
    step = first(EXTERNAL % "", overrides=["-N2", "--ntasks-per-node=4"], version=None)
    assert (step["agents_per_node"], step["tasks_per_node"], step["cpus_per_task"]) == (1, 1, None)  # 23.11's shape
    by_version = step["by_version"]
    assert by_version["23.11 and later"]["cpus_per_task"] == 4 and by_version["23.11 and later"]["srun_refuses"] is None
    for label in ("before 22.05", "22.05 to 23.02"):
        assert by_version[label]["srun_refuses"]["since"] == "23.11" and "exit 255" in by_version[label]["cpus_source"]


# --- torchrun -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("line, head, expected", [
    ("srun torchrun --nnodes=2 --nproc_per_node=4 t.py", "-N2 --ntasks-per-node=4",
     {"agents": 8, "agents_per_node": 4, "agents_joined": 2, "world_size": 8, "ranks_per_node": [4, 8]}),
    ("srun torchrun --nnodes=2 --nproc-per-node=4 t.py", "-N2 --ntasks-per-node=1 -c16",
     {"agents": 2, "world_size": 8, "ranks_per_node": 4, "cpus_per_rank": 4.0}),
    ("srun python -u -m torch.distributed.run --nnodes 2 --nproc_per_node 4 t.py", "-N2 --ntasks-per-node=1 -c16",
     {"launcher_kind": "torchrun", "agents": 2, "world_size": 8, "cpus_per_rank": 4.0}),
    ("srun torchrun --nnodes=1:4 --nproc-per-node=gpu t.py", "-N2 --ntasks-per-node=1 --gpus-per-node=4",
     {"nnodes_min": 1, "nnodes_max": 4, "nproc_per_node": 4, "world_size": 8, "gpus_per_rank": 1}),
    ("mpirun -np 8 --map-by ppr:4:node python t.py", "-N2 --ntasks-per-node=4",
     {"launcher_kind": "mpirun", "nodes": 2, "world_size": 8, "ranks_per_node": 4, "cpus_per_rank": 1.0}),
    ("srun bash -c 'torchrun --nnodes=2 --nproc-per-node=2 t.py'", "-N2 --ntasks-per-node=1 -c4",
     {"launcher_kind": "torchrun", "world_size": 4, "cpus_per_rank": 2.0}),
])
def test_launch_shapes(line, head, expected):
    step = first(line, overrides=head.split())
    assert dict((key, step[key]) for key in expected) == expected


def test_the_references_per_node_torchrun_lines_compute():
    """The torchrun lines the references run on every node (not SLURM jobs: no cluster needed)."""
    text = DOCS.read_text()
    lines = [re.sub(r"\s*\\\n\s*", " ", block).strip() for block in re.findall(r"```bash\n(torchrun .*?)```", text, re.S)]
    assert lines
    for line in lines:
        nnodes = int(re.search(r"--nnodes[ =](\d+)", line).group(1))
        nproc = int(re.search(r"--nproc-per-node[ =](\d+)", line).group(1))
        step = first(line)
        assert (step["agents"], step["nnodes_max"], step["nproc_per_node"]) == (1, nnodes, nproc)


@pytest.mark.parametrize("line, endpoint_host, resolved", [
    ("srun torchrun --nnodes=2 --rdzv-backend=c10d --rdzv-endpoint=$(hostname):29400 t.py", "@first-node-of-the-job@",
     "@first-node-of-the-job@"),
    ("srun torchrun --nnodes=2 --rdzv-backend=c10d --rdzv-endpoint=localhost:29400 t.py", "localhost", "localhost"),
    ("srun torchrun --nnodes=2 --rdzv-backend=c10d t.py", "localhost", "localhost"),
    ("srun torchrun --nnodes=2 --master-addr=$MASTER_ADDR t.py", "$MASTER_ADDR", None),
])
def test_the_rendezvous_host(line, endpoint_host, resolved):
    rdzv = first(line, overrides=["-N2"])["rendezvous"]
    assert (rdzv["host"], rdzv["host_resolved"]) == (endpoint_host, resolved)


# --- threads -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("exports, line, value, default", [
    ("export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK", "srun python t.py", 8, None),   # seen on a real 22.05 job
    ("export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}", "srun python t.py", 8, None),
    ("export OMP_NUM_THREADS=4", "srun torchrun --nproc-per-node=2 t.py", 4, None),
    ("", "srun torchrun --nproc-per-node=2 t.py", 1, "torchrun"),
    ("", "srun python t.py", None, "program"),
    ("OMP_NUM_THREADS=3", "srun python t.py", None, "program"),  # a shell variable, not exported
    ("export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK", "srun --export=NONE python t.py", None, "program"),
    ("export OMP_NUM_THREADS=2", "srun --export=OMP_NUM_THREADS,PATH python t.py", 2, None),
    ("export OMP_NUM_THREADS=2", "srun --export=ALL,OMP_NUM_THREADS=9 python t.py", 2, None),  # ALL wins (measured)
    ("export OMP_NUM_THREADS=2\nexport SRUN_EXPORT_ENV=NONE", "srun python t.py", None, "program"),
])
def test_threads_per_rank_follow_what_reaches_the_ranks(exports, line, value, default):
    step = first("#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=1 -c8\n%s\n%s\n" % (exports, line))
    assert (step["threads_per_rank"]["value"], step["threads_per_rank"]["default"]) == (value, default)


@pytest.mark.parametrize("line, mode, found, dropped", [
    ("srun --export=NONE torchrun t.py", "none", False, ["MASTER_ADDR", "OMP_NUM_THREADS"]),
    ("srun --export=NIL /opt/venv/bin/torchrun t.py", "none", True, ["MASTER_ADDR", "OMP_NUM_THREADS"]),
    ("srun --export=OMP_NUM_THREADS torchrun t.py", "list", False, ["MASTER_ADDR"]),
    ("srun --export=PATH,MASTER_ADDR,OMP_NUM_THREADS torchrun t.py", "list", True, []),
    ("srun --export=ALL torchrun t.py", "all", True, []),
    ("srun torchrun t.py", "all", True, []),
    ("srun --export=NONE,OMP_NUM_THREADS bash -c 'x'", "none", False, ["MASTER_ADDR", "OMP_NUM_THREADS"]),
])
def test_what_srun_export_lets_through(line, mode, found, dropped):
    step = first("#!/bin/bash\n#SBATCH -N2\nexport OMP_NUM_THREADS=2 MASTER_ADDR=n1\n%s\n" % line)
    export = step["export"]
    assert (export["mode"], export["program_found"], export["dropped"]) == (mode, found, dropped)


def test_env_rendezvous_follows_the_export():
    text = "#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=1\nexport MASTER_ADDR=n1 MASTER_PORT=29500\n%s python t.py\n"
    assert first(text % "srun")["rendezvous"]["host"] == "n1"
    assert first(text % "srun --export=NONE")["rendezvous"] is None


# --- heterogeneous jobs -----------------------------------------------------------------------------------

HET = "#!/bin/bash\n#SBATCH -N1 -n1 -c2\n#SBATCH hetjob\n#SBATCH -N1 -n2 -c1\n%s\n"


@pytest.mark.parametrize("line, expected", [
    # measured on 22.05.8 (tests/test_launch_cluster.py: the heterogeneous job)
    ("srun python t.py", [(0, 1, 2, 1)]),
    ("srun --het-group=1 python t.py", [(1, 2, 1, 2)]),
    ("srun --het-group=0,1 python t.py", [(0, 1, 2, 3), (1, 2, 1, 3)]),
    ("srun -n1 python a.py : -n2 python b.py", [(0, 1, 2, 3), (1, 2, 1, 3)]),
])
def test_each_component_of_a_heterogeneous_job(line, expected):
    topo = shapes(HET % line)
    assert [(s["het_group"], s["tasks"], s["cpus_per_task"], s["world_size"]) for s in topo["steps"]] == expected
    assert [c["ntasks"] for c in topo["components"]] == [1, 2]


def test_a_plain_srun_in_a_heterogeneous_job_says_it_runs_in_component_0():
    [step] = shapes(HET % "srun python t.py")["steps"]
    assert any("component 0 only" in note for note in step["notes"])


def test_the_batch_shell_of_a_heterogeneous_job_has_no_plain_cpus_per_task():
    text = HET % "export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK_HET_GROUP_1\nsrun --het-group=1 python t.py"
    assert shapes(text)["steps"][0]["threads_per_rank"]["value"] == 1
    text = HET % "export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK\nsrun python t.py"
    assert shapes(text)["steps"][0]["threads_per_rank"]["value"] is None  # unset there (measured)
