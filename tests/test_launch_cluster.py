"""The launch doctor against a real two-node SLURM (22.05.8 here): the references' launch examples
train the recipe, the broken launches fail the way they fail for users, and the doctor's topology,
computed from the script alone, matches what the cluster started (tasks per node, CPUs per task as
Cpus_allowed_list shows them inside each task, ranks, threads, each heterogeneous component, what srun
--export passes); what sbatch refuses (encodings, impossible counts) it refuses with the words the
doctor quotes. One cluster per test session."""

import json
import os
import re
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import ROOT, clean_env, invoke_tool
from support import slurm_cluster
from support.docs_text import TROUBLESHOOTING, section_text

DOCS = ROOT / "references" / "distributed-workflows.md"
RECIPE_FILE = ROOT / "scripts" / "ddp_neighbor_training.py"
TINY = "--epochs 1 --num-nodes 200 --num-neighbors 5,5 --batch-size 64"
PROBE = "bash -c 'echo PROBE $SLURMD_NODENAME $SLURM_PROCID $(grep Cpus_allowed_list /proc/self/status | cut -f2)'"


@pytest.fixture(scope="session")
def cluster():
    why = slurm_cluster.missing()
    if why:
        message = "no SLURM cluster here (%s); enable: %s" % (why, slurm_cluster.ENABLE)
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    root = Path(tempfile.mkdtemp(prefix="slurm-", dir="/tmp"))
    started = slurm_cluster.Cluster(root)
    venv_bin = os.path.dirname(sys.executable)
    started.env["PATH"] = venv_bin + os.pathsep + started.env.get("PATH", "")  # python and torchrun of this venv
    for name in ("PYTHONPATH", "VIRTUAL_ENV", "OMP_NUM_THREADS"):
        started.env.pop(name, None)
    try:
        started.start()
        started.version = started.run("srun", "--version").stdout.strip()
        yield started
    finally:
        started.stop()
        assert slurm_cluster.daemons_under(root) == [], "stray daemons after the session"
        shutil.rmtree(str(root), ignore_errors=True)


def doc_examples():
    """name -> job script of every bash block marked `# launch-example: NAME` in the references."""
    text = DOCS.read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    return dict((re.search(r"# launch-example: (\S+)", b).group(1), b) for b in blocks if "# launch-example:" in b)


def doctor(*args):
    result = invoke_tool("check_launch.py", *args, env=clean_env())
    assert result.returncode in (0, 1), result.stderr[-2000:]
    return result


def step_at(document, pattern):
    steps = [s for s in document["topology"]["steps"] if re.search(pattern, s["text"])]
    assert len(steps) == 1, [s["text"] for s in document["topology"]["steps"]]
    return steps[0]


def cpu_count(allowed):
    total = 0
    for part in allowed.split(","):
        low, _, high = part.partition("-")
        total += int(high or low) - int(low) + 1
    return total


def probes(log, tag="PROBE"):
    """[(node, task, CPUs)] of the probe lines a job printed."""
    return [(m.group(1), int(m.group(2)), cpu_count(m.group(3)))
            for m in re.finditer(r"^%s (\S+) (\d+) (\S+)$" % tag, log, re.M)]


def with_probe(script, launch_pattern):
    """The script with, before its launch line, a probe step run by srun with the same options."""
    lines = script.replace("\\\n", " ").splitlines()
    index = next(i for i, line in enumerate(lines) if re.search(launch_pattern, line))
    words = shlex.split(lines[index])
    options = []
    for word in words[1:]:
        if not word.startswith("-"):
            break
        options.append(word)
    probe = " ".join(["srun"] + options + [PROBE])
    return "\n".join(lines[:index] + [probe] + lines[index:]) + "\n"


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def recipe_document(log):
    documents = [json.loads(line) for line in log.splitlines() if line.startswith("{") and '"gates"' in line]
    assert len(documents) == 1, log[-3000:]
    return documents[0]


