"""What an agent pays for SKILL.md, and to answer each routing question of it, in tokens.

Tokens are counted the way the Agent Skills linters count them: skillcheck's offline estimate (word runs
x 1.3 plus punctuation runs x 1.5; support/docs_text.py), its 5,000-token budget applying to SKILL.md's
body; skills-ref (`agentskills validate`) counts none. File-read tools do not follow #anchors, so before issue 22 an agent answering a question
read SKILL.md plus every reference the route names, whole. Now it reads SKILL.md,
the reference's opening "Read it when" table (up to the end of its Contents
section), and the one section it extracts with the awk line or `--explain ID`;
a finding id needs only what `--explain` prints.

Run `python tests/fast/test_docs_tokens.py` to print the table (and, inside a git
checkout that has the commit, the numbers before issue 22). The claim count of
the closing note comes from `claim_counts()`: assert statements in the claim tests
(tests/test_docs_advice.py, tests/test_docs_claims.py) plus those in the runnable code the docs
carry: blocks marked runnable and, since issue 33 moved the longer ones there, references/examples/*.py
(each run by tests/test_docs_examples.py).
"""

import ast
import os
import subprocess
import sys

import pytest

if __name__ == "__main__":  # run as a script: support/ is beside this folder
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from support.docs_text import (REPO, SKILL, SKILL_BODY_TOKEN_BUDGET, fenced_blocks, frontmatter_and_body, read,
                               skillcheck_tokens)

BEFORE_COMMIT = "1a4f84b"  # main before issue 22
SCALING = "references/scaling-and-backends.md"
DISTRIBUTED = "references/distributed-workflows.md"
TROUBLESHOOTING = "references/troubleshooting.md"

# question -> (reference, headings an answer needs; '### id' alone means `--explain id`)
QUESTIONS = {
    "size a scaling mechanism (sampling arithmetic)": (SCALING, ["## Sampling arithmetic: nodes, memory, workers"]),
    "write a custom FeatureStore/GraphStore": (SCALING, ["## Remote backends: FeatureStore and GraphStore"]),
    "CPU affinity and threads": (SCALING, ["## CPU affinity and threads"]),
    "multi-node launch (torchrun, SLURM)": (DISTRIBUTED, ["## Multi-node launch: torchrun and SLURM"]),
    "a finding id from a script": (TROUBLESHOOTING, ["### launch-master-addr-loopback"]),
}
BUDGET_TOKENS = 16_000  # per question, SKILL.md included


def tokens(text):
    return skillcheck_tokens(text)


def section(text, heading):
    level = len(heading.split(" ")[0])
    out, inside, fence = [], False, False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
        is_heading = not fence and line.startswith("#") and len(line.split(" ")[0]) <= level \
            and set(line.split(" ")[0]) == {"#"}
        if inside and is_heading:
            break
        inside = inside or line == heading
        if inside:
            out.append(line)
    assert out, heading
    return "\n".join(out) + "\n"


def opening(text):
    """Everything up to the section after Contents: the table an agent reads to choose a section."""
    head, rest = text.split("## Contents\n", 1)
    return head + "## Contents\n" + rest.split("\n## ", 1)[0]


def cost_now(question, files=None):
    files = files or {}
    def get(path):
        return files.get(path) or read(os.path.join(REPO, path))
    reference, headings = QUESTIONS[question]
    total = tokens(get("SKILL.md"))
    explain_only = reference == TROUBLESHOOTING and all(h.startswith("### ") for h in headings)
    if not explain_only:
        total += tokens(opening(get(reference)))
    return total + sum(tokens(section(get(reference), h)) for h in headings)


def cost_before(question, show):
    reference, _ = QUESTIONS[question]
    return tokens(show("SKILL.md")) + tokens(show(reference))


def git_show(commit):
    def show(path):
        return subprocess.run(["git", "-C", REPO, "show", "%s:%s" % (commit, path)], capture_output=True,
                              text=True, check=True).stdout
    return show


