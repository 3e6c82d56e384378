"""A fix is a value: words rendered by diagnostics_core.command are inert when pasted into a shell, whatever
text they carry; the tool's own variables still expand. Each case runs the rendered line in bash."""

import shutil
import subprocess

import pytest

from diagnostics_core import command

HOSTILE = ["$(:>{m})", "`:>{m}`", "; :>{m}", "| :>{m}", "&& :>{m}", "\n:>{m}", "'; :>{m}; '", "\"; :>{m}; \"",
           "$(:>{m})'", "x' $(:>{m}) 'y", "${{x:-$(:>{m})}}", "<(:>{m})", "a b\\; :>{m}", "-- ; :>{m}"]


BASH = shutil.which("bash")


def run_in_shell(line, folder):
    """Run `line` in bash from `folder` with an empty PATH (a command it names is not found; only the shell
    itself could write the marker); -> the completed process."""
    return subprocess.run([BASH, "-c", line], cwd=folder, env={"PATH": str(folder / "no-commands")},
                          capture_output=True, text=True, timeout=10)


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_word_from_the_input_runs_nothing(hostile, tmp_path):
    marker = tmp_path / "marker"
    text = hostile.format(m=marker)
    line = command.line("printf", "%s", text)
    run_in_shell(line + " > out", tmp_path)
    assert not marker.exists(), line
    assert (tmp_path / "out").read_text() == text  # the word arrives whole, as written


def test_the_tools_own_variable_expands_and_a_safe_word_stays_bare(tmp_path):
    line = command.line("echo", "--rdzv-id", command.Variable("JOB"), "a/b.py")
    assert line == 'echo --rdzv-id "$JOB" a/b.py'
    completed = subprocess.run([BASH, "-c", line], env={"JOB": "42"}, capture_output=True, text=True)
    assert completed.stdout == "--rdzv-id 42 a/b.py\n"


@pytest.mark.parametrize("text, expected", [
    ("$SLURM_NNODES", '"$SLURM_NNODES"'), ("${NPROC}", '"${NPROC}"'), ("--nnodes=$N", '"--nnodes=$N"'),
    ("train.py", "train.py"), ("a b", "'a b'")])
def test_a_users_plain_expansion_stays_an_expansion(text, expected, tmp_path):
    assert command.user_word(text) == expected


@pytest.mark.parametrize("text", ["$(hostname)", "`hostname`", "${X:-$(id)}", "${X/a/b}", "<(cat)", '"$X"',
                                  "!!$HOME", "$X!-1"])
def test_a_users_command_substitution_is_not_copied(text):
    with pytest.raises(command.NotCopied):
        command.user_word(text)


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_users_word_in_a_corrected_line_runs_nothing(hostile, tmp_path):
    marker = tmp_path / "marker"
    text = hostile.format(m=marker)
    try:
        line = " ".join(command.user_word(word) for word in ["printf", "%s", text])
    except command.NotCopied:
        return  # refused: the fix says the line was not rebuilt
    run_in_shell(line, tmp_path)
    assert not marker.exists(), line
