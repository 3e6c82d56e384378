"""The launch doctor's rules on parsed jobs, in this process: which finding each launch mistake earns, on
which line, with which evidence; rules decide on the structured facts (never on their own prose); the
markdown table of the topology."""

import copy

import pytest

from launch_doctor import cli, render, topology
from launch_doctor.findings import GATE, TOOL
from launch_doctor.rules import RULES, rule_counts
from launch_doctor import logs as log_scan
from support import docs_text

V22 = (22, 5, 8)


def facts_of(text, overrides=(), version=V22, logs=()):
    source = "script" if text.startswith(("#!", "\ufeff", "#SBATCH")) else "command"
    facts = cli.analyse(text, list(overrides), source, version, logs)
    facts["inputs"] = {"script": {"path": "job.sbatch"}, "logs": []}
    return facts


def found(text, overrides=(), version=V22, logs=()):
    facts = facts_of(text, overrides, version, logs)
    return [item for rule in RULES for item in rule(facts, None)]


def ids(text, overrides=(), version=V22):
    return sorted(set(item["id"] for item in found(text, overrides, version)))


def one(text, finding_id, overrides=(), version=V22):
    [item] = [f for f in found(text, overrides, version) if f["id"] == finding_id]
    return item


# --- the mistakes and their findings --------------------------------------------------------------------

DOUBLE_LAUNCH = ("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=4\n"
                 "export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n"
                 "srun torchrun --nnodes=2 --nproc_per_node=4 --rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:29400 \\\n"
                 "    --rdzv-id=$SLURM_JOB_ID train.py\n")
