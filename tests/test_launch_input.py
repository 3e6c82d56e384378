"""The launch doctor run as an agent runs it, where a process of its own matters: the headline launch in
JSON and markdown, a sound job's exit 0, usage and internal errors, a 100 MB log and a generated 1 MiB
script within the deadline, no process started and nothing written (strace), a signal while it reads, and
the checker inside a worker of a double launch. Every other case runs in this process through the same
runner: tests/fast/test_launch_*.py (test_launch_documents.py for whole documents)."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid

import pytest

from conftest import ENABLE, ROOT, clean_env, interrupted_finding, invoke_checker, invoke_tool, signal_when_ready

TOOL = ROOT / "scripts" / "check_launch.py"
DEADLINE_S = 15


def doctor(*args, expect=(0, 1)):
    started = time.time()
    result = invoke_tool("check_launch.py", *args, env=clean_env(), timeout=60)
    assert time.time() - started < DEADLINE_S, "the doctor took %.1fs" % (time.time() - started)
    assert result.returncode in expect, (result.returncode, result.stderr[-2000:], result.stdout[-2000:])
    return result


def doctor_markdown(*args):
    started = time.time()
    completed = subprocess.run([sys.executable, str(TOOL)] + [str(a) for a in args] + ["--format", "markdown"],
                               capture_output=True, text=True, timeout=60, env=clean_env(), stdin=subprocess.DEVNULL)
    assert time.time() - started < DEADLINE_S and completed.returncode in (0, 1), completed.stderr[-2000:]
    assert completed.stdout.startswith("# Launch doctor: ")
    return completed.stdout


ISSUE_DOUBLE_LAUNCH = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
srun torchrun --nnodes=2 --nproc_per_node=4 --rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:29400 \\
    --rdzv-id=$SLURM_JOB_ID train.py
"""


@pytest.mark.finding("doctor-nested-launcher")
def test_the_issues_double_launch_is_eight_agents_for_two(tmp_path):
    script = tmp_path / "job.sbatch"
    script.write_text(ISSUE_DOUBLE_LAUNCH)
    result = doctor(script, "--slurm-version", "slurm 22.05.8")
    assert result.returncode == 1 and result.ids()[0] == "doctor-nested-launcher"
    step = result.json["topology"]["steps"][0]
    assert (step["agents"], step["agents_per_node"], step["agents_joined"], step["agents_failing"],
            step["world_size"], step["cpus_per_task"], step["cpus_per_rank"]) == (8, 4, 2, 6, 8, 1, 0.25)
    assert step["ranks_per_node"] == [4, 8]  # the race: both joined agents may sit on one node
    fix = result.only("doctor-nested-launcher")["fix"]
    assert "#SBATCH --ntasks-per-node=1" in fix and "#SBATCH --cpus-per-task=4" in fix
    markdown = doctor_markdown(script, "--slurm-version", "slurm 22.05.8")
    assert "| 5 | srun &gt; torchrun | 2 | 4 | 1 | 8 (2) | 4-8 | 8 | 0.25 | 1 |" in markdown


def test_the_doctor_starts_no_process_and_writes_nothing(tmp_path):
    """strace: one execve (the interpreter itself), no file written, no socket."""
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed; enable: " + ENABLE["strace"])
    marker = "/tmp/pwned-%s" % uuid.uuid4().hex
    script = tmp_path / "job.sbatch"
    script.write_text(ISSUE_DOUBLE_LAUNCH + "echo $(touch %s)\n" % marker)
    trace = tmp_path / "trace"
    completed = subprocess.run(["strace", "-f", "-qq", "-o", str(trace), "-e", "trace=execve,fork,vfork,clone,clone3,"
                                "socket,connect,bind,openat,creat,mkdir,unlink,rename",
                                sys.executable, str(TOOL), str(script), "--format", "markdown"],
                               capture_output=True, text=True, timeout=60, env=clean_env(), cwd=str(tmp_path))
    assert completed.returncode == 1, completed.stderr[-2000:]
    calls = trace.read_text().splitlines()
    assert len([c for c in calls if "execve(" in c]) == 1, [c for c in calls if "execve(" in c]
    assert not [c for c in calls if re.search(r"\b(fork|vfork|clone3?)\(", c)]
    assert not [c for c in calls if re.search(r"\b(socket|connect|bind|creat|mkdir|unlink|rename)\(", c)
                and "= -1" not in c]
    assert not [c for c in calls if "openat(" in c and re.search(r"O_(WRONLY|RDWR|CREAT)", c) and "= -1" not in c]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.sbatch", "trace"] and not os.path.exists(marker)


