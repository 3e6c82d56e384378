"""The references as an agent reads them (issue 22, "Docs an agent can afford").

- each reference opens with a "Read it when" table and a one-section extractor;
- the awk line the references print extracts exactly one section for any heading,
  also past `#` comment lines inside code fences;
- every finding section (what `--explain ID` prints) stays at most 70 lines.
"""

import re
import shutil
import subprocess

import pytest

from test_docs_references import REFERENCES, TROUBLESHOOTING, finding_sections, read, relative

MAX_FINDING_LINES = 70


def awk_section(path, heading, level):
    stop = "|".join("#" * n for n in range(1, level + 1))
    program = ("$0==h{p=1;print;next} /^ *```/{f=!f} p&&!f&&/^(%s) /{exit} p" % stop)
    process = subprocess.run(["awk", "-v", "h=" + heading, program, path], capture_output=True, text=True,
                             timeout=30)
    assert process.returncode == 0, process.stderr
    return process.stdout


def python_section(path, heading, level):
    """The same section cut by a fence-aware parser."""
    lines, out, inside, fence = read(path).splitlines(), [], False, False
    for line in lines:
        if line.lstrip().startswith("```"):
            fence = not fence
        match = None if fence else re.match(r"^(#{1,6}) ", line)
        if inside and match and len(match.group(1)) <= level:
            break
        if line == heading:
            inside = True
        if inside:
            out.append(line)
    return "\n".join(out) + "\n"


def section_headings(path, levels):
    found, fence = [], False
    for line in read(path).splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        match = re.match(r"^(#{1,6}) ", line)
        if not fence and match and len(match.group(1)) in levels:
            found.append((line, len(match.group(1))))
    return found


@pytest.mark.skipif(shutil.which("awk") is None, reason="no awk on PATH")
@pytest.mark.parametrize("path", REFERENCES, ids=relative)
def test_the_awk_extractor_prints_exactly_one_section(path):
    for heading, level in section_headings(path, (2, 3)):
        printed = awk_section(path, heading, level)
        assert printed == python_section(path, heading, level), heading
        own_level = [line for line in printed.splitlines()[1:]
                     if re.match(r"^#{1,%d} " % level, line) and line in dict(section_headings(path, (1, 2, 3)))]
        assert printed.splitlines()[0] == heading and not own_level, heading


@pytest.mark.parametrize("path", REFERENCES, ids=relative)
def test_each_reference_opens_with_a_read_when_table_and_an_extractor(path):
    head = read(path).split("\n## ", 2)[1]  # the Contents section
    assert head.startswith("Contents"), relative(path)
    assert "| Section | Read it when |" in head
    assert "awk -v h='" in head and relative(path) in head


def test_the_extractor_line_in_each_reference_is_the_one_tested():
    for path in REFERENCES:
        lines = [line for line in read(path).splitlines() if line.startswith("awk -v h='")]
        assert len(lines) == 1, relative(path)
        heading = re.match(r"awk -v h='([^']+)'", lines[0]).group(1)
        level = len(heading.split(" ")[0])
        assert heading in read(path).splitlines(), (relative(path), heading)
        stop = "|".join("#" * n for n in range(1, level + 1))
        assert "/^(%s) /" % stop in lines[0], lines[0]
        assert awk_section(path, heading, level).startswith(heading + "\n")


def test_troubleshooting_points_at_explain_first():
    text = read(TROUBLESHOOTING)
    head = text.split("## Reading a finding", 1)[0]
    assert head.index("--explain") < head.index("awk -v h=")


def test_finding_sections_fit_what_explain_prints():
    for section in finding_sections():
        body = python_section(TROUBLESHOOTING, "### " + section, 3)
        assert len(body.splitlines()) <= MAX_FINDING_LINES, "%s is %d lines" % (section, len(body.splitlines()))