CASES = {
    # name: (script or launch line, sbatch options, the finding ids expected)
    "double launch": (DOUBLE_LAUNCH, "", ["doctor-nested-launcher"]),
    "loopback endpoint": ("srun torchrun --nnodes=2 --nproc-per-node=4 --rdzv-backend=c10d "
                          "--rdzv-endpoint=localhost:29400 train.py", "--nodes=2 --ntasks-per-node=1 --cpus-per-task=8",
                          ["doctor-omp-one-thread", "doctor-rendezvous-not-unique", "doctor-rendezvous-unreachable"]),
    "standalone on two nodes": ("srun torchrun --standalone --nnodes=2 --nproc-per-node=1 t.py",
                                "--nodes=2 --ntasks-per-node=1", ["doctor-rendezvous-unreachable"]),
    "more ranks than GPUs": ("srun torchrun --nnodes=2 --nproc-per-node=4 --rdzv-backend=c10d "
                             "--rdzv-endpoint=$MASTER_ADDR:29400 --rdzv-id=$SLURM_JOB_ID train.py",
                             "--nodes=2 --ntasks-per-node=1 --gpus-per-node=2 --cpus-per-task=8",
                             ["doctor-gpu-count-mismatch", "doctor-omp-one-thread"]),
    "fewer agents than nnodes": ("srun torchrun --nnodes=3 --rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:29400 "
                                 "--rdzv-id=$SLURM_JOB_ID t.py", "--nodes=2 --ntasks-per-node=1",
                                 ["doctor-count-mismatch"]),
    "srun over the job's nodes": ("srun -N4 python t.py", "--nodes=2", ["doctor-count-mismatch"]),
    "WORLD_SIZE written": ("WORLD_SIZE=8 srun python t.py", "--nodes=2 --ntasks-per-node=2", ["doctor-count-mismatch"]),
    "srun -c over the job": ("srun -c4 python t.py", "--nodes=1 --ntasks=2 --cpus-per-task=1",
                             ["doctor-count-mismatch"]),
    "tasks per node ignored": ("srun --ntasks-per-node=1 python t.py", "--nodes=2 --ntasks-per-node=2",
                               ["doctor-count-mismatch"]),
    "cpus not given on 22.05": ("#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=2 -c1\n"
                                "export SRUN_CPUS_PER_TASK=$SLURM_CPUS_PER_TASK\n"
                                "srun --ntasks=2 --ntasks-per-node=1 python t.py\n", "", ["doctor-cpus-not-given"]),
    "no launch line": ("#!/bin/bash\n#SBATCH --nodes=1\necho hello\n", "", ["doctor-no-launch-line"]),
    "a sound launch": ("#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=1 -c8\nexport OMP_NUM_THREADS=4\n"
                       "srun torchrun --nnodes=$SLURM_NNODES --nproc-per-node=2 --rdzv-backend=c10d "
                       "--rdzv-endpoint=$(hostname):29400 --rdzv-id=$SLURM_JOB_ID t.py\n", "", []),
    "threads from SLURM_CPUS_PER_TASK": ("#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=1 -c8\n"
                                         "export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK\n"
                                         "srun torchrun --nnodes=2 --nproc-per-node=1 --rdzv-backend=c10d "
                                         "--rdzv-endpoint=$MASTER_ADDR:29400 --rdzv-id=$SLURM_JOB_ID t.py\n", "", []),
    "environment setup": ("#!/bin/bash\n#SBATCH -N1\nsource ~/venv/bin/activate\nmodule purge\nmodule load cuda\n"
                          "conda activate x\nml gcc\nspack load py-torch\n. /etc/profile\nsrun python t.py\n", "", []),
    "CRLF": ("#!/bin/bash\r\n#SBATCH -N1\r\nsrun python t.py\r\n", "", ["doctor-script-dos-line-breaks"]),
    "BOM at the start": ("\ufeff#!/bin/bash\n#SBATCH -N1\nsrun python t.py\n", "", ["doctor-script-byte-order-mark"]),
    "BOM before a directive": ("#!/bin/bash\n\ufeff#SBATCH -N2\nsrun python t.py\n", "",
                               ["doctor-script-byte-order-mark"]),
    "no #! line": ("#SBATCH -N1\nsrun python t.py\n", "", ["doctor-script-no-interpreter-line"]),
    "export NONE": ("#!/bin/bash\n#SBATCH -N1\nexport OMP_NUM_THREADS=2\nsrun --export=NONE python t.py\n", "",
                    ["doctor-export-drops-variables", "doctor-export-program-not-found"]),
    "export a list with PATH": ("#!/bin/bash\n#SBATCH -N1\nexport OMP_NUM_THREADS=2\n"
                                "srun --export=PATH,OMP_NUM_THREADS python t.py\n", "", []),
    "export a list without what the script set": ("#!/bin/bash\n#SBATCH -N1\nexport OMP_NUM_THREADS=2 FOO=1\n"
                                                  "srun --export=PATH,FOO python t.py\n", "",
                                                  ["doctor-export-drops-variables"]),
    "export NONE with a full path": ("#!/bin/bash\n#SBATCH -N1\nsrun --export=NONE /usr/bin/python3 t.py\n", "", []),
    "SRUN_EXPORT_ENV": ("#!/bin/bash\n#SBATCH -N1\nexport SRUN_EXPORT_ENV=NONE\nsrun python t.py\n", "",
                        ["doctor-export-program-not-found"]),
    "a here-document hides nothing": ("#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=4\nMASK=$(( 1 << 2 ))\n"
                                      "# cat <<EOF\nsrun torchrun --nnodes=2 --nproc-per-node=4 --rdzv-backend=c10d "
                                      "--rdzv-endpoint=$MASTER_ADDR:29400 --rdzv-id=$SLURM_JOB_ID t.py\n", "",
                                      ["doctor-nested-launcher"]),
    "an unterminated here-document": ("#!/bin/bash\n#SBATCH -N1\ncat <<EOF\nsrun python t.py\n", "",
                                      ["doctor-line-not-understood", "doctor-no-launch-line"]),
}


EXTERNAL_LAUNCHER = ("#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=4\nsrun --external-launcher torchrun --nnodes=2 "
                     "--nproc-per-node=4 --rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:29400 --rdzv-id=$SLURM_JOB_ID "
                     "t.py\n")