@pytest.mark.finding("doctor-log-truncated", "doctor-log-address-in-use", "doctor-log-store-lost")
def test_a_100_mb_log_is_read_head_and_tail_within_the_deadline(tmp_path):
    log = tmp_path / "slurm-1.out"
    size = 100 << 20
    with open(log, "wb") as handle:
        handle.write(b"starting\n" * 600000)  # 5.4 MB of text: more than the head window
        handle.write(b"torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
                     b"network address. port: 29433, useIpv6: false, code: -98, name: EADDRINUSE, message: address "
                     b"already in use\n")
        handle.seek(size - 4096)  # a sparse middle: never written, never read
        handle.write(b"\n" + b"x" * 100 + b"\n")
        handle.write(b"torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the "
                     b"C10d store has failed. See inner exception for details.\n")
        handle.write(b"srun: error: n2: task 3: Exited with exit code 1\n")
    assert log.stat().st_size >= size - 4096
    result = doctor("--log", log)
    truncated = result.only("doctor-log-truncated")
    assert truncated["evidence"]["skipped_bytes"] > 90 << 20
    assert result.json["limits"]["log_window_bytes"] == 4 << 20
    assert result.json["inputs"]["logs"][0]["read"]["bytes"] == log.stat().st_size
    assert result.only("doctor-log-store-lost")["evidence"]["line"].startswith("tail+")
    # the EADDRINUSE line lies past the head window: the doctor says it did not read there (in a small log it
    # is found: tests/fast/test_launch_documents.py)
    assert "doctor-log-address-in-use" not in result.ids()


def test_a_real_jobs_idioms_are_understood_and_exit_0(tmp_path):
    job = tmp_path / "job.sbatch"
    job.write_text("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n#SBATCH --cpus-per-task=8\n"
                   "source ~/venvs/pyg/bin/activate\nmodule load cuda/12.4\n"
                   "export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK\n"
                   "srun python train.py\nsrun torchrun --nnodes=2 --nproc-per-node=4 --rdzv-backend=c10d "
                   "--rdzv-endpoint=$(hostname):29400 --rdzv-id=$SLURM_JOB_ID train.py\n")
    result = doctor(job, "--slurm-version", "22.05.8")
    assert result.returncode == 0 and result.ids() == [], result.ids()  # OMP_NUM_THREADS=8 reaches both steps
    assert [s["threads_per_rank"]["value"] for s in result.json["topology"]["steps"]] == [8, 8]


@pytest.mark.finding("doctor-usage-error")
def test_a_script_and_a_command_together_are_a_usage_error(tmp_path):
    script = tmp_path / "job.sbatch"
    script.write_text("#!/bin/bash\nsrun true\n")
    result = doctor(script, "--command", "srun true", expect=(2,))
    assert result.ids() == ["doctor-usage-error"] and len(result.stderr.splitlines()) == 1
    assert doctor(expect=(2,)).ids() == ["doctor-usage-error"]


@pytest.mark.finding("doctor-internal-error")
def test_an_internal_error_still_prints_one_document(tmp_path):
    code = ("import sys; sys.argv[0] = %r; sys.path.insert(0, %r); import check_launch as tool\n"
            "import launch_doctor.cli as cli\n"
            "def broken(*args):\n    raise KeyError('rule bug')\n"
            "cli.SPEC.rules = (broken,)\n"
            "sys.exit(tool.main(['--command', 'srun true']))" % (str(TOOL), str(ROOT / "scripts")))
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                               env=clean_env())
    document = json.loads(completed.stdout)
    assert completed.returncode == 3 and document["status"] == "internal-error"
    assert [f["id"] for f in document["findings"]] == ["doctor-internal-error"]
    assert "rule bug" in document["findings"][0]["evidence"]["error"]["message"]