def count_asserts(source):
    try:
        return sum(isinstance(node, ast.Assert) for node in ast.walk(ast.parse(source)))
    except SyntaxError:
        return 0


def claim_counts(show=None):
    """(assert statements in claim tests, in runnable doc blocks) for the tree, or a commit via `show`."""
    if show is None:
        tests = [os.path.join("tests", n) for n in sorted(os.listdir(os.path.join(REPO, "tests")))
                 if n in ("test_docs_advice.py", "test_docs_claims.py")]
        in_tests = sum(count_asserts(read(os.path.join(REPO, t))) for t in tests)
        docs = ["SKILL.md"] + [os.path.join("references", n) for n in sorted(os.listdir(os.path.join(REPO, "references")))
                               if n.endswith(".md")]
        in_blocks = sum(count_asserts(b.code) for d in docs for b in fenced_blocks(os.path.join(REPO, d))
                        if b.kind == "runnable")
        examples = os.path.join(REPO, "references", "examples")
        in_blocks += sum(count_asserts(read(os.path.join(examples, n))) for n in sorted(os.listdir(examples))
                         if n.endswith(".py"))
        return in_tests, in_blocks
    import tempfile
    try:
        in_tests = count_asserts(show("tests/test_docs_advice.py"))
    except subprocess.CalledProcessError:  # that commit had no claim tests yet
        in_tests = 0
    in_blocks = 0
    with tempfile.TemporaryDirectory() as folder:
        for path in ("SKILL.md", SCALING, DISTRIBUTED, TROUBLESHOOTING):
            copy = os.path.join(folder, os.path.basename(path))
            with open(copy, "w") as handle:
                handle.write(show(path))
            in_blocks += sum(count_asserts(b.code) for b in fenced_blocks(copy) if b.kind == "runnable")
    return in_tests, in_blocks


def test_skill_body_is_under_the_linters_token_budget_and_500_lines():
    _, body = frontmatter_and_body(SKILL)
    assert len(read(SKILL).splitlines()) < 500
    assert tokens(body) < SKILL_BODY_TOKEN_BUDGET, "SKILL.md body is ~%d tokens by skillcheck's count" % tokens(body)
    # Where skillcheck can load tiktoken's cl100k_base it counts BPE tokens, about 4 characters each in
    # English prose: the body stays under the budget that way too.
    assert len(body) / 4 < SKILL_BODY_TOKEN_BUDGET


# What skillcheck 1.5.0's estimate_tokens returned for each text (run against the package itself).
@pytest.mark.parametrize("text, expected", [
    ("Run `scripts/check.py` then read `out.json`.", 20), ("word", 1), ("", 1), ("a-b-c", 6),
    ("| 0 | Ran, and every gate --- passed |", 14),
])
def test_the_token_count_is_skillchecks_offline_estimate(text, expected):
    assert tokens(text) == expected


def test_every_routing_question_fits_the_budget():
    for question in QUESTIONS:
        assert cost_now(question) <= BUDGET_TOKENS, "%s costs %d tokens" % (question, cost_now(question))


def test_the_measured_sections_exist():
    for reference, headings in QUESTIONS.values():
        text = read(os.path.join(REPO, reference))
        for heading in headings:
            assert heading in text.splitlines(), heading


def test_claim_tests_execute_more_asserts_than_before_issue_22():
    in_tests, in_blocks = claim_counts()
    assert in_tests >= 130 and in_blocks >= 30, (in_tests, in_blocks)  # before: 90 and 20


if __name__ == "__main__":
    try:
        show = git_show(BEFORE_COMMIT)
        show("SKILL.md")
    except subprocess.CalledProcessError:
        show = None
    print("| Question | Before (tokens) | Now (tokens) |\n|---|---|---|")
    for question in QUESTIONS:
        before = cost_before(question, show) if show else "n/a"
        print("| %s | %s | %d |" % (question, before, cost_now(question)))
    print("claims now (asserts in claim tests, in runnable blocks):", claim_counts())
    if show:
        print("claims before:", claim_counts(show))
    sys.exit(0)
