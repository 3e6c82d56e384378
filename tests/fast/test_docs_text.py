"""The references read as text: their size, contents tables, code-block markers, links and anchors,
finding sections, and the launch-failure signatures they quote (checked against the launch doctor's
own patterns, imported here). The code they show runs in tests/test_docs_*.py."""

import ast
import os
import re

from launch_doctor import logs
from support.docs_text import (DISTRIBUTED, DOCS, NEEDS_BACKEND, REFERENCES, TROUBLESHOOTING, all_blocks, anchors,
                               github_slug,
                               finding_sections, headings, markdown_links, prose, python_blocks, read, relative,
                               section_text)

# All of references/*.md together: what an agent may load, issue 41's ceiling.
REFERENCES_MAX_CHARS = 170_000
MAX_FINDING_LINES = 70


def test_the_references_stay_under_their_size_ceiling():
    sizes = {relative(path): len(read(path)) for path in REFERENCES}
    assert sum(sizes.values()) < REFERENCES_MAX_CHARS, sizes


def test_references_over_100_lines_open_with_a_table_of_contents():
    for path in REFERENCES:
        lines = read(path).splitlines()
        if len(lines) <= 100:
            continue
        level_two = [text for level, text in headings(path) if level == 2]
        assert level_two[0] in ("Contents", "Table of contents"), relative(path)
        assert "## %s" % level_two[0] in "\n".join(lines[:15]), "ToC must open %s" % relative(path)
        contents = prose(path).split("## %s" % level_two[0], 1)[1].split("\n## ", 1)[0]
        listed = set(re.findall(r"\]\(#([^)]+)\)", contents))
        missing = [text for text in level_two[1:] if github_slug(text) not in listed]
        assert not missing, "%s: sections missing from the ToC: %s" % (relative(path), missing)


def test_each_reference_opens_with_a_read_when_table_and_an_extractor():
    for path in REFERENCES:
        head = read(path).split("\n## ", 2)[1]  # the Contents section
        assert head.startswith("Contents"), relative(path)
        assert "| Section | Read it when |" in head
        assert "awk -v h='" in head and relative(path) in head


def test_troubleshooting_points_at_explain_first():
    head = read(TROUBLESHOOTING).split("## Reading a finding", 1)[0]
    assert head.index("--explain") < head.index("awk -v h=")


def sections_by_heading(path, level):
    """{heading line: its section's lines}, cut in one pass like section_text (fence-aware)."""
    sections, current, fence = {}, None, False
    for line in read(path).splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
        match = None if fence else re.match(r"^(#{1,6}) ", line)
        if match and len(match.group(1)) <= level:
            current = sections.setdefault(line, []) if len(match.group(1)) == level else None
        if current is not None:
            current.append(line)
    return sections


def test_finding_sections_fit_what_explain_prints_and_say_symptom_cause_fix():
    sections = sections_by_heading(TROUBLESHOOTING, 3)
    some = finding_sections()[0]
    assert "\n".join(sections["### " + some]) + "\n" == section_text(TROUBLESHOOTING, "### " + some, 3)
    for section in finding_sections():
        body = "\n".join(sections["### " + section])
        assert len(body.splitlines()) <= MAX_FINDING_LINES, "%s is %d lines" % (section, len(body.splitlines()))
        for label in ("**Symptom:**", "**Cause:**", "**Fix:**"):
            assert label in body, "%s lacks %s" % (section, label)


def test_every_python_block_parses_and_says_whether_it_runs():
    blocks = python_blocks()
    assert len(blocks) >= 8
    for block in blocks:
        ast.parse(block.code, filename=block.id)
        assert block.kind in ("runnable", "not-runnable"), (
            "%s: mark it <!-- runnable --> or <!-- not-runnable: why -->" % block.id)
        if block.kind == "not-runnable":
            assert block.note, "%s: say why it cannot run" % block.id
        else:
            assert block.note in ("", NEEDS_BACKEND), "%s: unknown marker %r" % (block.id, block.note)


def test_only_python_blocks_are_marked_runnable():
    for block in all_blocks():
        if block.kind == "runnable":
            assert block.lang in ("python", "py"), "%s: only Python blocks are run" % block.id


def test_every_relative_link_and_anchor_resolves():
    broken, known = [], {}
    for path in DOCS:
        for link in markdown_links(path):
            if re.match(r"^[a-z]+:", link):
                continue
            target, _, anchor = link.partition("#")
            target_path = os.path.normpath(os.path.join(os.path.dirname(path), target)) if target else path
            if not os.path.exists(target_path):
                broken.append("%s -> %s (no such file)" % (relative(path), link))
                continue
            if anchor and target_path not in known:
                known[target_path] = anchors(target_path)
            if anchor and anchor not in known[target_path]:
                broken.append("%s -> %s (no such heading)" % (relative(path), link))
    assert not broken, "\n".join(broken)


def test_a_torchrun_per_task_names_both_signatures_the_doctor_reads_as_one_race():
    """Both ways the extra agents die (tests/test_launch_cluster.py sees either on a real SLURM) are named
    where the docs warn against a torchrun per task, and the launch doctor reads each as doctor-log-store-lost."""
    paragraph = " ".join(read(DISTRIBUTED).split("**Never one torchrun per task.**", 1)[1].split("\n\n", 1)[0].split())
    quoted = re.findall(r"`([^`]*(?:RendezvousConnectionError|is_failed)[^`]*)`", paragraph)
    assert len(quoted) == 2, paragraph
    store_lost = dict(logs.SIGNATURES)["doctor-log-store-lost"]
    for signature in quoted:
        assert store_lost.search(signature), signature