@pytest.mark.finding("doctor-srun-option-unsupported")
@pytest.mark.parametrize("version, expected, severity", [
    ((23, 11, 4), [], None),                       # one agent per node: no nested launcher
    ((24, 5, 1), [], None),
    ((22, 5, 8), ["doctor-srun-option-unsupported"], "error"),
    ((23, 2, 7), ["doctor-srun-option-unsupported"], "error"),
    (None, ["doctor-srun-option-unsupported"], "warning"),  # refused before 23.11, runs after: say both
])
def test_external_launcher_by_slurm_version(version, expected, severity):
    found_here = found(EXTERNAL_LAUNCHER, version=version)
    assert sorted(f["id"] for f in found_here) == expected
    for item in found_here:
        evidence = item["evidence"]
        assert item["severity"] == severity and evidence["line"] == 3 and evidence["exit_code"] == 255
        assert evidence["srun_says"].startswith("srun: unrecognized option '--external-launcher'")
        assert evidence["refused_by"] == (["before 22.05", "22.05 to 23.02"] if version is None else
                                          ["%d.%02d.%d" % version])
        assert item["fix"].startswith('srun "--ntasks=$SLURM_NNODES" --ntasks-per-node=1 --cpus-per-task=4 torchrun ')


def test_external_launcher_fix_keeps_sruns_own_node_count():
    text = EXTERNAL_LAUNCHER.replace("--external-launcher", "-N1 --external-launcher")
    assert one(text, "doctor-srun-option-unsupported")["fix"].startswith(
        "srun -N1 --ntasks=1 --ntasks-per-node=1 --cpus-per-task=4 torchrun ")


def test_external_launcher_version_from_the_log_decides():
    log = scanned("slurm 23.11.4\n")
    facts = cli.analyse(EXTERNAL_LAUNCHER, [], "script", topology.parse_version(log["slurm_version"]), [log])
    facts["inputs"] = {"script": {"path": "job.sbatch"}, "logs": []}
    assert [f["id"] for rule in RULES for f in rule(facts, None)] == []


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_mistake_earns_its_finding(name):
    text, overrides, expected = CASES[name]
    assert ids(text, overrides.split()) == sorted(expected)


INVALID = {
    # directive or option -> the line it stands on; its own finding there, and nothing blamed on torchrun
    "#SBATCH --ntasks-per-node=-1": 2, "#SBATCH --cpus-per-task=0": 2, "#SBATCH --nodes=4-2": 2,
    "#SBATCH --nodes=12345678901234567890": 2, "#SBATCH -c 99999999999": 2, "#SBATCH --ntasks=0": 2,
    "#SBATCH --nodes=0": 2, "#SBATCH --gpus-per-node=-1": 2,
    "srun --ntasks-per-node=-1 torchrun --nnodes=2 t.py": 3, "srun -c0 torchrun --nnodes=2 t.py": 3,
    "srun torchrun --nnodes=4:2 t.py": 3, "srun torchrun --nnodes=2 --nproc-per-node=0 t.py": 3,
}
RDZV = " --rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:29400 --rdzv-id=$SLURM_JOB_ID"


@pytest.mark.parametrize("line", sorted(INVALID))
def test_an_impossible_count_is_its_own_finding_on_its_line(line):
    directive = line.startswith("#SBATCH")
    text = "#!/bin/bash\n%s\n%s\n" % (line if directive else "#SBATCH -N2 --ntasks-per-node=1",
                                      "srun torchrun --nnodes=1 --nproc-per-node=1 t.py" if directive else
                                      line.replace(" t.py", RDZV + " t.py"))
    found_here = found(text)
    invalid = [f for f in found_here if f["id"] == "doctor-directive-invalid"]
    assert [f["evidence"]["line"] for f in invalid] == [INVALID[line]] and invalid[0]["severity"] == "error"
    assert not [f for f in found_here if f["id"] == "doctor-count-mismatch"], [f["evidence"] for f in found_here]