def per_node(probed):
    counts = {}
    for node, _, _ in probed:
        counts[node] = counts.get(node, 0) + 1
    return counts


def computed_topology(cluster, tmp_path, name):
    """The doctor's topology of a references example, from the script as printed there."""
    original = write(tmp_path, name + ".original.sbatch", doc_examples()[name])
    computed = doctor(original, "--slurm-version", cluster.version)
    assert computed.returncode == 0 and computed.json["ok"], computed.json["findings"]
    return computed.json


def probe_example(cluster, tmp_path, name, launch_pattern):
    """Run the example with a probe step (the launch line's srun options) before its launch line,
    the launch line itself left out: what srun gives each task, no training needed."""
    script = with_probe(doc_examples()[name], launch_pattern)
    lines = script.splitlines()
    probe_at = next(i for i, line in enumerate(lines) if PROBE in line)
    path = write(tmp_path, name + ".probe.sbatch", "\n".join(lines[:probe_at + 1]) + "\n")
    code, log, _ = cluster.submit(path)
    assert code == 0, log[-3000:]
    return probes(log)


def train_example(cluster, tmp_path, name):
    path = write(tmp_path, name + ".sbatch", doc_examples()[name].replace("--epochs 3", TINY))
    code, log, _ = cluster.submit(path, chdir=ROOT)
    assert code == 0, log[-4000:]
    return recipe_document(log)


def test_srun_starts_the_ranks_starts_what_the_doctor_computes(cluster, tmp_path):
    probed = probe_example(cluster, tmp_path, "srun-starts-the-ranks", r"^srun ")
    step = step_at(computed_topology(cluster, tmp_path, "srun-starts-the-ranks"), r"ddp_neighbor_training")
    assert per_node(probed) == {"n1": step["tasks_per_node"], "n2": step["tasks_per_node"]} == {"n1": 1, "n2": 1}
    assert set(cpus for _, _, cpus in probed) == {step["cpus_per_task"]} == {2}
    assert (step["world_size"], step["ranks_per_node"], step["cpus_per_rank"]) == (2, 1, 2)


def test_srun_starts_the_ranks_trains(neighbor_backend, cluster, tmp_path):
    recipe = train_example(cluster, tmp_path, "srun-starts-the-ranks")
    step = step_at(computed_topology(cluster, tmp_path, "srun-starts-the-ranks"), r"ddp_neighbor_training")
    assert recipe["ok"] and recipe["gates"]["trained"]["passed"] and recipe["world_size"] == step["world_size"]
    # the recipe gives each rank (its cores // local ranks) threads: the CPUs the doctor computed per rank
    assert set(r["threads"] for r in recipe["ranks"]) == {step["cpus_per_rank"]}


def normalised(text):
    return " ".join(text.replace("\\", " ").split())


def test_the_recipe_epilog_shows_the_tested_srun_launch():
    example = doc_examples()["srun-starts-the-ranks"]
    launch = example[example.index("srun bash -c"):].strip()
    epilog = RECIPE_FILE.read_text()
    assert normalised(launch) in normalised(epilog)
    assert "#SBATCH --ntasks-per-node" in epilog and "Since Slurm 22.05 srun does not inherit" not in epilog


def test_one_torchrun_per_node_starts_what_the_doctor_computes(cluster, tmp_path):
    probed = probe_example(cluster, tmp_path, "one-torchrun-per-node", r"^srun ")
    step = step_at(computed_topology(cluster, tmp_path, "one-torchrun-per-node"), r"torchrun")
    assert step["agents"] == len(probed) == 2 and step["agents_per_node"] == 1
    assert per_node(probed) == {"n1": 1, "n2": 1}
    assert set(cpus for _, _, cpus in probed) == {step["cpus_per_task"]} == {2}
    assert (step["world_size"], step["ranks_per_node"], step["cpus_per_rank"]) == (2, 1, 2)
    assert step["rendezvous"]["id"] == "$SLURM_JOB_ID" and step["rendezvous"]["port"] == 29400


