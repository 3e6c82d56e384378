"""The launch doctor reads a job script as bash does, in this process: words and what in them expands, here-
documents (and what only looks like one), directives as sbatch reads them, environment setup, and what it
cannot read named with its line."""

import pytest

from launch_doctor import parse, shell


def commands(text):
    return [[word.value for word in command["words"]] for command in shell.read(text)["commands"]]


def job(text, source="script", overrides=()):
    return parse.read_job(text, overrides, source)


def step_lines(text):
    return [step["line"] for step in job(text)["steps"] if step["kind"] == "step"]


# --- here-documents: what is one, what only looks like one -----------------------------------------------

LAUNCH = "srun torchrun --nnodes=2 train.py\n"
NOT_A_HEREDOC = {
    "in a comment": "# cat <<EOF is how the config was made\n",
    "in arithmetic expansion": "MASK=$(( 1 << SHIFT ))\n",
    "in an arithmetic command": "(( mask = 1 << shift ))\n",
    "in single quotes": "echo 'a << b'\n",
    "in double quotes": 'echo "a << b"\n',
    "a here-string": 'cat <<< "x << y"\n',
    "escaped": "echo a \\<\\< b\n",
    "in a parameter default": 'echo "${X:-<<}"\n',
}


@pytest.mark.parametrize("name", sorted(NOT_A_HEREDOC))
def test_what_only_looks_like_a_here_document_hides_no_line(name):
    text = "#!/bin/bash\n" + NOT_A_HEREDOC[name] + LAUNCH
    read = job(text)
    assert [s["line"] for s in read["steps"]] == [3] and read["heredocs"] == []
    assert not [item for item in read["not_understood"] if "here-document" in " ".join(item["why"])]


HEREDOCS = {
    # name: (text, the launch lines bash runs, delimiter, body lines)
    "plain": ("cat > a <<EOF\nsrun torchrun hidden.py\nEOF\n" + LAUNCH, [4], "EOF", [2, 2]),
    "quoted delimiter": ("cat > a <<'EOF'\nsrun x $(date)\nEOF\n" + LAUNCH, [4], "EOF", [2, 2]),
    "double-quoted delimiter": ('cat > a <<"END"\nsrun x\nEND\n' + LAUNCH, [4], "END", [2, 2]),
    "<<- strips tabs": ("cat > a <<-EOF\n\tsrun x\n\tEOF\n" + LAUNCH, [4], "EOF", [2, 2]),
    "<< keeps tabs": ("cat > a <<EOF\n\tEOF\nsrun x\nEOF\n" + LAUNCH, [5], "EOF", [2, 3]),
    "no space": ("cat>a<<EOF\nsrun x\nEOF\n" + LAUNCH, [4], "EOF", [2, 2]),
    "trailing space is no delimiter": ("cat > a <<EOF\nEOF \nsrun x\nEOF\n" + LAUNCH, [5], "EOF", [2, 3]),
    "two on one line": ("cat <<A > a; cat <<B > b\nsrun one\nA\nsrun two\nB\n" + LAUNCH, [6], "A", [2, 2]),
    "command after on the same line": ("cat > a <<EOF; " + LAUNCH + "body\nEOF\n", [1], "EOF", [2, 2]),
    "inside $(...)": ("X=$(cat <<EOF\nsrun x\nEOF\n)\n" + LAUNCH, [5], "EOF", [2, 2]),
}


@pytest.mark.parametrize("name", sorted(HEREDOCS))
def test_a_here_document_body_is_data_and_what_follows_is_read(name):
    text, launch_lines, delimiter, body = HEREDOCS[name]
    read = job(text)
    assert [s["line"] for s in read["steps"]] == launch_lines
    assert read["heredocs"][0]["delimiter"] == delimiter and read["heredocs"][0]["body_lines"] == body
    assert all(h["terminated"] for h in read["heredocs"])
    assert [i["why"] for i in read["not_understood"]] in ([], [["command substitution $(...)"]])  # X=$(cat <<EOF


def test_an_unterminated_here_document_names_its_line_and_what_was_skipped():
    read = job("#!/bin/bash\n" + LAUNCH + "cat <<NEVER\nsrun torchrun b.py\nmore\n")
    [item] = read["not_understood"]
    assert item["line"] == 3 and "never ends" in item["why"][0] and "lines 4 to 5" in item["why"][0]
    assert [s["line"] for s in read["steps"]] == [2]


@pytest.mark.parametrize("feeder", ["bash", "sh", "python3", "srun"])
def test_a_here_document_that_feeds_a_shell_is_said_to_hide_commands(feeder):
    read = job("#!/bin/bash\n%s <<EOF\nsrun torchrun x.py\nEOF\n" % feeder)
    [item] = [i for i in read["not_understood"] if i["line"] == 2]
    assert "lines 3 to 3 are commands the doctor did not read" in item["why"][0]


