"""SKILL.md as the Agent Skills linters read it: frontmatter, body size, file references, routing.

`agentskills validate` (skills-ref) checks the frontmatter fields, the name and the description;
skillcheck also fails on a backticked path that resolves outside the skill or to no file (the body's
token budget is test_docs_tokens.py's). These tests apply the same rules to the file README installs, so
the linters stay clean on the installed folder (except the one Claude Code field skills-ref rejects,
README says why).
"""

import os
import re

import pytest

from support.docs_text import (REFERENCES, REPO, SKILL, frontmatter_and_body, markdown_links, parse_frontmatter,
                               relative, skillcheck_file_references)

EXPECTED_FRONTMATTER = {
    "name": "scalable-distributed",
    "description": (
        "Scale PyTorch Geometric workloads with large-graph neighbor sampling, remote "
        "FeatureStore/GraphStore backends, distributed PyG loaders, multi-GPU or multi-node DDP "
        "recipes, CPU affinity, profiling, and backend troubleshooting."),
    "disable-model-invocation": "true",
    "metadata": {"disco-role": "operating"},
    "license": "MIT",
}
SPEC_FIELDS = {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
# Claude Code extension the design asks for; the reference validator rejects it (README says so).
CLAUDE_CODE_FIELDS = {"disable-model-invocation"}
# What README's install command copies: a reference in SKILL.md must resolve inside these.
INSTALLED = ("SKILL.md", "LICENSE", "references", "scripts")


def test_skill_frontmatter_is_exactly_the_design():
    frontmatter, _ = frontmatter_and_body(SKILL)
    assert parse_frontmatter(frontmatter) == EXPECTED_FRONTMATTER
    assert list(parse_frontmatter(frontmatter)) == list(EXPECTED_FRONTMATTER), "field order"


def test_skill_frontmatter_follows_the_agent_skills_rules():
    fields = parse_frontmatter(frontmatter_and_body(SKILL)[0])
    name = fields["name"]
    assert 1 <= len(name) <= 64 and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name)
    description = fields["description"]
    assert 1 <= len(description) <= 1024
    assert "<" not in description and ">" not in description
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in fields["metadata"].items())
    assert set(fields) - SPEC_FIELDS == CLAUDE_CODE_FIELDS, "only the documented extension field"


def test_every_file_reference_resolves_inside_the_installed_skill():
    """skillcheck fails (references.escape, references.broken-link) on a backticked '/dev/shm': write such
    paths outside backticks; a link or backticked path must be a file the install command copies."""
    problems = []
    for ref in skillcheck_file_references(frontmatter_and_body(SKILL)[1]):
        target = os.path.normpath(os.path.join(REPO, ref))
        inside = not os.path.isabs(ref) and target.startswith(REPO + os.sep) \
            and relative(target).split(os.sep)[0] in INSTALLED
        depth = len(ref.rstrip("/").split("/")) - 1
        if not inside or not os.path.exists(target) or depth > 1:
            problems.append(ref)
    assert not problems, problems


@pytest.mark.parametrize("body, expected", [
    ("space in `/dev/shm` is small", ["/dev/shm"]),
    ("space in /dev/shm is small", []),
    ("see [it](references/x.md#a) and `python3 scripts/a.py --help`", ["references/x.md"]),
    ("```bash\ncat `scripts/a.py`\n```\n`part_0/`", ["part_0/"]),
])
def test_the_reference_reader_takes_what_skillcheck_takes(body, expected):
    assert skillcheck_file_references(body) == expected


def test_skill_references_are_one_level_deep_and_route_to_every_reference():
    links = [link.split("#")[0] for link in markdown_links(SKILL) if "://" not in link]
    assert links, "SKILL.md must route into the references"
    for link in filter(None, links):
        parts = link.split("/")
        assert ".." not in parts and len(parts) <= 2, link
        assert os.path.isfile(os.path.join(REPO, link)), link
    for reference in REFERENCES:
        assert relative(reference) in links, "SKILL.md never routes to %s" % relative(reference)


def test_skill_names_the_safe_command_and_its_exit_codes():
    body = frontmatter_and_body(SKILL)[1]
    assert "python3 scripts/check_sampling_backends.py --require-neighbor-backend" in body
    assert "python3 scripts/check_sampling_backends.py --help" in body
    for code in ("| 0 |", "| 1 |", "| 2 |", "| 3 |"):
        assert code in body, "exit code table row %s" % code