def test_an_impossible_count_on_the_sbatch_command_line():
    [item] = [f for f in found("srun python t.py", ["--nodes=4-2"]) if f["id"] == "doctor-directive-invalid"]
    assert item["evidence"]["line"] is None and item["evidence"]["where"] == "sbatch"


def test_a_heterogeneous_step_is_judged_on_its_own_component():
    text = ("#!/bin/bash\n#SBATCH -N1 -n1 -c2\n#SBATCH hetjob\n#SBATCH -N2 --ntasks-per-node=1 -c4\n"
            "srun --het-group=1 torchrun --nnodes=2 --nproc-per-node=2 --rdzv-backend=c10d "
            "--rdzv-endpoint=$MASTER_ADDR:29400 --rdzv-id=$SLURM_JOB_ID t.py\n")
    assert ids(text) == ["doctor-omp-one-thread"]  # component 1: 2 agents for 2 nodes, 4 CPUs for 2 ranks
    assert one(text, "doctor-omp-one-thread")["evidence"]["cpus_per_rank"] == 2.0
    plain = text.replace("srun --het-group=1", "srun")  # component 0: one task for a 2-agent rendezvous
    assert "doctor-count-mismatch" in ids(plain)


def test_an_export_that_drops_the_threads_names_them_and_keeps_the_setup_lines():
    text = ("#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=1 -c8\nsource ~/venv/bin/activate\n"
            "export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK\nsrun --export=NONE torchrun --nnodes=2 t.py\n")
    item = one(text, "doctor-export-drops-variables")
    assert item["evidence"]["dropped"] == ["OMP_NUM_THREADS"] and item["evidence"]["environment_setup_lines"] == [3]
    assert "--export=ALL" in item["fix"] and "OMP_NUM_THREADS" in item["fix"]
    assert "--export=PATH" in one(text, "doctor-export-program-not-found")["fix"]


# --- decisions on structured facts ---------------------------------------------------------------------

def test_counts_decide_on_the_structured_field_not_the_note():
    facts = facts_of("srun --ntasks-per-node=1 python t.py", ["-N2", "--ntasks-per-node=2"])
    quiet = copy.deepcopy(facts)
    for shape in quiet["topology"]["steps"]:
        shape["notes"] = []
    [item] = rule_counts(quiet, None)
    assert '--ntasks=2' in item["fix"]
    fake = copy.deepcopy(facts)
    for shape in fake["topology"]["steps"]:
        shape["ntasks_per_node_ignored"] = None
        shape["notes"] = ["srun ignores --ntasks-per-node=7"]
    assert rule_counts(fake, None) == []


def test_one_thread_decides_on_the_default_not_its_wording():
    facts = facts_of("srun torchrun --nnodes=1 --nproc-per-node=2 t.py", ["-N1", "-c8"])
    [shape] = facts["topology"]["steps"]
    shape["threads_per_rank"]["source"] = "reworded"
    assert [f["id"] for rule in RULES for f in rule(facts, None)] == ["doctor-omp-one-thread"]
    shape["threads_per_rank"]["default"] = None
    assert [f["id"] for rule in RULES for f in rule(facts, None)] == []


def test_rules_leave_the_facts_as_they_were():
    facts = facts_of(CASES["loopback endpoint"][0], CASES["loopback endpoint"][1].split())
    before = copy.deepcopy(facts)
    for rule in RULES:
        rule(facts, None)
    assert facts == before


# --- logs ----------------------------------------------------------------------------------------------

def scanned(text):
    return log_scan.scan("job.out", {"head": text, "tail": ""}, float("inf"))