def test_one_torchrun_per_node_trains(neighbor_backend, cluster, tmp_path):
    recipe = train_example(cluster, tmp_path, "one-torchrun-per-node")
    step = step_at(computed_topology(cluster, tmp_path, "one-torchrun-per-node"), r"torchrun")
    assert recipe["ok"] and recipe["gates"]["trained"]["passed"] and recipe["world_size"] == step["world_size"]
    assert set(r["threads"] for r in recipe["ranks"]) == {step["cpus_per_rank"]}


DOUBLE_LAUNCH = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
srun --version
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
srun torchrun --nnodes=2 --nproc_per_node=2 --rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:29411 \\
    --rdzv-id=$SLURM_JOB_ID --no-python bash -c 'python3 {checker} --static-only > {out}/report-$SLURM_PROCID-$LOCAL_RANK.json; \\
    echo WORKER $RANK $WORLD_SIZE $SLURMD_NODENAME $(grep Cpus_allowed_list /proc/self/status | cut -f2); sleep 2'
"""


@pytest.mark.finding("doctor-nested-launcher", "doctor-log-store-lost", "launch-several-agents-per-node")
def test_a_torchrun_per_task_fails_as_for_users_and_is_named_from_script_and_log(cluster, tmp_path):
    out = tmp_path / "reports"
    out.mkdir()
    script = write(tmp_path, "double.sbatch", DOUBLE_LAUNCH.format(checker=ROOT / "scripts" / "check_sampling_backends.py",
                                                                    out=out))
    code, log, _ = cluster.submit(script)
    # The agents left out fail when the store's host exits: RendezvousConnectionError, or (the race seen on
    # a loaded machine) torch's launcher finding its rendezvous gone: `'NoneType' object has no attribute
    # 'is_failed'`; both are the doctor's doctor-log-store-lost.
    assert code != 0 and re.search(r"RendezvousConnectionError|has no attribute 'is_failed'", log), log[-3000:]
    assert re.search(r"srun: error: n\d: tasks? [\d,-]+: Exited with exit code 1", log)
    workers = re.findall(r"^WORKER (\d+) (\d+) (\S+) (\S+)$", log, re.M)
    assert len(workers) == 4 and set(w[1] for w in workers) == {"4"}  # two agents, a world of 4

    from_script = doctor(script, "--slurm-version", cluster.version)
    assert from_script.returncode == 1
    nested = from_script.only("doctor-nested-launcher")
    assert (nested["evidence"]["srun_tasks"], nested["evidence"]["agents_per_node"],
            nested["evidence"]["agents_joining"], nested["evidence"]["world_size"]) == (4, 2, 2, 4)
    assert "#SBATCH --ntasks-per-node=1" in nested["fix"]
    step = step_at(from_script.json, r"torchrun")
    assert set(cpu_count(w[3]) for w in workers) == {step["cpus_per_task"]} == {1}
    assert step["world_size"] == int(workers[0][1])

    from_log = doctor("--log", tmp_path / "double.log")
    assert from_log.returncode == 1
    assert {"doctor-nested-launcher", "doctor-log-store-lost"} <= set(from_log.ids())
    assert from_log.only("doctor-log-store-lost")["evidence"]["text"]
    assert from_log.json["inputs"]["slurm_version"]["text"] == cluster.version.split()[-1]

    reports = [json.loads(p.read_text()) for p in sorted(out.glob("report-*.json"))]
    assert reports, "no worker wrote a checker report"
    assert all("launch-several-agents-per-node" in [f["id"] for f in r["findings"]] for r in reports)


EXTERNAL_LAUNCHER = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
srun --external-launcher bash probe.sh
"""