# --- quotes, continuations, comments -----------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("srun a 'b c' \"d e\"\n", [["srun", "a", "b c", "d e"]]),
    ("srun a \\\n   b\n", [["srun", "a", "b"]]),
    ("srun bash -c 'line one\nline two'\n", [["srun", "bash", "-c", "line one\nline two"]]),
    ("a; b && c || d | e & f\n", [["a"], ["b"], ["c"], ["d"], ["e"], ["f"]]),
    ("srun a # b c\n", [["srun", "a"]]),
    ("srun a#b\n", [["srun", "a#b"]]),
    ("srun x > log 2>&1\n", [["srun", "x"]]),
    ("if true; then srun x; fi\n", [["true"], ["srun", "x"]]),
    ("echo \"$(echo ')')\"\n", [["echo", "$(echo ')')"]]),
    ("A=1 B='2 3' srun x\n", [["A=1", "B=2 3", "srun", "x"]]),
    ("srun --rdzv-endpoint=${HOST}:29400 x\n", [["srun", "--rdzv-endpoint=$HOST:29400", "x"]]),
    ("srun $Xy ${X}y\n", [["srun", "$Xy", "${X}y"]]),
])
def test_words_as_bash_splits_them(text, expected):
    assert commands(text) == expected


@pytest.mark.parametrize("text, kinds", [
    ("a $(b)", {"cmdsub"}), ("a `b`", {"cmdsub"}), ("a <(b)", {"procsub"}), ("a $((1+2))", {"arith"}),
    ("a ${X:-1}", {"braced"}), ("a $X", {"param"}), ("a $1", {"special"}), ("a $'x'", {"ansi"}),
    ("a *.py", {"glob", "lit"}), ("a ~/x", {"tilde", "lit"}), ("a \"$(hostname)\"", {"first-node"}),
    ("a $(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)", {"first-node"}),
])
def test_what_in_a_word_expands_is_marked(text, kinds):
    [command] = shell.read(text)["commands"]
    assert command["words"][1].kinds() == kinds


@pytest.mark.parametrize("text, line, what", [
    ("#!/bin/bash\nsrun bash -c 'python train.py\n", 2, "a ' is never closed"),
    ('#!/bin/bash\necho ok\nsrun "x\n', 3, 'a " is never closed'),
    ("#!/bin/bash\nX=$(echo\n", 2, "$( ... ) is never closed"),
    ("#!/bin/bash\nX=`echo\n", 2, "backtick is never closed"),
    ("#!/bin/bash\nX=${A\n", 2, "${ ... } is never closed"),
])
def test_what_bash_cannot_read_is_named_with_its_line(text, line, what):
    read = job(text)
    [item] = read["not_understood"]
    assert item["line"] == line and what in item["why"][0] and "were not read" in item["why"][0]


def test_the_lines_before_an_unreadable_one_are_still_read():
    read = job("#!/bin/bash\n#SBATCH --nodes=2\nsrun python a.py\nsrun 'b\n")
    assert [s["line"] for s in read["steps"]] == [3]


@pytest.mark.parametrize("head", ["for i in 1 2; do", "while read -r host; do", "until false; do", "select x in a; do"])
def test_a_loop_is_named_and_its_body_still_read(head):
    read = job("#!/bin/bash\n%s\n  srun python a.py\ndone\n" % head)
    assert [s["line"] for s in read["steps"]] == [3]
    assert read["not_understood"][0]["line"] == 2 and "loop" in read["not_understood"][0]["why"][0]


# --- directives as sbatch reads them --------------------------------------------------------------------

@pytest.mark.parametrize("text, options", [
    ("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH -c 4\n", {"nodes": "2", "cpus-per-task": "4"}),
    ("#!/bin/bash\n  #SBATCH --nodes=2\n", {}),  # indented: sbatch 22.05 reads no directive there (measured)
    ("#!/bin/bash\n#SBATCH --ntasks-per-node=1 # --nodes=3\n", {"ntasks-per-node": "1"}),
    ("#!/bin/bash\necho hi\n#SBATCH --nodes=2\n", {}),  # after the first command
    ("#!/bin/bash\n\n# note\n#SBATCH --nodes=2\n", {"nodes": "2"}),
    ('#!/bin/bash\n#SBATCH --job-name="a b" --nodes=2\n', {"job-name": "a b", "nodes": "2"}),
])
def test_directives_as_sbatch_reads_them(text, options):
    assert job(text)["allocation_options"] == options