@pytest.mark.parametrize("line, finding_id", [
    ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:144] connectFullMesh failed remote=[127.0.1.1]:52011",
     "doctor-log-loopback"),
    ("Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000", "doctor-log-duplicate-device"),
    # NCCL 2.30's wording (the string in torch 2.14.1+cu130's libnccl.so.2 2.30.7, which no longer holds the old one)
    ("ncclInvalidUsage: Multiple Ranks are using the same GPU/Partition. Set NCCL_MULTI_RANK_GPU_ENABLE=1 to enable "
     "this configuration.", "doctor-log-duplicate-device"),
    ("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError", "doctor-log-timeout"),
    ("AttributeError: 'NoneType' object has no attribute 'is_failed'", "doctor-log-store-lost"),
    ("errno: 98 - Address already in use", "doctor-log-address-in-use"),
    ("slurmstepd: error: *** JOB 12 ON n1 CANCELLED AT 2024-01-01T00:00:00 DUE TO TIME LIMIT ***", "doctor-log-timeout"),
])
def test_log_signatures(line, finding_id):
    log = scanned("starting\n" + line + "\n")
    facts = facts_of("#!/bin/bash\n#SBATCH -N1\nsrun python t.py\n", logs=[log])
    [item] = [f for rule in RULES for f in rule(facts, None) if f["id"] == finding_id]
    assert item["evidence"]["line"] == 2


# --- markdown ------------------------------------------------------------------------------------------

def markdown(text, overrides=()):
    facts = facts_of(text, list(overrides))
    findings = [item for rule in RULES for item in rule(facts, None)]
    gates = {GATE: {"passed": not any(f["severity"] == "error" for f in findings)}}
    document, _ = TOOL.document(findings, gates, {"name": "check_launch.py"})
    render.render(document, facts, None)
    return render.to_markdown(document)


def test_the_topology_table_in_markdown():
    report = markdown(DOUBLE_LAUNCH)
    assert "| 5 | srun &gt; torchrun | 2 | 4 | 1 | 8 (2) | 4-8 | 8 | 0.25 | 1 |" in report


def test_srun_that_only_prints_starts_no_step_and_no_gpu_asked_is_zero():
    report = markdown("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=2\nsrun --version\nsrun -V\n"
                      "srun --help\nsrun --usage\nsrun python train.py\n")
    assert "0 GPU(s) per node" in report and "\n| 4 | srun" not in report and "\n| 8 | srun" in report


def test_threads_resolved_from_slurm_cpus_per_task_show_in_the_table():
    report = markdown(CASES["threads from SLURM_CPUS_PER_TASK"][0])
    assert "| 8 | - | " in report  # threads/rank 8, no GPU


def test_a_heterogeneous_job_lists_each_component():
    report = markdown("#!/bin/bash\n#SBATCH -N1 -n1\n#SBATCH hetjob\n#SBATCH -N1 -n2\nsrun --het-group=0,1 python t.py\n")
    assert "Component 1:" in report and report.count("\n| 5 | srun") == 2


def test_a_fix_of_several_lines_is_a_fenced_block_no_backtick_run_can_close():
    lines = render.fix_lines("export X=1  # before line 3\nsrun python t.py '````' '\x1b[2J'  # line 3, corrected")
    fence = lines[2][:-len("bash")]
    assert lines[:2] == ["- fix:", ""] and fence == "`````" and lines[-2] == fence
    assert lines[3] == "export X=1  # before line 3" and "\x1b" not in lines[4]
    assert render.fix_lines("export X=1") == ["- fix: `export X=1`"]


def test_the_nested_launcher_names_both_ways_the_extra_agents_die():
    """Both messages tests/test_launch_cluster.py sees from the extra agents: in the finding's why, in its
    section (what --explain prints), and each read from a log as doctor-log-store-lost."""
    why = one(DOUBLE_LAUNCH, "doctor-nested-launcher")["evidence"]["why"]
    section = " ".join(docs_text.section_text(docs_text.TROUBLESHOOTING, "### doctor-nested-launcher", 3).split())
    for signature in ("RendezvousConnectionError", "AttributeError: 'NoneType' object has no attribute 'is_failed'"):
        assert signature in why and signature in section, (signature, why, section)
        assert "doctor-log-store-lost" in scanned(signature + "\n")["signatures"]