@pytest.mark.finding("doctor-srun-option-unsupported")
def test_srun_before_23_11_refuses_external_launcher_and_the_fix_starts_a_task_per_node(cluster, tmp_path):
    write(tmp_path, "probe.sh", PROBE.split("'")[1] + "\n")  # the probe, from a file: the line stays rebuildable
    script = write(tmp_path, "external.sbatch", EXTERNAL_LAUNCHER)
    code, log, _ = cluster.submit(script)
    refused = doctor(script, "--slurm-version", cluster.version).only("doctor-srun-option-unsupported")
    said = refused["evidence"]["srun_says"].split(" / ")
    assert code == refused["evidence"]["exit_code"] == 255 and set(said) <= set(log.splitlines()), (log, said)
    assert probes(log) == []  # srun started nothing
    fixed = write(tmp_path, "fixed.sbatch", EXTERNAL_LAUNCHER.replace("srun --external-launcher bash probe.sh",
                                                                      refused["fix"]))
    code, log, _ = cluster.submit(fixed)
    step = step_at(doctor(fixed, "--slurm-version", cluster.version).json, r"probe\.sh")
    assert code == 0 and per_node(probes(log)) == {"n1": 1, "n2": 1} and step["tasks_per_node"] == 1, (log, step)
    assert set(cpus for _, _, cpus in probes(log)) == {step["cpus_per_task"]} == {2}  # every CPU of the node


CPU_STEPS = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
#SBATCH --cpus-per-task=1
srun --ntasks-per-node=1 {probe_a}
srun --ntasks=2 --ntasks-per-node=1 {probe_b}
export SRUN_CPUS_PER_TASK=$SLURM_CPUS_PER_TASK
srun --ntasks=2 --ntasks-per-node=1 {probe_c}
"""


@pytest.mark.finding("doctor-cpus-not-given", "doctor-count-mismatch")
def test_cpus_per_task_and_ignored_task_counts_match_what_srun_gave(cluster, tmp_path):
    text = CPU_STEPS.format(**dict(("probe_" + t, PROBE.replace("PROBE", "PROBE" + t.upper())) for t in "abc"))
    script = write(tmp_path, "cpus.sbatch", text)
    code, log, _ = cluster.submit(script)
    assert code == 0, log
    measured = dict((tag, probes(log, "PROBE" + tag)) for tag in "ABC")
    assert "can't honor --ntasks-per-node" in log
    computed = doctor(script, "--slurm-version", cluster.version, "--log", tmp_path / "cpus.log")
    for tag, pattern in (("A", r"^srun --ntasks-per-node=1"), ("B", r"PROBEB"), ("C", r"PROBEC")):
        step = step_at(computed.json, pattern)
        assert set(per_node(measured[tag]).values()) == {step["tasks_per_node"]}, (tag, measured[tag])
        assert set(c for _, _, c in measured[tag]) == {step["cpus_per_task"]}, (tag, measured[tag], step)
    assert [s["tasks_per_node"] for s in computed.json["topology"]["steps"]] == [2, 1, 1]
    assert [s["cpus_per_task"] for s in computed.json["topology"]["steps"]] == [1, 2, 1]
    mismatch = computed.findings("doctor-count-mismatch")
    assert any(f["evidence"].get("line") == 5 for f in mismatch) and any("log" in f["evidence"] for f in mismatch)
    starved = computed.only("doctor-cpus-not-given")
    assert starved["evidence"]["line"] == 8 and "--cpus-per-task=2" in starved["fix"]
    # Without the version: per range. 23.11+ reads SLURM_CPUS_PER_TASK again (-c1, cited, not run here).
    unversioned = doctor(script)
    middle = step_at(unversioned.json, r"PROBEB")
    assert middle["by_version"]["22.05 to 23.02"]["cpus_per_task"] == 2
    assert middle["by_version"]["23.11 and later"]["cpus_per_task"] == 1


COUNT_MISMATCH = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
srun torchrun --nnodes=3 --nproc-per-node=1 --rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:29422 \\
    --rdzv-id=$SLURM_JOB_ID --rdzv-conf=join_timeout=3 --no-python true
"""