def test_a_heterogeneous_job_has_one_option_set_per_component():
    read = job("#!/bin/bash\n#SBATCH -N1 -n1 -c2\n#SBATCH hetjob\n#SBATCH -N1 -n2\n#SBATCH packjob\n#SBATCH -N3\n")
    assert [c["options"] for c in read["components"]] == [
        {"nodes": "1", "ntasks": "1", "cpus-per-task": "2"}, {"nodes": "1", "ntasks": "2"}, {"nodes": "3"}]


def test_the_sbatch_command_line_colon_gives_components_and_wins():
    read = job("#!/bin/bash\n#SBATCH -N1\n", overrides=["-N", "2", ":", "-N", "3", "-n", "3"])
    assert [c["options"] for c in read["components"]] == [{"nodes": "2"}, {"nodes": "3", "ntasks": "3"}]


# --- environment setup is understood ---------------------------------------------------------------------

@pytest.mark.parametrize("line", [
    "source ~/venv/bin/activate", ". /opt/env.sh", "module load cuda/12.4", "module purge", "ml gcc",
    "conda activate pyg", "spack load py-torch", "eval \"$(conda shell.bash hook)\"", "module use /opt/modules",
    "micromamba activate x", "conda deactivate",
])
def test_environment_setup_is_no_line_not_understood(line):
    read = job("#!/bin/bash\n%s\nsrun python train.py\n" % line)
    assert read["not_understood"] == [] and read["environment_setup"][0]["line"] == 2


def test_setup_through_command_substitution_is_still_named():
    read = job("#!/bin/bash\nsource <(curl -s http://x/env)\nsrun python train.py\n")
    assert read["not_understood"][0]["why"] == ["process substitution"]


# --- steps -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("line, kind", [
    ("srun torchrun --nnodes=2 t.py", "torchrun"), ("srun python -m torch.distributed.run t.py", "torchrun"),
    ("srun python -u -m torch.distributed.launch t.py", "torchrun"), ("srun bash -c 'torchrun t.py'", "torchrun"),
    ("srun sh -lc \"export X=1; torchrun t.py\"", "torchrun"), ("srun env A=1 timeout 60 torchrun t.py", "torchrun"),
    ("mpirun -np 2 python t.py", "mpirun"), ("srun python t.py", "python"), ("srun numactl -N 0 python t.py", "python"),
    ("torchrun --standalone t.py", "torchrun"), ("srun bash run.sh", "other"),
])
def test_the_program_a_step_starts(line, kind):
    [step] = job(line, source="command")["steps"]
    assert step["program"]["kind"] == kind


def test_srun_that_only_prints_starts_no_step():
    read = job("#!/bin/bash\nsrun --version\nsrun -V\nsrun --help\nsrun --usage\nsrun python train.py\n")
    assert [s["line"] for s in read["steps"]] == [6]


def test_srun_colon_components_are_one_step_of_several_programs():
    [step] = job("srun -n1 python a.py : -n2 python b.py", source="command")["steps"]
    assert [c["srun"] for c in step["srun_components"]] == [{"ntasks": "1"}, {"ntasks": "2"}]
    assert [c["program"]["args"] for c in step["srun_components"]] == [["a.py"], ["b.py"]]


def test_exports_and_their_values_are_kept_unexpanded():
    read = job("#!/bin/bash\nexport OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK\nN=4\nexport N\nsrun python t.py\n")
    assert read["exports"]["OMP_NUM_THREADS"] == {"value": "$SLURM_CPUS_PER_TASK", "line": 2, "exported": True}
    assert read["exports"]["N"]["exported"] is True and read["exports"]["N"]["value"] == "4"


@pytest.mark.parametrize("text, lines", [
    ("\ufeff#!/bin/bash\nsrun x\n", {"bom_lines": [1], "crlf_count": 0, "interpreter_line": False}),
    ("#!/bin/bash\r\nsrun x\r\n", {"bom_lines": [], "crlf_count": 2, "interpreter_line": True}),
    ("#!/bin/bash\nsrun x\r\n", {"bom_lines": [], "crlf_count": 1, "interpreter_line": True}),
    ("#SBATCH -N2\nsrun x\n", {"bom_lines": [], "crlf_count": 0, "interpreter_line": False}),
    ("#!/bin/bash\n\ufeff#SBATCH -N2\n", {"bom_lines": [2], "crlf_count": 0, "interpreter_line": True}),
])
def test_the_encoding_sbatch_sees(text, lines):
    seen = job(text)["encoding"]
    assert dict((k, seen[k]) for k in lines) == lines


def test_a_byte_order_mark_on_a_later_line_ends_the_directives_as_in_sbatch():
    read = job("#!/bin/bash\n#SBATCH -N2\n\ufeff#SBATCH -c4\n#SBATCH -n2\nsrun x\n")
    assert read["allocation_options"] == {"nodes": "2"}
    assert job("#!/bin/bash\r\n#SBATCH -N2\r\n")["allocation_options"] == {"nodes": "2"}  # once fixed
