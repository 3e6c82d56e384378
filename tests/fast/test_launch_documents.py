"""The launch doctor's whole document, run in this process through the one runner (launch_doctor.cli.SPEC:
its reading of real files, parsing, rules, gates, exit code, stdout and stderr), on what users paste and on
the hostile inputs of round 5 (one test per class): fixes that must not run the input, lines hidden behind
what only looks like a here-document, encodings sbatch refuses, directives with meaning (heterogeneous jobs,
srun --export), impossible counts, a real job's idioms, files it must refuse. What needs a process of its
own (signals, strace, the deadline on huge inputs, an internal error) is in tests/test_launch_input.py; the
real SLURM in tests/test_launch_cluster.py."""

import json
import os
import shutil
import subprocess
import uuid

import pytest

from conftest import CheckerRun
from diagnostics_core import runner
from launch_doctor import cli

BASH = shutil.which("bash")


@pytest.fixture
def doctor(capfd):
    """Run the doctor on these arguments, as `check_launch.py ARGS` would: the document, exit code, stderr."""
    def run(*args, expect=(0, 1)):
        code = runner.main(cli.SPEC, [str(a) for a in args])
        out, err = capfd.readouterr()
        result = CheckerRun(code, out, err, 0.0)
        assert code in expect, (code, err[-2000:], out[-2000:])
        if "--format" not in args:
            result.json = json.loads(out)
        return result
    return run