@pytest.mark.finding("doctor-count-mismatch", "doctor-log-timeout")
def test_more_nodes_asked_than_agents_times_out_and_is_named(cluster, tmp_path):
    script = write(tmp_path, "count.sbatch", COUNT_MISMATCH)
    code, log, _ = cluster.submit(script)
    assert code != 0 and "RendezvousTimeoutError" in log, log[-3000:]
    computed = doctor(script, "--log", tmp_path / "count.log")
    assert computed.returncode == 1
    problem = [f for f in computed.findings("doctor-count-mismatch") if f["evidence"].get("line") == 5]
    assert problem and "--nnodes=$SLURM_NNODES" in problem[0]["fix"]
    assert "RendezvousTimeoutError" in computed.only("doctor-log-timeout")["evidence"]["text"]


PORT_CLASH = """#!/bin/bash
#SBATCH --nodes=1
#SBATCH --ntasks=2
srun -n1 --exact torchrun --nnodes=1 --nproc-per-node=1 --master-addr=127.0.0.1 --master-port=29433 --no-python sleep 6 &
sleep 1
srun -n1 --exact torchrun --nnodes=1 --nproc-per-node=1 --master-addr=127.0.0.1 --master-port=29433 --no-python sleep 6 &
wait
"""


@pytest.mark.finding("doctor-port-clash", "doctor-log-address-in-use")
def test_two_concurrent_steps_on_one_port_clash_and_are_named(cluster, tmp_path):
    script = write(tmp_path, "port.sbatch", PORT_CLASH)
    code, log, _ = cluster.submit(script)
    assert "EADDRINUSE" in log, log[-3000:]
    computed = doctor(script, "--log", tmp_path / "port.log")
    clash = computed.only("doctor-port-clash")
    assert clash["evidence"]["port"] == 29433 and (clash["evidence"]["first"]["line"],
                                                   clash["evidence"]["second"]["line"]) == (4, 6)
    assert "29434" in clash["fix"]
    assert "address already in use" in computed.only("doctor-log-address-in-use")["evidence"]["text"]


def test_the_gathering_line_starts_one_task_per_node_in_a_job_of_several(cluster, tmp_path):
    """The references' srun line that gathers one checker report per node, in a job of 2 tasks per node."""
    text = DOCS.read_text()
    line = next(l for l in text.splitlines() if l.startswith("srun ") and "check_sampling_backends.py > reports" in l)
    header = "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=2\n"
    probe_line = re.sub(r"bash -c '.*'$", PROBE, line)
    assert probe_line != line
    script = write(tmp_path, "gather.sbatch", header + probe_line + "\n")
    code, log, _ = cluster.submit(script)
    assert code == 0, log
    measured = probes(log)
    step = step_at(doctor(write(tmp_path, "gather.original.sbatch", header + line + "\n")).json, r"^srun ")
    assert per_node(measured) == {"n1": 1, "n2": 1} and step["tasks_per_node"] == 1 and step["tasks"] == 2
    assert set(c for _, _, c in measured) == {step["cpus_per_task"]} == {2}


def sbatch_errors(completed):
    """sbatch's error lines, without the 'sbatch: error: ' prefix, joined as one text."""
    return " ".join(line.split("error: ", 1)[-1].strip() for line in completed.stderr.splitlines())


@pytest.mark.finding("doctor-script-dos-line-breaks", "doctor-script-byte-order-mark",
                     "doctor-script-no-interpreter-line")
