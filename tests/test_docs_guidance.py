"""The references' awk extractor as an agent runs it (issue 22, "Docs an agent can afford"): the awk line
each reference prints extracts exactly one section for any heading, also past `#` comment lines inside
code fences. The pure text checks of the same issue (the "Read it when" table, --explain first, finding
sections' length) are in tests/fast/test_docs_text.py."""

import re
import shutil
import subprocess

import pytest

from support.docs_text import REFERENCES, read, relative, section_text


def awk_section(path, heading, level):
    stop = "|".join("#" * n for n in range(1, level + 1))
    program = ("$0==h{p=1;print;next} /^ *```/{f=!f} p&&!f&&/^(%s) /{exit} p" % stop)
    process = subprocess.run(["awk", "-v", "h=" + heading, program, path], capture_output=True, text=True,
                             timeout=30)
    assert process.returncode == 0, process.stderr
    return process.stdout


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
        assert printed == section_text(path, heading, level), heading
        own_level = [line for line in printed.splitlines()[1:]
                     if re.match(r"^#{1,%d} " % level, line) and line in dict(section_headings(path, (1, 2, 3)))]
        assert printed.splitlines()[0] == heading and not own_level, heading


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