# What a torchrun worker of the measured double launch saw (2 nodes x 2 srun tasks, one agent per task).
WORKER_OF_A_DOUBLE_LAUNCH = {"SLURM_STEP_NUM_TASKS": "4", "SLURM_STEP_NUM_NODES": "2", "SLURM_NTASKS": "4",
                             "SLURM_NNODES": "2", "SLURM_PROCID": "2", "SLURM_LOCALID": "0", "SLURM_NODEID": "1",
                             "TORCHELASTIC_RUN_ID": "1", "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2", "RANK": "2",
                             "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "n1",
                             "MASTER_PORT": "29411", "GLOO_SOCKET_IFNAME": "lo"}


@pytest.mark.finding("launch-several-agents-per-node")
def test_the_checker_inside_a_worker_names_several_agents_per_node():
    result = invoke_checker("--static-only", env=clean_env(WORKER_OF_A_DOUBLE_LAUNCH), detail="compact")
    found = result.only("launch-several-agents-per-node")
    assert found["evidence"]["SLURM_STEP_NUM_TASKS"] == 4 and found["evidence"]["agents_per_node"] == 2
    assert "--ntasks-per-node=1" in found["fix"] and "check_launch.py" in found["fix"]
    one_per_node = dict(WORKER_OF_A_DOUBLE_LAUNCH, SLURM_STEP_NUM_TASKS="2", SLURM_NTASKS="2")
    quiet = invoke_checker("--static-only", env=clean_env(one_per_node), detail="compact")
    assert "launch-several-agents-per-node" not in quiet.ids()


@pytest.mark.finding("doctor-line-not-understood", "doctor-port-clash")
def test_a_generated_script_of_a_mebibyte_ends_within_the_deadline(tmp_path):
    generated = tmp_path / "generated.sbatch"
    step = "srun -n1 --exact torchrun --nnodes=1 --master-port=29500 --no-python true &\n"
    generated.write_text("#!/bin/bash\n#SBATCH --nodes=2\n" + step * (((1 << 20) - 100) // len(step)))
    result = doctor(generated)
    assert len(result.findings("doctor-port-clash")) == 1  # one finding per port, however many steps
    assert result.only("doctor-port-clash")["evidence"]["steps_on_this_port"] == 200
    assert "counted, not analysed" in json.dumps(result.only("doctor-line-not-understood")["evidence"])
    assert len(result.stdout) < 400000


# The doctor, its log reading held as on a stalled network mount: the wrapper announces the read on stderr
# and waits, so the signal lands while the doctor works, every time (the doctor itself reads too fast to
# catch otherwise). Everything else is the real entry point, runner and signal handling.
STALLED_READ = """import sys, time
sys.argv[0] = {tool!r}
sys.path.insert(0, {scripts!r})
import check_launch as tool
from launch_doctor import reading
def stalled(path):
    sys.stderr.write("reading %s\\n" % path)
    sys.stderr.flush()
    time.sleep(120)
reading.read_log = stalled
sys.exit(tool.main(sys.argv[1:]))
"""


@pytest.mark.finding("doctor-interrupted")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_while_it_reads_prints_the_interrupted_document(tmp_path, signum):
    script = tmp_path / "job.sbatch"
    script.write_text(ISSUE_DOUBLE_LAUNCH)
    log = tmp_path / "slurm-1.out"
    log.write_text("starting\n")
    code = STALLED_READ.format(tool=str(TOOL), scripts=str(ROOT / "scripts"))
    process, stdout, stderr = signal_when_ready([sys.executable, "-c", code, str(script), "--log", str(log)], signum)
    document, stopped = interrupted_finding(process, stdout, signum, "doctor-interrupted")
    assert stopped["fix"] and document["inputs"]["script"]["path"] == str(script)  # what was read before the signal
    assert document["topology"] is None and b"Traceback" not in stderr
