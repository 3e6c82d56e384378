"""The launch doctor's fixes are values: every corrected line is rebuilt from the parsed words, the flags it
adds sit where the launcher reads them, and no text of the input runs when an agent pastes a fix. Each
case runs the printed fixes in bash: hostile ones with an empty PATH from another folder (the marker must
not appear), placed ones with stub launchers that record the words they were given."""

import shutil
import subprocess

import pytest

from launch_doctor import cli, fixes, parse
from launch_doctor.rules import RULES
from support.slurm_cluster import fake_launchers, launcher_calls

BASH = shutil.which("bash")
HOSTILE = ["$(:>marker)", "`:>marker`", "; :>marker", "| :>marker", "&& :>marker", "\n:>marker", "'; :>marker; '",
           "\"; :>marker; \"", "$(:>marker)'", "x' $(:>marker) 'y", "${x:-$(:>marker)}", "<(:>marker)",
           "a b\\; :>marker", "-- ; :>marker", "!:>marker $HOME"]


def single_quoted(text):
    return "'" + text.replace("'", "'\"'\"'") + "'"


def double_quoted(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def findings(text, overrides=(), path="job.sbatch", version=(22, 5, 8), logs=()):
    source = "script" if text.startswith("#!") or "\n" in text else "command"
    facts = cli.analyse(text, list(overrides), source, version)
    facts["inputs"] = {"script": {"path": path}, "logs": list(logs)}
    return [item for rule in RULES for item in rule(facts, None)]


def run_in_shell(line, folder, env=None):
    """bash -c LINE from `folder`: PATH empty unless env gives one (a command it names is not found)."""
    return subprocess.run([BASH, "-c", line], cwd=str(folder), env=env or {"PATH": str(folder / "no-commands")},
                          capture_output=True, text=True, timeout=10)


# Job scripts whose launch line carries `{arg}` (a word of the user's) and earns findings with corrected lines.
SHAPES = {
    "torchrun c10d, fixed id": "#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=1 -c8\n"
                               "srun torchrun --nnodes=2 --nproc-per-node=4 --rdzv-backend=c10d "
                               "--rdzv-endpoint=localhost:29400 train.py --out {arg}\n",
    "nested launcher": "#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=4\n"
                       "srun torchrun --nnodes=2 --nproc-per-node=4 train.py --out {arg}\n",
    "count mismatch in bash -c": "#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=1\n"
                                 "srun bash -c {inner}\n",
    "port clash": "#!/bin/bash\n#SBATCH -N1 -n2\n"
                  "srun -n1 torchrun --master-port=29433 train.py --out {arg} &\n"
                  "srun -n1 torchrun --master-port=29433 train.py --out {arg} &\nwait\n",
    "export without PATH": "#!/bin/bash\n#SBATCH -N2\nexport OMP_NUM_THREADS=2\n"
                           "srun --export=NONE torchrun --nnodes=2 train.py --out {arg}\n",
    "invalid srun count": "#!/bin/bash\n#SBATCH -N2\nsrun --cpus-per-task=0 python train.py --out {arg}\n",
    "external launcher on 22.05": "#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=4\n"
                                  "srun --external-launcher torchrun --nnodes=2 train.py --out {arg}\n",
}


@pytest.mark.parametrize("quote", [single_quoted, double_quoted], ids=["single-quoted", "double-quoted"])
@pytest.mark.parametrize("hostile", HOSTILE)
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_hostile_word_in_a_launch_line_runs_nothing_when_a_fix_is_pasted(shape, hostile, quote, tmp_path):
    inner = double_quoted("torchrun --nnodes=3 --nproc-per-node=1 train.py --out " + quote(hostile))
    text = SHAPES[shape].format(arg=quote(hostile), inner=inner)
    found = findings(text)
    corrected = [f for f in found if f["fix"] and not f["fix"].startswith("#")]
    assert found and all(f["fix"] for f in found if f["severity"] == "error"), [f["id"] for f in found]
    other = tmp_path / "elsewhere"
    other.mkdir()
    for item in found:
        run_in_shell(item["fix"], other)
        assert not (other / "marker").exists(), item["fix"]
    if quote is single_quoted and not any(mark in hostile for mark in fixes.RUNS_CODE):
        # copied: the corrected line carries the word, whole, as the user's shell read it
        rebuilt = [f["fix"] for f in corrected if "train.py" in f["fix"]]
        assert rebuilt, [f["fix"] for f in found]
        for line in rebuilt:
            words = [w.value for c in parse.shell.read(line)["commands"] for w in c["words"]]
            assert hostile in words or any(hostile in w for w in words), (line, words)  # in bash -c's string
    if quote is double_quoted and ("$(" in hostile or "`" in hostile):
        # the user's own command substitution: no line is rebuilt with it, the fix says so
        assert not [f for f in corrected if "train.py" in f["fix"]], corrected
        assert any("was not rebuilt" in f["fix"] for f in found)


@pytest.mark.parametrize("hostile", ["job$(:>marker).sbatch", "job`:>marker`.sbatch", "job;:>marker;.sbatch",
                                     "job'x'\n:>marker.sbatch", "a b.sbatch"])
def test_a_hostile_script_path_in_a_fix_runs_nothing(hostile, tmp_path):
    text = "\ufeff#!/bin/bash\r\n#SBATCH -N2\r\nsrun python t.py\r\n"
    found = findings(text, path=str(tmp_path / hostile))
    assert {"doctor-script-dos-line-breaks", "doctor-script-byte-order-mark"} <= set(f["id"] for f in found)
    other = tmp_path / "elsewhere"
    other.mkdir()
    for item in found:
        run_in_shell(item["fix"], other)
        assert not (other / "marker").exists() and not (tmp_path / "marker").exists(), item["fix"]


def test_a_hostile_log_path_in_a_fix_runs_nothing(tmp_path):
    from launch_doctor.rules import rule_log_truncated
    log = {"path": "slurm$(:>marker).out", "partial": True, "read": {"skipped_bytes": 1}}
    [item] = rule_log_truncated({"inputs": {"logs": [log]}}, None)
    run_in_shell(item["fix"], tmp_path)
    assert not (tmp_path / "marker").exists()


# --- the user's words, copied or refused -------------------------------------------------------------------

def word(text):
    [command] = parse.shell.read("x " + text)["commands"]
    return command["words"][1].as_dict()


@pytest.mark.parametrize("text, rendered", [
    ("train.py", "train.py"), ("'a b'", "'a b'"), ("$NPROC", '"$NPROC"'), ("--nnodes=${N}", '"--nnodes=$N"'),
    ("\"$A\"x", '"${A}x"'), ("~/venv/bin/python", '"$HOME/venv/bin/python"'), ("'$HOME'", "'$HOME'"),
    ("--rdzv-endpoint=$(hostname):29400", '"--rdzv-endpoint=$MASTER_ADDR:29400"'),
    ("A='x y'", "A='x y'"), ("A=$B", 'A="$B"'),
])
def test_a_users_word_is_copied_as_bash_read_it(text, rendered):
    assert fixes.render_word(word(text))[0] == rendered


@pytest.mark.parametrize("text", ["$(date)", "`date`", "\"$(date)\"", "${X:-4}", "*.py", "$1", "<(cat)", "$'\\n'",
                                  "~root/x", "'$(date)'", "\"!x$HOME\"", "'${HOME}'\"$A\""])
def test_a_users_word_that_runs_something_is_not_copied(text):
    with pytest.raises(fixes.NotRebuilt):
        fixes.render_word(word(text))


def test_the_first_node_idiom_becomes_the_doctors_master_addr_and_says_where_it_runs():
    [item] = [f for f in findings("#!/bin/bash\n#SBATCH -N2\nsrun torchrun --nnodes=2 --rdzv-backend=c10d "
                                  "--rdzv-endpoint=$(hostname):29400 train.py\n")
              if f["id"] == "doctor-rendezvous-not-unique"]
    assert item["fix"].startswith(fixes.FIRST_NODE_COMMAND + "; srun torchrun")
    assert '"--rdzv-endpoint=$MASTER_ADDR:29400"' in item["fix"] and "runs on the batch host" in item["fix"]


# --- where an added flag goes -------------------------------------------------------------------------------

@pytest.fixture
def stubs(tmp_path):
    return fake_launchers(tmp_path / "bin")


calls = launcher_calls


def pasted(fix, stubs, tmp_path, **variables):
    """The launchers each word of `fix` reached, pasted into bash with the stand-in launchers (and `variables`
    as the job sets them): [(launcher, its words)]; the fix must run."""
    out = tmp_path / "out"
    out.mkdir()
    ran = run_in_shell(fix + "\nwait", out, dict(variables, PATH=str(stubs), OUT=str(out)))
    assert ran.returncode == 0, (fix, ran.stderr)
    return calls(out)


COMMON = "--nnodes=2 --nproc-per-node=4 --rdzv-backend=c10d --rdzv-endpoint=n1:29400"
PLACED = {
    # name: (launch line, how the launcher's own words end: the training script and its arguments)
    "script arguments after the script": ("srun torchrun %s train.py --epochs 3 --lr=0.1" % COMMON,
                                          ["train.py", "--epochs", "3", "--lr=0.1"]),
    "background with a comment": ("srun torchrun %s train.py --epochs 3 &  # in the background" % COMMON,
                                  ["train.py", "--epochs", "3"]),
    "bash -c in double quotes": ("srun bash -c \"torchrun %s train.py --epochs 3\"" % COMMON,
                                 ["train.py", "--epochs", "3"]),
    "sh -c in single quotes with an export": ("srun sh -c 'export X=1; torchrun %s train.py --epochs 3'" % COMMON,
                                              ["train.py", "--epochs", "3"]),
    "python -m torch.distributed.run": ("srun python -u -m torch.distributed.run %s train.py --epochs 3" % COMMON,
                                        ["train.py", "--epochs", "3"]),
    "-- before the script": ("srun torchrun %s -- train.py --epochs 3" % COMMON, ["--", "train.py", "--epochs", "3"]),
    "env and a redirection": ("srun env A=1 torchrun %s train.py --epochs 3 > out.log 2>&1" % COMMON,
                              ["train.py", "--epochs", "3"]),
    "continued lines": ("srun torchrun \\\n  %s \\\n  train.py --epochs 3" % COMMON, ["train.py", "--epochs", "3"]),
    "a pipe after it": ("srun torchrun %s train.py --epochs 3 | tee run.log" % COMMON, ["train.py", "--epochs", "3"]),
    "torchrun's options with spaces": ("srun torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d "
                                       "--rdzv-endpoint n1:29400 train.py --epochs 3", ["train.py", "--epochs", "3"]),
}


@pytest.mark.parametrize("name", sorted(PLACED))
def test_an_added_flag_goes_among_the_launchers_options(name, stubs, tmp_path):
    line, program = PLACED[name]
    found = findings("#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=1\n%s\n" % line)
    [item] = [f for f in found if f["id"] == "doctor-rendezvous-not-unique"]
    assert not item["fix"].startswith("#"), item["fix"]
    [(launcher, words)] = [c for c in pasted(item["fix"], stubs, tmp_path, SLURM_JOB_ID="4242", SLURM_NNODES="2")
                           if c[0] != "srun"]
    options = words[:len(words) - len(program)]
    assert words[len(options):] == program, (item["fix"], words)
    assert "--rdzv-id=4242" in options and "--rdzv-endpoint=n1:29400" in options, options  # n1: scontrol's first node


@pytest.mark.parametrize("name", ["script arguments after the script", "bash -c in double quotes"])
def test_srun_options_go_before_the_program(name, stubs, tmp_path):
    line, program = PLACED[name]
    line = line.replace("srun ", "srun --ntasks=8 ", 1)
    found = findings("#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=4 -c2\n%s\n" % line)
    [item] = [f for f in found if f["id"] == "doctor-nested-launcher"]
    (_, srun_words), (launcher, words) = pasted(item["fix"], stubs, tmp_path, SLURM_JOB_ID="4242")
    assert srun_words[:3] == ["--ntasks=2", "--ntasks-per-node=1", "--cpus-per-task=8"] and launcher == "torchrun"
    assert words[-len(program):] == program


def test_a_launcher_in_the_batch_shell_is_started_under_srun_one_per_node(stubs, tmp_path):
    found = findings("#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=1 -c4\ntorchrun --nnodes=2 --nproc-per-node=2 "
                     "--rdzv-backend=c10d --rdzv-endpoint=n1:29400 --rdzv-id=$SLURM_JOB_ID train.py --epochs 3\n")
    [item] = [f for f in found if f["id"] == "doctor-count-mismatch"]
    (_, srun_words), (_, words) = pasted(item["fix"], stubs, tmp_path, SLURM_JOB_ID="4242", SLURM_NNODES="2")
    assert srun_words[:3] == ["--ntasks=2", "--ntasks-per-node=1", "--cpus-per-task=4"]
    assert "--nnodes=2" in words and words[-3:] == ["train.py", "--epochs", "3"]


@pytest.mark.parametrize("line, why", [
    ("srun torchrun --nnodes=2 --rdzv-backend=c10d --rdzv-endpoint=n1:29400 train.py --seed $(date +%s)",
     "command substitution"),
    ("srun torchrun --nnodes=2 --rdzv-backend=c10d --rdzv-endpoint=n1:29400 train.py --data *.pt", "a glob"),
    ("srun bash -c 'if true; then torchrun --nnodes=2 --rdzv-backend=c10d --rdzv-endpoint=n1:29400 t.py; fi'",
     "a compound command"),
    ("srun torchrun --nnodes=2 --rdzv-backend=c10d --rdzv-endpoint=n1:29400 t.py <<EOF\nx\nEOF", "a here-document"),
])
def test_a_line_that_cannot_be_rebuilt_says_what_to_add_where(line, why):
    found = findings("#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=1\n%s\n" % line)
    [item] = [f for f in found if f["id"] == "doctor-rendezvous-not-unique"]
    assert item["fix"].startswith("# line 3 was not rebuilt (it holds %s" % why), item["fix"]
    assert '"--rdzv-id=$SLURM_JOB_ID" among its options' in item["fix"]


def test_a_directive_is_rebuilt_with_every_correction_of_its_line():
    found = findings("#!/bin/bash\n#SBATCH --nodes=4-2 --cpus-per-task=0 --job-name='a b'\nsrun python t.py\n")
    fixes_of = [f["fix"] for f in found if f["id"] == "doctor-directive-invalid"]
    assert len(fixes_of) == 2 and set(fixes_of) == {
        "#SBATCH --nodes=2-4 --cpus-per-task=1 '--job-name=a b'  # line 2, corrected"}


def test_the_sbatch_command_line_is_rebuilt_as_a_command():
    [item] = [f for f in findings("#!/bin/bash\nsrun python t.py\n", overrides=["-N", "4-2"], path="my job.sbatch")
              if f["id"] == "doctor-directive-invalid"]
    assert item["fix"].startswith("sbatch --nodes=2-4 'my job.sbatch'")


def test_external_launcher_on_22_05_is_rebuilt_as_one_task_per_node(stubs, tmp_path):
    found = findings("#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=4\nsrun --external-launcher torchrun --nnodes=2 "
                     "--nproc-per-node=4 train.py --epochs 3\n")
    [item] = [f for f in found if f["id"] == "doctor-srun-option-unsupported"]
    (_, srun_words), (launcher, words) = pasted(item["fix"], stubs, tmp_path, SLURM_NNODES="2")
    assert srun_words[:3] == ["--ntasks=2", "--ntasks-per-node=1", "--cpus-per-task=4"] and launcher == "torchrun"
    assert "--external-launcher" not in srun_words and words[-3:] == ["train.py", "--epochs", "3"]
