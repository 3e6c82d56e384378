"""The launch doctor run as an agent runs it, on the hostile inputs of the round (one test per class): fixes
that must not run the input, flags placed where the launcher reads them, lines hidden behind what only looks
like a here-document, encodings sbatch refuses, directives with meaning (heterogeneous jobs, srun --export),
impossible counts, and the idioms of a real job (environment setup, threads from SLURM_CPUS_PER_TASK).
The same behaviours case by case, in process: tests/fast/test_launch_*.py; on the real SLURM:
tests/test_launch_cluster.py."""

import shutil
import subprocess

import pytest

from conftest import clean_env, invoke_tool
from support.slurm_cluster import fake_launchers, launcher_calls

BASH = shutil.which("bash")


def doctor(*args, expect=(0, 1)):
    result = invoke_tool("check_launch.py", *args, env=clean_env(), timeout=60)
    assert result.returncode in expect, (result.returncode, result.stderr[-2000:], result.stdout[-2000:])
    return result


def script(tmp_path, text, name="job.sbatch"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def pasted(fix, folder, env=None):
    """The fix pasted into bash from `folder`, PATH empty unless `env` gives one."""
    return subprocess.run([BASH, "-c", fix], cwd=str(folder), env=env or {"PATH": str(folder / "no-commands")},
                          capture_output=True, text=True, timeout=10)


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
def test_no_fix_runs_the_launch_lines_words(tmp_path):
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


PLACED = {
    "arguments after the script": "srun torchrun --nnodes=2 --nproc-per-node=2 --rdzv-backend=c10d "
                                  "--rdzv-endpoint=n1:29400 train.py --epochs 3",
    "background with a comment": "srun torchrun --nnodes=2 --nproc-per-node=2 --rdzv-backend=c10d "
                                 "--rdzv-endpoint=n1:29400 train.py --epochs 3 &  # in the background\nwait",
    "inside bash -c": "srun bash -c \"torchrun --nnodes=2 --nproc-per-node=2 --rdzv-backend=c10d "
                      "--rdzv-endpoint=n1:29400 train.py --epochs 3\"",
}


@pytest.mark.finding("doctor-rendezvous-not-unique")
@pytest.mark.parametrize("shape", sorted(PLACED))
def test_an_added_flag_reaches_torchrun_before_the_training_script(shape, tmp_path):
    job = script(tmp_path, "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n%s\n" % PLACED[shape])
    fix = doctor(job).only("doctor-rendezvous-not-unique")["fix"]
    out = tmp_path / "out"
    out.mkdir()
    env = {"PATH": str(fake_launchers(tmp_path / "bin")), "OUT": str(out), "SLURM_JOB_ID": "4242"}
    ran = pasted(fix + "\nwait", out, env)
    assert ran.returncode == 0, (fix, ran.stderr)
    [(_, words)] = [call for call in launcher_calls(out) if call[0] == "torchrun"]
    assert words[-3:] == ["train.py", "--epochs", "3"] and "--rdzv-id=4242" in words[:-3], (fix, words)


HIDING = {
    "<< in a comment": "# regenerate with: cat <<EOF > job.sbatch\n",
    "<< in arithmetic": "MASK=$(( 1 << SHIFT ))\n",
    "<< in (( ))": "(( MASK = 1 << SHIFT ))\n",
    "<<< here-string": "read -r X <<< \"a << b\"\n",
}


@pytest.mark.finding("doctor-nested-launcher")
@pytest.mark.parametrize("shape", sorted(HIDING))
def test_what_only_looks_like_a_here_document_hides_no_launch_line(shape, tmp_path):
    job = script(tmp_path, "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=4\n%s"
                           "srun torchrun --nnodes=2 --nproc-per-node=4 train.py\n" % HIDING[shape])
    result = doctor(job)
    assert result.returncode == 1 and "doctor-no-launch-line" not in result.ids()
    assert result.findings("doctor-nested-launcher")[0]["evidence"]["line"] == 5


@pytest.mark.finding("doctor-line-not-understood")
def test_an_unterminated_here_document_names_its_line_and_what_it_swallowed(tmp_path):
    job = script(tmp_path, "#!/bin/bash\n#SBATCH --nodes=1\ncat > x.txt <<END\nsrun python train.py\nmore\n")
    result = doctor(job)
    [item] = result.only("doctor-line-not-understood")["evidence"]["lines"]
    assert item["line"] == 3 and "lines 4 to 5" in item["why"][0]
    assert result.only("doctor-no-launch-line")["evidence"]["lines_not_read"] == [3]


@pytest.mark.finding("doctor-script-dos-line-breaks", "doctor-script-byte-order-mark",
                     "doctor-script-no-interpreter-line")
def test_encodings_sbatch_refuses_are_named(tmp_path):
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
def test_heterogeneous_components_and_srun_export_decide_the_topology(tmp_path):
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
def test_impossible_counts_are_each_a_finding_on_their_line(tmp_path):
    job = script(tmp_path, "#!/bin/bash\n#SBATCH --ntasks-per-node=-1\n#SBATCH --cpus-per-task=0\n"
                           "#SBATCH --nodes=4-2\nsrun --nodes=12345678901234567890 torchrun --nnodes=1 train.py\n")
    result = doctor(job)
    invalid = sorted((f["evidence"]["option"], f["evidence"]["line"]) for f in result.findings("doctor-directive-invalid"))
    assert invalid == [("cpus-per-task", 3), ("nodes", 4), ("nodes", 5), ("ntasks-per-node", 2)]
    assert "doctor-count-mismatch" not in result.ids() and len(result.stdout) < 100000


@pytest.mark.finding("doctor-omp-one-thread")
def test_a_real_jobs_idioms_are_understood(tmp_path):
    job = script(tmp_path, "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n#SBATCH --cpus-per-task=8\n"
                           "source ~/venvs/pyg/bin/activate\nmodule load cuda/12.4\n"
                           "export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK\n"
                           "srun python train.py\nsrun torchrun --nnodes=2 --nproc-per-node=4 --rdzv-backend=c10d "
                           "--rdzv-endpoint=$(hostname):29400 --rdzv-id=$SLURM_JOB_ID train.py\n")
    result = doctor(job, "--slurm-version", "22.05.8")
    assert result.returncode == 0 and result.ids() == [], result.ids()  # OMP_NUM_THREADS=8 reaches both steps
    assert [s["threads_per_rank"]["value"] for s in result.json["topology"]["steps"]] == [8, 8]
    unset = doctor(script(tmp_path, job.read_text().replace("export OMP_NUM_THREADS", "OMP_NUM_THREADS"), "unset.sbatch"))
    assert unset.only("doctor-omp-one-thread")["evidence"]["line"] == 9
