"""Shell facts the references state, run in bash (and in srun where it is installed): the open-files limits
(`ulimit`), where `$(hostname)` expands in the docs' gathering line, and srun's answer to
`--external-launcher` before Slurm 23.11. No tool of the skill runs here; fake `srun`, `hostname` and
`python` stand in for the cluster."""

import os
import re
import resource
import shutil
import subprocess

import pytest

from support.docs_text import DISTRIBUTED, SCALING, fenced_blocks, read, squashed

BASH = shutil.which("bash")
CLEAN_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C"}


def bash_with_nofile(script, soft, hard):
    """Run `script` in bash with RLIMIT_NOFILE (soft, hard), as an unprivileged user (root may raise a hard
    limit, a job's user may not)."""
    def limit_and_drop():
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        if os.geteuid() == 0:
            os.setgid(65534)
            os.setuid(65534)
    return subprocess.run([BASH, "--norc", "--noprofile", "-c", script], preexec_fn=limit_and_drop, cwd="/",
                          env=CLEAN_ENV, capture_output=True, text=True, timeout=10)


def test_ulimit_n_cannot_pass_the_hard_limit_and_the_soft_one_rises_to_it():
    above = bash_with_nofile("ulimit -n 1024", soft=256, hard=512)
    assert above.returncode != 0 and "cannot modify limit: Operation not permitted" in above.stderr, above
    raised = bash_with_nofile('ulimit -Sn "$(ulimit -Hn)" && ulimit -Sn && ulimit -Hn', soft=256, hard=512)
    assert raised.returncode == 0 and raised.stdout.split() == ["512", "512"], raised
    text = squashed(SCALING)
    assert '`ulimit -Sn "$(ulimit -Hn)"`' in text and "`cannot modify limit: Operation not permitted`" in text


def test_a_plain_ulimit_n_lowers_the_hard_limit_for_good():
    lowered = bash_with_nofile("ulimit -n 1024 && ulimit -Hn && ulimit -n 2048", soft=256, hard=4096)
    assert lowered.stdout.split() == ["1024"] and lowered.returncode != 0, lowered  # no way back up
    assert "below it lowers the hard limit for good" in squashed(SCALING)


FAKES = {
    # srun: run the command once per node of FAKE_NODES, as that node (options before it are skipped).
    "srun": '#!/bin/bash\nwhile [[ "$1" == -* ]]; do shift; done\n'
            'for node in $FAKE_NODES; do FAKE_NODE=$node "$@" || exit; done\n',
    "hostname": '#!/bin/bash\necho "${FAKE_NODE:-batch-shell-host}"\n',
    "python": '#!/bin/bash\necho "{}"\n',
}


def gathering_line():
    blocks = [b.code for b in fenced_blocks(DISTRIBUTED) if "reports/$(hostname).json" in b.code]
    assert len(blocks) == 1, blocks
    return next(line for line in blocks[0].splitlines() if line.startswith("srun "))


def run_as_batch_script(line, folder):
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in FAKES.items():
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    (folder / "reports").mkdir(exist_ok=True)
    env = dict(CLEAN_ENV, PATH="%s:%s" % (bin_dir, CLEAN_ENV["PATH"]), FAKE_NODES="n1 n2", SLURM_NNODES="2")
    completed = subprocess.run([BASH, "--norc", "--noprofile", "-c", line], cwd=str(folder), env=env,
                               capture_output=True, text=True, timeout=10)
    assert completed.returncode == 0, completed.stderr
    return sorted(os.listdir(str(folder / "reports")))


def test_hostname_in_the_gathering_line_expands_in_each_task_and_unquoted_once_in_the_batch_shell(tmp_path):
    line = gathering_line()
    (tmp_path / "quoted").mkdir()
    assert run_as_batch_script(line, tmp_path / "quoted") == ["n1.json", "n2.json"]
    unquoted = line.replace("'", '"')  # the mistake the docs warn about
    (tmp_path / "unquoted").mkdir()
    assert run_as_batch_script(unquoted, tmp_path / "unquoted") == ["batch-shell-host.json"]
    text = squashed(DISTRIBUTED)
    assert "unquoted, `$(hostname)` expands once, in the batch script's own shell" in text
    assert "not where you typed `sbatch`" in text


def srun_with_a_config(folder):
    """(srun, version tuple, version text, env): srun reads a configuration before anything else."""
    srun = shutil.which("srun")
    if not srun:
        pytest.skip("no srun on PATH; enable: apt-get install -y slurm-wlm")
    conf = folder / "slurm.conf"
    conf.write_text("ClusterName=docs\nSlurmctldHost=localhost\nNodeName=n1 CPUs=1 State=UNKNOWN\n"
                    "PartitionName=p Nodes=n1 Default=YES\n")
    env = dict(CLEAN_ENV, SLURM_CONF=str(conf))
    version = subprocess.run([srun, "--version"], capture_output=True, text=True, timeout=20, env=env).stdout
    match = re.search(r"(\d+)\.(\d+)\.\d+", version)
    assert match, version
    return srun, (int(match.group(1)), int(match.group(2))), match.group(0), env


def test_srun_before_23_11_refuses_external_launcher(tmp_path):
    srun, version, full, env = srun_with_a_config(tmp_path)
    if version >= (23, 11):
        pytest.skip("srun %s has --external-launcher; the refusal needs a Slurm before 23.11" % full)
    completed = subprocess.run([srun, "--external-launcher", "true"], cwd=str(tmp_path), capture_output=True,
                               text=True, timeout=20, env=env)
    assert completed.returncode == 255, completed
    assert "srun: unrecognized option '--external-launcher'" in completed.stderr
    assert "`srun: unrecognized option '--external-launcher'`, exit 255" in squashed(DISTRIBUTED)
    assert "srun --external-launcher torchrun" in read(DISTRIBUTED)