def test_sbatch_refuses_the_encodings_the_doctor_names(cluster, tmp_path):
    body = "#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\nsrun true\n"
    cases = {"crlf": (("#!/bin/bash\n" + body).replace("\n", "\r\n"), "doctor-script-dos-line-breaks"),
             "bom": ("\ufeff#!/bin/bash\n" + body, "doctor-script-byte-order-mark"),
             "bare": (body, "doctor-script-no-interpreter-line")}
    for name, (text, finding_id) in cases.items():
        path = tmp_path / (name + ".sbatch")
        path.write_bytes(text.encode())
        refused = cluster.run("sbatch", "--hold", path, check=False)
        assert refused.returncode != 0, (name, refused.stdout)
        said = doctor(path).only(finding_id)["evidence"]["sbatch_says"]
        assert " ".join(line.split("error: ", 1)[-1] for line in said.split(" / ")).replace("\\r\\n", "\r\n").replace(
            "\\n", "\n").split()[:6] == sbatch_errors(refused).split()[:6], (name, said, refused.stderr)
        if name == "bare":  # its section quotes each line sbatch printed (the byte-order mark's links to it)
            section = section_text(TROUBLESHOOTING, "### " + finding_id, 3)
            for line in refused.stderr.splitlines():
                assert "`%s`" % " ".join(line.split("error: ", 1)[-1].split()) in " ".join(section.split()), line
    # a byte-order mark on a later line: sbatch takes the script, stops reading directives there, bash runs the line
    later = write(tmp_path, "later.sbatch", "#!/bin/bash\n#SBATCH --nodes=1\n\ufeff#SBATCH --cpus-per-task=2\n"
                                            "#SBATCH --nodes=2\necho NODES $SLURM_NNODES CPT ${SLURM_CPUS_PER_TASK-unset}\n")
    code, log, _ = cluster.submit(later)
    assert "command not found" in log and "NODES 1 CPT unset" in log, log
    computed = doctor(later)
    alloc = computed.json["topology"]["allocation"]
    assert (alloc["nodes"], alloc["cpus_per_task_set"]) == (1, False)
    assert computed.only("doctor-script-byte-order-mark")["evidence"]["lines"] == [3]


IMPOSSIBLE = ("--ntasks-per-node=-1", "--cpus-per-task=0", "--nodes=4-2", "--nodes=12345678901234567890", "--ntasks=0",
              "--nodes=0", "--gpus-per-node=-1", "--nodes=2-", "--ntasks=12345678901234567890")


@pytest.mark.finding("doctor-directive-invalid")
def test_sbatch_refuses_each_impossible_count_as_the_doctor_says(cluster, tmp_path):
    for index, directive in enumerate(IMPOSSIBLE):
        path = write(tmp_path, "count-%d.sbatch" % index, "#!/bin/bash\n#SBATCH %s\nsrun true\n" % directive)
        refused = cluster.run("sbatch", path, check=False)  # not --hold: sbatch then takes --nodes=0
        assert refused.returncode != 0, (directive, refused.stdout)
        [found] = doctor(path).findings("doctor-directive-invalid")
        assert found["evidence"]["line"] == 2 and found["evidence"]["slurm_says"] in sbatch_errors(refused), (
            directive, found["evidence"], refused.stderr)
    # a --cpus-per-task over 65535: sbatch takes it and keeps it modulo 65536 (the job would pend forever)
    path = write(tmp_path, "wrap.sbatch", "#!/bin/bash\n#SBATCH --cpus-per-task=99999999999\nsrun true\n")
    held = cluster.run("sbatch", "--hold", "--parsable", path, check=False)
    job_id = held.stdout.strip().split(";")[0]
    try:
        shown = cluster.run("scontrol", "show", "job", job_id).stdout
    finally:
        cluster.run("scancel", job_id, check=False)
    wrapped = re.search(r"CPUs/Task=(\d+)", shown).group(1)
    assert "%s here" % wrapped in doctor(path).only("doctor-directive-invalid")["evidence"]["why"]


HETEROGENEOUS = """#!/bin/bash
#SBATCH --nodes=1 --ntasks=1 --cpus-per-task=2
#SBATCH hetjob
#SBATCH --nodes=1 --ntasks=2 --cpus-per-task=1
srun {probe_a}
srun --het-group=1 {probe_b}
srun --het-group=0,1 {probe_c}
srun -n1 {probe_d} : -n2 {probe_d}
"""