def script(tmp_path, text, name="job.sbatch"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def pasted(fix, folder):
    """The fix pasted into bash from `folder`, PATH empty (a command it names is not found)."""
    return subprocess.run([BASH, "-c", fix], cwd=str(folder), env={"PATH": str(folder / "no-commands")},
                          capture_output=True, text=True, timeout=10)


# --- launch lines it must get right without a cluster ------------------------------------------------------

@pytest.mark.finding("doctor-rendezvous-unreachable", "doctor-rendezvous-not-unique", "doctor-omp-one-thread")
def test_a_loopback_endpoint_a_fixed_id_and_one_thread_on_many_cores(doctor):
    result = doctor("--command", "srun torchrun --nnodes=2 --nproc-per-node=4 --rdzv-backend=c10d "
                                 "--rdzv-endpoint=localhost:29400 train.py",
                    "--sbatch", "--nodes=2 --ntasks-per-node=1 --cpus-per-task=8", "--slurm-version", "23.11.4")
    assert result.returncode == 1
    unreachable = result.only("doctor-rendezvous-unreachable")
    assert unreachable["evidence"]["rendezvous"]["host_resolved"] == "localhost"
    assert "--rdzv-endpoint=$MASTER_ADDR:29400" in unreachable["fix"]
    assert "--rdzv-id=$SLURM_JOB_ID" in result.only("doctor-rendezvous-not-unique")["fix"]
    threads = result.only("doctor-omp-one-thread")
    assert threads["evidence"]["cpus_per_rank"] == 2 and "OMP_NUM_THREADS=2" in threads["fix"]
    step = result.json["topology"]["steps"][0]
    # 23.11 reads SLURM_CPUS_PER_TASK=8 again: -c8 with --exact, one task per node of 8 CPUs
    assert (step["cpus_per_task"], step["world_size"], step["ranks_per_node"]) == (8, 8, 4)


@pytest.mark.finding("doctor-gpu-count-mismatch")
def test_more_ranks_per_node_than_gpus(doctor):
    result = doctor("--command", "srun torchrun --nnodes=2 --nproc-per-node=4 --rdzv-backend=c10d "
                                 "--rdzv-endpoint=$MASTER_ADDR:29400 --rdzv-id=$SLURM_JOB_ID train.py",
                    "--sbatch", "--nodes=2 --ntasks-per-node=1 --gpus-per-node=2 --cpus-per-task=8")
    found = result.only("doctor-gpu-count-mismatch")
    assert found["evidence"]["ranks_per_node"] == 4 and found["evidence"]["gpus_per_node"] == 2
    assert "--nproc-per-node=2" in found["fix"]


@pytest.mark.finding("doctor-srun-option-unsupported")
def test_external_launcher_by_the_version_a_log_names(doctor, tmp_path):
    job = script(tmp_path, "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=4\n"
                           "srun --external-launcher torchrun --nnodes=2 --nproc-per-node=4 --rdzv-backend=c10d "
                           "--rdzv-endpoint=$MASTER_ADDR:29400 --rdzv-id=$SLURM_JOB_ID train.py\n")
    old, new = tmp_path / "old.out", tmp_path / "new.out"
    old.write_text("slurm-wlm 22.05.8\n")
    new.write_text("slurm 23.11.4\n")
    refused = doctor(job, "--log", old)
    assert refused.returncode == 1 and refused.ids() == ["doctor-srun-option-unsupported"]
    assert refused.json["inputs"]["slurm_version"] == {"text": "22.05.8", "parsed": [22, 5, 8], "source": "log"}
    assert refused.json["topology"]["steps"][0]["srun_refuses"]["since"] == "23.11"
    runs = doctor(job, "--log", new)
    assert runs.returncode == 0 and runs.ids() == []
    step = runs.json["topology"]["steps"][0]
    assert (step["agents"], step["agents_per_node"], step["cpus_per_task"], step["world_size"]) == (2, 1, 4, 8)
    unknown = doctor(job, "--format", "markdown")
    assert "SLURM 23.11 and later: 4 CPU(s) per task" in unknown.stdout
    assert "SLURM 22.05 to 23.02: ? CPU(s) per task, ? per rank (srun before 23.11 refuses" in unknown.stdout


@pytest.mark.finding("doctor-log-loopback", "doctor-log-duplicate-device")
def test_loopback_and_duplicate_device_log_signatures(doctor, tmp_path):
    log = tmp_path / "job.out"
    # gloo's message as the checker's tests measured it, and NCCL's (init.cc: "Duplicate GPU detected : rank %d and
    # rank %d both on CUDA device %lx"): no GPU here to print it.
    log.write_text("[E socket.cpp:1011] [c10d] The client socket has timed out\n"
                   "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:144] connectFullMesh failed "
                   "remote=[127.0.1.1]:52011\n"
                   "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, invalid usage, "
                   "NCCL version 2.21.5\nLast error:\nDuplicate GPU detected : rank 1 and rank 0 both on CUDA "
                   "device 1000\n")
    result = doctor("--log", log)
    assert result.only("doctor-log-loopback")["evidence"]["line"] == 2
    assert result.only("doctor-log-duplicate-device")["evidence"]["line"] == 5
    assert "GLOO_SOCKET_IFNAME" in result.only("doctor-log-loopback")["fix"]


@pytest.mark.finding("doctor-no-launch-line")
def test_a_script_without_a_launch_line(doctor, tmp_path):
    result = doctor(script(tmp_path, "#!/bin/bash\n#SBATCH --nodes=1\necho hello\n"))
    assert result.returncode == 0 and result.ids() == ["doctor-no-launch-line"]


ISSUE_DOUBLE_LAUNCH = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
srun torchrun --nnodes=2 --nproc_per_node=4 --rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:29400 \\
    --rdzv-id=$SLURM_JOB_ID train.py
"""


def test_a_long_evidence_line_in_markdown_is_cut_with_a_marker(doctor, tmp_path):
    log = tmp_path / "slurm.out"
    agents = "".join("W1203 12:00:00.000000 %d torch/distributed/run.py:874] *****\n" % pid for pid in range(9001, 9009))
    lost = "".join("[W1203 12:00:01 TCPStore.cpp:138] [c10d] recvValueWithTimeout failed on SocketImpl: "
                   "Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash? %s\n"
                   % ("x" * 400) for _ in range(3))
    log.write_text(agents + lost + "srun: error: n2: tasks 4-7: Exited with exit code 1\n")
    report = doctor(script(tmp_path, ISSUE_DOUBLE_LAUNCH), "--log", log, "--format", "markdown").stdout
    assert report.startswith("# Launch doctor: ")
    evidence = [line for line in report.splitlines() if line.startswith("- evidence: ")]
    assert evidence and all(line.endswith("`") for line in evidence)
    assert any("characters cut" in line for line in evidence)


@pytest.mark.finding("doctor-line-not-understood")
def test_shell_tricks_are_reported_and_never_run(doctor, tmp_path):
    marker = "/tmp/pwned-%s" % uuid.uuid4().hex
    job = script(tmp_path, "#!/bin/bash\n#SBATCH --nodes=2\nNPROC=$(touch %s; echo 4)\n"
                           "eval \"touch %s\"\nsrun torchrun --nnodes=2 --nproc-per-node=`touch %s` x.py\n"
                           "source <(echo touch %s)\n" % ((marker,) * 4))
    doctor(job, "--format", "markdown")
    result = doctor(job)
    assert not os.path.exists(marker), "the doctor ran a line of the script"
    lines = result.only("doctor-line-not-understood")["evidence"]["lines"]
    assert [entry["line"] for entry in lines] == [3, 4, 5, 6]
    whys = " ".join(" ".join(entry["why"]) for entry in lines)
    for trick in ("command substitution", "eval", "backticks", "process substitution"):
        assert trick in whys
    assert "source" not in whys  # environment setup, understood; what it sources here is a process substitution
    assert all("touch" not in (f["fix"] or "") for f in result.json["findings"])


def test_a_line_of_a_mebibyte_is_named_not_read(doctor, tmp_path):
    one_line = script(tmp_path, "#!/bin/bash\nsrun torchrun " + "x" * ((1 << 20) - 100) + "\n", "one-line.sbatch")
    lines = doctor(one_line).only("doctor-line-not-understood")["evidence"]["lines"]
    assert lines[0]["line"] == 2 and "characters" in lines[0]["why"][0]


@pytest.mark.finding("doctor-input-unreadable")
def test_binary_special_and_huge_files_are_refused_with_one_line(doctor, tmp_path):
    binary = tmp_path / "a.out"
    binary.write_bytes(bytes(range(256)) * 4096)
    result = doctor(binary, expect=(2,))
    found = result.only("doctor-input-unreadable")
    assert found["evidence"]["file"] == str(binary) and "binary" in found["evidence"]["error"]
    assert len(result.stderr.splitlines()) == 1
    as_log = doctor("--log", binary, expect=(2,))
    assert "binary" in as_log.only("doctor-input-unreadable")["evidence"]["error"]
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert "not a regular file" in doctor(fifo, expect=(2,)).only("doctor-input-unreadable")["evidence"]["error"]
    big = tmp_path / "huge.sbatch"
    with open(big, "wb") as handle:
        handle.truncate(8 << 20)
    assert "larger than" in doctor(big, expect=(2,)).only("doctor-input-unreadable")["evidence"]["error"]


def test_a_log_line_after_the_head_window_is_found_in_a_small_log(doctor, tmp_path):
    small = tmp_path / "small.out"
    small.write_bytes(b"starting\ntorch.distributed.DistNetworkError: The server socket has failed to listen on any "
                      b"local network address. port: 29433, useIpv6: false, code: -98, name: EADDRINUSE, message: "
                      b"address already in use\n")
    assert doctor("--log", small).only("doctor-log-address-in-use")["evidence"]["line"] == 2


# --- the hostile round: one test per class ------------------------------------------------------------------

HOSTILE_JOB = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --job-name='$(:>marker)'
srun torchrun --nnodes=2 --nproc-per-node=4 --rdzv-backend=c10d --rdzv-endpoint=localhost:29400 train.py --tag 'a; :>marker' --note "x'y" --msg "$(:>marker)"
srun torchrun --nnodes=2 --nproc-per-node=4 --rdzv-backend=c10d --rdzv-endpoint=localhost:29401 train.py --tag 'b; :>marker' --out '`:>marker`'\\
 --x 'line
:>marker'
"""


@pytest.mark.finding("doctor-nested-launcher", "doctor-rendezvous-unreachable")
def test_no_fix_runs_the_launch_lines_words(doctor, tmp_path):
    result = doctor(script(tmp_path, HOSTILE_JOB), "--slurm-version", "22.05.8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    fixes = [f["fix"] for f in result.json["findings"] if f["fix"]]
    assert {"doctor-nested-launcher", "doctor-rendezvous-unreachable"} <= set(result.ids())
    for fix in fixes:
        pasted(fix, elsewhere)
        assert not (elsewhere / "marker").exists() and not (tmp_path / "marker").exists(), fix
    # line 5 holds the user's own $(...): it is not rebuilt, and the fix says so instead of printing it
    line5 = [f["fix"] for f in result.json["findings"] if f["evidence"].get("line") == 5 and f["fix"]]
    assert line5 and all(fix.startswith("# line 5 was not rebuilt (it holds command substitution") for fix in line5)
    nested = [f for f in result.findings("doctor-nested-launcher") if f["evidence"]["line"] == 6]
    assert nested and nested[0]["fix"].startswith("# line 6 was not rebuilt (it holds a quoted string holding shell")


HIDING = {
    "<< in a comment": "# regenerate with: cat <<EOF > job.sbatch\n",
    "<< in arithmetic": "MASK=$(( 1 << SHIFT ))\n",
    "<< in (( ))": "(( MASK = 1 << SHIFT ))\n",
    "<<< here-string": "read -r X <<< \"a << b\"\n",
}


@pytest.mark.finding("doctor-nested-launcher")
@pytest.mark.parametrize("shape", sorted(HIDING))
def test_what_only_looks_like_a_here_document_hides_no_launch_line(doctor, shape, tmp_path):
    job = script(tmp_path, "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=4\n%s"
                           "srun torchrun --nnodes=2 --nproc-per-node=4 train.py\n" % HIDING[shape])
    result = doctor(job)
    assert result.returncode == 1 and "doctor-no-launch-line" not in result.ids()
    assert result.findings("doctor-nested-launcher")[0]["evidence"]["line"] == 5


@pytest.mark.finding("doctor-line-not-understood")
def test_an_unterminated_here_document_names_its_line_and_what_it_swallowed(doctor, tmp_path):
    job = script(tmp_path, "#!/bin/bash\n#SBATCH --nodes=1\ncat > x.txt <<END\nsrun python train.py\nmore\n")
    result = doctor(job)
    [item] = result.only("doctor-line-not-understood")["evidence"]["lines"]
    assert item["line"] == 3 and "lines 4 to 5" in item["why"][0]
    assert result.only("doctor-no-launch-line")["evidence"]["lines_not_read"] == [3]


@pytest.mark.finding("doctor-script-dos-line-breaks", "doctor-script-byte-order-mark",
                     "doctor-script-no-interpreter-line")
def test_encodings_sbatch_refuses_are_named(doctor, tmp_path):
    body = "#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\nsrun python train.py\n"
    crlf = doctor(script(tmp_path, ("#!/bin/bash\n" + body).replace("\n", "\r\n"), "crlf.sbatch"))
    assert crlf.returncode == 1 and crlf.ids() == ["doctor-script-dos-line-breaks"]
    assert crlf.json["topology"]["allocation"]["nodes"] == 2  # the script once its line breaks are fixed
    bom = doctor(script(tmp_path, "\ufeff#!/bin/bash\n" + body, "bom.sbatch"))
    assert bom.ids() == ["doctor-script-byte-order-mark"] and bom.only("doctor-script-byte-order-mark")["evidence"][
        "at_start"] is True
    later = doctor(script(tmp_path, "#!/bin/bash\n\ufeff" + body, "later.sbatch"))
    assert later.ids() == ["doctor-script-byte-order-mark"] and later.json["topology"]["allocation"]["nodes"] == 1
    bare = doctor(script(tmp_path, body, "bare.sbatch"))
    assert bare.ids() == ["doctor-script-no-interpreter-line"]


@pytest.mark.finding("doctor-export-program-not-found", "doctor-export-drops-variables")
def test_heterogeneous_components_and_srun_export_decide_the_topology(doctor, tmp_path):
    job = script(tmp_path, "#!/bin/bash\n#SBATCH --nodes=1 --ntasks=1 --cpus-per-task=2\n#SBATCH hetjob\n"
                           "#SBATCH --nodes=2 --ntasks-per-node=1 --cpus-per-task=4\n"
                           "export OMP_NUM_THREADS=4\n"
                           "srun --het-group=1 --export=NONE python train.py\n")
    result = doctor(job, "--slurm-version", "22.05.8")
    [step] = result.json["topology"]["steps"]
    assert (step["het_group"], step["nodes"], step["tasks"], step["cpus_per_task"]) == (1, 2, 2, 4)
    assert step["threads_per_rank"]["value"] is None and step["export"]["dropped"] == ["OMP_NUM_THREADS"]
    assert [c["ntasks"] for c in result.json["topology"]["components"]] == [1, 2]
    assert result.only("doctor-export-program-not-found")["severity"] == "error"
    assert result.only("doctor-export-drops-variables")["evidence"]["dropped"] == ["OMP_NUM_THREADS"]


@pytest.mark.finding("doctor-directive-invalid")
def test_impossible_counts_are_each_a_finding_on_their_line(doctor, tmp_path):
    job = script(tmp_path, "#!/bin/bash\n#SBATCH --ntasks-per-node=-1\n#SBATCH --cpus-per-task=0\n"
                           "#SBATCH --nodes=4-2\nsrun --nodes=12345678901234567890 torchrun --nnodes=1 train.py\n")
    result = doctor(job)
    invalid = sorted((f["evidence"]["option"], f["evidence"]["line"]) for f in result.findings("doctor-directive-invalid"))
    assert invalid == [("cpus-per-task", 3), ("nodes", 4), ("nodes", 5), ("ntasks-per-node", 2)]
    assert "doctor-count-mismatch" not in result.ids() and len(result.stdout) < 100000


@pytest.mark.finding("doctor-omp-one-thread")
def test_threads_not_exported_are_torchruns_default(doctor, tmp_path):
    job = script(tmp_path, "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n#SBATCH --cpus-per-task=8\n"
                           "source ~/venvs/pyg/bin/activate\nmodule load cuda/12.4\n"
                           "OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK\n"
                           "srun python train.py\nsrun torchrun --nnodes=2 --nproc-per-node=4 --rdzv-backend=c10d "
                           "--rdzv-endpoint=$(hostname):29400 --rdzv-id=$SLURM_JOB_ID train.py\n")
    assert doctor(job).only("doctor-omp-one-thread")["evidence"]["line"] == 9
