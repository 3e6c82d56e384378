"""The skill's documentation read as text: paths, fenced blocks, prose, links, anchors, frontmatter, and
the two measures the Agent Skills linters apply to SKILL.md. Standard library only, so the fast tier
(tests/fast/test_docs_*.py) and the docs tests that run code share one reading of the files."""

import os
import re
import textwrap

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKILL = os.path.join(REPO, "SKILL.md")
REFERENCES = sorted(
    os.path.join(REPO, "references", name)
    for name in os.listdir(os.path.join(REPO, "references")) if name.endswith(".md"))
DOCS = [SKILL] + REFERENCES
EXAMPLES = sorted(
    os.path.join(REPO, "references", "examples", name)
    for name in os.listdir(os.path.join(REPO, "references", "examples")) if name.endswith(".py"))
SCALING = os.path.join(REPO, "references", "scaling-and-backends.md")
DISTRIBUTED = os.path.join(REPO, "references", "distributed-workflows.md")
TROUBLESHOOTING = os.path.join(REPO, "references", "troubleshooting.md")


def read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def relative(path):
    return os.path.relpath(path, REPO)


def squashed(path):
    return " ".join(read(path).split())


# The marker of a runnable block that needs a sampling backend (it skips, naming the finding, without one).
NEEDS_BACKEND = "needs-neighbor-backend"
FENCE = re.compile(r"^(\s*)(`{3,})([\w+-]*)[^\n]*$")
MARKER = re.compile(r"^<!--\s*(runnable|not-runnable)\s*(?::\s*(.*?))?\s*-->$")


class Block:
    def __init__(self, path, line, lang, code, marker):
        self.path, self.line, self.lang, self.code = path, line, lang, code
        self.kind, self.note = marker if marker else (None, None)

    @property
    def id(self):
        return "%s:%d" % (relative(self.path), self.line)


def fenced_blocks(path):
    """Fenced code blocks with the marker comment on the line before the fence."""
    lines = read(path).splitlines()
    blocks, index = [], 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        fence, lang, start = match.group(2), match.group(3).lower(), index
        body = []
        index += 1
        while index < len(lines) and lines[index].strip() != fence:
            body.append(lines[index])
            index += 1
        previous = lines[start - 1].strip() if start > 0 else ""
        marker = MARKER.match(previous)
        blocks.append(Block(path, start + 1, lang, textwrap.dedent("\n".join(body)) + "\n",
                            (marker.group(1), marker.group(2) or "") if marker else None))
        index += 1
    return blocks


def all_blocks():
    return [block for path in DOCS for block in fenced_blocks(path)]


def python_blocks():
    return [block for block in all_blocks() if block.lang in ("python", "py")]


def runnable_blocks():
    return [block for block in python_blocks() if block.kind == "runnable"]


def prose(path):
    """The text outside fenced code blocks."""
    kept, fence = [], None
    for line in read(path).splitlines():
        match = FENCE.match(line)
        if fence is None and match:
            fence = match.group(2)
        elif fence is not None and line.strip() == fence:
            fence = None
        elif fence is None:
            kept.append(line)
    return "\n".join(kept)


def inline_code_spans(path):
    """Inline code spans (single or multiple backticks, may wrap lines within a paragraph)."""
    spans = []
    for paragraph in re.split(r"\n\s*\n", prose(path)):
        for _, span in re.findall(r"(`+)([^`].*?)\1", paragraph, flags=re.S):
            spans.append(re.sub(r"\s*\n\s*", " ", span.strip()))
    return spans


def github_slug(heading):
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def headings(path):
    found = []
    for line in prose(path).splitlines():
        match = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if match:
            found.append((len(match.group(1)), match.group(2)))
    return found


def anchors(path):
    seen, result = {}, set()
    for _, text in headings(path):
        slug = github_slug(text)
        count = seen.get(slug, 0)
        result.add(slug if count == 0 else "%s-%d" % (slug, count))
        seen[slug] = count + 1
    return result


def markdown_links(path):
    text = re.sub(r"`[^`\n]*`", "", prose(path))
    return re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", text)


def section_text(path, heading, level):
    """The section under `heading` (a whole line), cut by a fence-aware parser at the next heading of
    `level` or above."""
    out, inside, fence = [], False, False
    for line in read(path).splitlines():
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


def finding_sections():
    """### headings whose text is a single kebab-case token: the finding sections."""
    return [text for level, text in headings(TROUBLESHOOTING)
            if level == 3 and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", text)]


def frontmatter_and_body(path):
    """(frontmatter, body): the body starts after the closing '---' line, where skillcheck's parser starts it."""
    text = read(path)
    assert text.startswith("---\n"), "SKILL.md must start with a --- frontmatter line"
    end = text.index("\n---\n", 4)
    return text[4:end], text[end + len("\n---\n"):]


def parse_frontmatter(text):
    """The block-style subset of YAML the design uses; anything else is an error."""
    result, current_map = {}, None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        nested = re.match(r"^  ([A-Za-z0-9_-]+):\s+(.+)$", line)
        top = re.match(r"^([A-Za-z0-9_-]+):(?:\s+(.+))?$", line)
        if nested and current_map is not None:
            current_map[nested.group(1)] = unquote(nested.group(2))
        elif top:
            key, value = top.group(1), top.group(2)
            assert key not in result, "duplicate key %r" % key
            if value is None:
                current_map = result[key] = {}
            else:
                assert not value.startswith(("{", "[")), "flow style on line %d: %r" % (number, line)
                result[key], current_map = unquote(value), None
        else:
            raise AssertionError("unsupported frontmatter line %d: %r" % (number, line))
    return result


def unquote(value):
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    assert ": " not in value and " #" not in value, "plain scalar needs quotes: %r" % value
    return value


# --- How the linters measure SKILL.md -------------------------------------------------------------------
# skills-ref (`agentskills validate`, PyPI and npm) counts no tokens at all. skillcheck (PyPI) warns when
# the body passes 5,000 tokens, counted with tiktoken's cl100k_base when tiktoken and its vocabulary are
# available, else (as here: the vocabulary is a download) with the offline estimate below, copied in
# behaviour from skillcheck 1.5.0's tokenizer.estimate_tokens: word runs x 1.3 plus punctuation runs x 1.5.

SKILL_BODY_TOKEN_BUDGET = 5000


def skillcheck_tokens(text):
    words = len(re.findall(r"\w+", text))
    punctuation = len(re.findall(r"[^\w\s]+", text))
    return max(1, int(words * 1.3) + int(punctuation * 1.5))


def skillcheck_file_references(body):
    """What skillcheck's references rule takes for files: markdown link targets, and backtick spans outside
    ``` blocks holding a '/' and no space, newline or angle bracket (references.py, core/graph.py)."""
    refs = re.findall(r"!?\[[^\]]*\]\((?!https?://|mailto:)([^)\s#]+)(?:#[^)]*)?\)", body)
    code_free = re.sub(r"```.*?```", "", body, flags=re.S)
    for span in re.findall(r"`([^`]+)`", code_free):
        span = span.strip()
        if span and "/" in span and not span.startswith(("http://", "https://", "mailto:")) \
                and not any(ch in span for ch in " \n<>"):
            refs.append(span)
    return list(dict.fromkeys(refs))