def test_each_component_of_a_heterogeneous_job_starts_what_the_doctor_computes(cluster, tmp_path):
    text = HETEROGENEOUS.format(**dict(("probe_" + t, PROBE.replace("PROBE", "PROBE" + t.upper())) for t in "abcd"))
    path = write(tmp_path, "het.sbatch", text)
    code, log, _ = cluster.submit(path)
    assert code == 0, log
    steps = doctor(path, "--slurm-version", cluster.version).json["topology"]["steps"]
    for tag, line in (("A", 5), ("B", 6), ("C", 7), ("D", 8)):
        measured = probes(log, "PROBE" + tag)
        computed = [s for s in steps if s["line"] == line]
        # per component: its tasks, each bound to the CPUs the doctor computed for that component
        assert sum(s["tasks"] for s in computed) == len(measured), (tag, measured, computed)
        assert sorted(c for _, _, c in measured) == sorted(
            s["cpus_per_task"] for s in computed for _ in range(s["tasks"])), (tag, measured, computed)
        assert set(s["world_size"] for s in computed) == {len(measured)}


EXPORTS = """#!/bin/bash
#SBATCH --nodes=1 --ntasks=1 --cpus-per-task=2
source {venv}/bin/activate
export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK FOO=foo
srun /bin/bash -c 'echo OMP-A ${{OMP_NUM_THREADS-unset}} ${{PATH:+path}} ${{SLURM_JOB_ID:+slurm}}'
srun --export=NONE /bin/bash -c 'echo OMP-B ${{OMP_NUM_THREADS-unset}} ${{PATH:+path}} ${{SLURM_JOB_ID:+slurm}}'
srun --export=FOO,PATH /bin/bash -c 'echo OMP-C ${{OMP_NUM_THREADS-unset}} ${{PATH:+path}} ${{SLURM_JOB_ID:+slurm}}'
srun --export=ALL,OMP_NUM_THREADS=9 /bin/bash -c 'echo OMP-D ${{OMP_NUM_THREADS-unset}} ${{PATH:+path}} ${{SLURM_JOB_ID:+slurm}}'
srun --export=NONE bash -c 'echo OMP-E reached'
"""


@pytest.mark.finding("doctor-export-program-not-found", "doctor-export-drops-variables")
def test_what_srun_export_passes_is_what_the_doctor_computes(cluster, tmp_path):
    path = write(tmp_path, "exports.sbatch", EXPORTS.format(venv=os.path.dirname(os.path.dirname(sys.executable))))
    code, log, _ = cluster.submit(path)
    computed = doctor(path, "--slurm-version", cluster.version)
    steps = dict((s["line"], s) for s in computed.json["topology"]["steps"])
    measured = dict((m.group(1), m.group(2)) for m in re.finditer(r"^OMP-([A-D]) (\S+)", log, re.M))
    for tag, line in (("A", 5), ("B", 6), ("C", 7), ("D", 8)):
        threads = steps[line]["threads_per_rank"]["value"]
        assert measured[tag] == (str(threads) if threads is not None else "unset"), (tag, log, steps[line])
    assert re.search(r"^OMP-B unset path slurm$", log, re.M)  # NONE: bash's own PATH, SLURM_* kept (22.05.8)
    # a program named without its path under --export=NONE: execve fails, as the doctor says
    assert "OMP-E" not in log and "execve(): bash: No such file or directory" in log and code != 0
    [missing] = computed.findings("doctor-export-program-not-found")
    assert missing["evidence"]["line"] == 9 and steps[9]["export"]["program_found"] is False
    assert [f["evidence"]["line"] for f in computed.findings("doctor-export-drops-variables")] == [6, 7, 9]
    assert "doctor-line-not-understood" not in computed.ids()  # source .../bin/activate is environment setup
