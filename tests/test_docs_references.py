"""The skill's documentation, tested like code.

SKILL.md and references/*.md are what an agent reads and acts on, so:
- SKILL.md's frontmatter and size follow the Agent Skills rules (plus the one
  Claude Code field the design asks for, disable-model-invocation);
- every torch_geometric.* dotted name resolves in the installed PyG, and every
  keyword argument shown in a call to a PyG class or function exists in its
  signature;
- every Python block parses; blocks marked <!-- runnable --> run on CPU in a
  temporary directory (those marked needs-neighbor-backend skip, naming the
  checker finding id, when no sampling backend works);
- every relative link and #anchor resolves, and troubleshooting.md has exactly
  one section per finding id the scripts can emit;
- a few claims the docs make about PyG's behaviour are replayed against it.
"""

import ast
import builtins
import importlib
import inspect
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import ENABLE, tree_state

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKILL = os.path.join(REPO, "SKILL.md")
REFERENCES = sorted(
    os.path.join(REPO, "references", name)
    for name in os.listdir(os.path.join(REPO, "references")) if name.endswith(".md"))
DOCS = [SKILL] + REFERENCES
EXAMPLES = sorted(
    os.path.join(REPO, "references", "examples", name)
    for name in os.listdir(os.path.join(REPO, "references", "examples")) if name.endswith(".py"))
TROUBLESHOOTING = os.path.join(REPO, "references", "troubleshooting.md")
CHECKER_SCRIPTS = ("check_sampling_backends.py", "check_store_contract.py", "check_partition.py",
                   "compare_reports.py", "ddp_neighbor_training.py", "profile_loader.py", "plan_capacity.py",
                   "check_launch.py")

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

SUBPROCESS_TIMEOUT = 240
NEEDS_BACKEND = "needs-neighbor-backend"


# ---------------------------------------------------------------------------
# Markdown helpers
# ---------------------------------------------------------------------------

def read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def relative(path):
    return os.path.relpath(path, REPO)


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


def frontmatter_and_body(path):
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


def all_blocks():
    return [block for path in DOCS for block in fenced_blocks(path)]


def python_blocks():
    return [block for block in all_blocks() if block.lang in ("python", "py")]


def runnable_blocks():
    return [block for block in python_blocks() if block.kind == "runnable"]


# ---------------------------------------------------------------------------
# SKILL.md: frontmatter, size, routing
# ---------------------------------------------------------------------------

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


def test_skill_body_size():
    _, body = frontmatter_and_body(SKILL)
    assert len(read(SKILL).splitlines()) < 500
    words = len(body.split())
    estimated_tokens = max(len(body) / 4, words * 1.33)
    assert estimated_tokens < 5000, "SKILL.md body is about %d tokens" % estimated_tokens


def test_skill_references_are_one_level_deep_and_exist():
    links = [link.split("#")[0] for link in markdown_links(SKILL) if "://" not in link]
    assert links, "SKILL.md must route into the references"
    for link in filter(None, links):
        parts = link.split("/")
        assert ".." not in parts and len(parts) <= 2, link
        assert os.path.isfile(os.path.join(REPO, link)), link
    for reference in REFERENCES:
        assert relative(reference) in links, "SKILL.md never routes to %s" % relative(reference)


def test_skill_backticked_paths_are_real_files():
    # Validators treat any backticked token with a slash and no space as a file reference.
    for span in inline_code_spans(SKILL):
        if "/" in span and not re.search(r"\s", span):
            assert os.path.exists(os.path.join(REPO, span)), span


def test_skill_names_the_safe_command_and_its_exit_codes():
    body = frontmatter_and_body(SKILL)[1]
    assert "python3 scripts/check_sampling_backends.py --require-neighbor-backend" in body
    assert "python3 scripts/check_sampling_backends.py --help" in body
    for code in ("| 0 |", "| 1 |", "| 2 |", "| 3 |"):
        assert code in body, "exit code table row %s" % code


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


# ---------------------------------------------------------------------------
# Code blocks
# ---------------------------------------------------------------------------

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


def repo_snapshot():
    return tree_state(REPO, skip=(".git", ".venv", "__pycache__", ".pytest_cache"))


@pytest.fixture(scope="module")
def neighbor_backend():
    """(available, why) as the skill's own gate reports it."""
    script = os.path.join(REPO, "scripts", "check_sampling_backends.py")
    process = subprocess.run([sys.executable, script, "--require-neighbor-backend"],
                             capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    if process.returncode in (0, 1):
        document = json.loads(process.stdout)
        ids = [f["id"] for f in document["findings"] if f["severity"] == "error"]
        return process.returncode == 0, "neighbor-sampling-unavailable (checker findings: %s)" % ids
    probe = subprocess.run(
        [sys.executable, "-c", "import torch_geometric.typing as T; "
                               "print(T.WITH_PYG_LIB or T.WITH_TORCH_SPARSE)"],
        capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    return probe.stdout.strip() == "True", ("neighbor-sampling-unavailable (WITH_* flags are False); enable: "
                                            + ENABLE["backend"])


@pytest.mark.parametrize("block", runnable_blocks(), ids=lambda block: block.id)
def test_runnable_block_runs_on_cpu(block, tmp_path, neighbor_backend):
    if block.note == NEEDS_BACKEND and not neighbor_backend[0]:
        pytest.skip(neighbor_backend[1])
    script = tmp_path / "snippet.py"
    script.write_text(block.code)
    before = repo_snapshot()
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONDONTWRITEBYTECODE="1")
    process = subprocess.run([sys.executable, str(script)], cwd=str(tmp_path), env=env,
                             capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    assert process.returncode == 0, "%s failed:\n%s" % (block.id, process.stderr[-4000:])
    assert repo_snapshot() == before, "%s wrote into the repository" % block.id


# ---------------------------------------------------------------------------
# PyG names and keyword arguments
# ---------------------------------------------------------------------------

DOTTED_NAME = re.compile(r"\btorch_geometric(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
SHORT_NAME_MODULES = (
    "torch_geometric.loader", "torch_geometric.data", "torch_geometric.distributed",
    "torch_geometric.profile", "torch_geometric.sampler", "torch_geometric.nn",
    "torch_geometric.distributed.partition", "torch_geometric.distributed.dist_context",
    "torch_geometric.distributed.rpc",
)


def resolve_dotted(name):
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(name)


def dotted_names():
    return sorted({match.rstrip(".") for path in DOCS for match in DOTTED_NAME.findall(read(path))})


def test_every_torch_geometric_dotted_name_resolves():
    names = dotted_names()
    assert len(names) >= 10
    unresolved = []
    for name in names:
        try:
            resolve_dotted(name)
        except (ImportError, AttributeError) as error:
            unresolved.append("%s (%s)" % (name, error))
    assert not unresolved, unresolved


def short_names():
    """Public PyG names an undotted call in the docs may refer to."""
    table = {}
    for module_name in SHORT_NAME_MODULES:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]:
            obj = getattr(module, name, None)
            if obj is not None and (inspect.isclass(obj) or inspect.isfunction(obj)):
                table.setdefault(name, obj)
    return table


def methods_by_name(table):
    methods = {}
    for obj in table.values():
        if inspect.isclass(obj):
            for name, member in inspect.getmembers(obj):
                if not name.startswith("__") and callable(member):
                    methods.setdefault(name, []).append(member)
    return methods


# Keyword arguments these public wrappers forward to a key class via **kwargs.
FORWARDED_KEYWORDS = {
    ("FeatureStore", "put_tensor"): "TensorAttr", ("FeatureStore", "get_tensor"): "TensorAttr",
    ("FeatureStore", "remove_tensor"): "TensorAttr", ("FeatureStore", "get_tensor_size"): "TensorAttr",
    ("GraphStore", "put_edge_index"): "EdgeAttr", ("GraphStore", "get_edge_index"): "EdgeAttr",
    ("GraphStore", "remove_edge_index"): "EdgeAttr",
}


def accepted_keywords(obj):
    """Keyword names `obj(...)` accepts, or None when it takes arbitrary ones."""
    import dataclasses

    import torch_geometric.data as pyg_data

    def named(params):
        return {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)} - {"self"}

    if inspect.isclass(obj):
        if issubclass(obj, (pyg_data.Data, pyg_data.HeteroData)):
            return None  # any keyword becomes an attribute
        if dataclasses.is_dataclass(obj):
            return set(inspect.signature(obj).parameters)
        inits = [vars(k)["__init__"] for k in obj.__mro__ if k is not object and "__init__" in vars(k)]
        own = list(inspect.signature(inits[0]).parameters.values())
        if not any(p.kind == p.VAR_KEYWORD for p in own):
            return named(own)
        # **kwargs travel up the initialiser chain (e.g. to torch's DataLoader).
        return set().union(*(named(inspect.signature(init).parameters.values()) for init in inits))
    try:
        params = list(inspect.signature(obj).parameters.values())
    except ValueError:  # a builtin without a signature (dict.update on a PyG class): nothing to check
        return None
    names = named(params)
    if any(p.kind == p.VAR_KEYWORD for p in params):
        owner = getattr(obj, "__qualname__", "").split(".")[0]
        forwarded = FORWARDED_KEYWORDS.get((owner, obj.__name__))
        if forwarded is None:
            return None
        names |= set(inspect.signature(getattr(pyg_data, forwarded)).parameters)
    return names


class CallChecker(ast.NodeVisitor):
    """Resolves calls in one code block to PyG objects and checks their keywords."""

    def __init__(self, table, methods, where):
        self.table, self.methods, self.where = table, methods, where
        self.aliases, self.instances, self.local_bases = {}, {}, {}
        self.checked, self.problems = [], []

    # names -------------------------------------------------------------
    def visit_Import(self, node):
        for alias in node.names:
            if alias.name.startswith("torch_geometric"):
                self.aliases[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0])

    def visit_ImportFrom(self, node):
        if node.module and node.module.startswith("torch_geometric"):
            for alias in node.names:
                self.aliases[alias.asname or alias.name] = "%s.%s" % (node.module, alias.name)

    def visit_ClassDef(self, node):
        for base in node.bases:
            resolved = self.resolve(base)
            if inspect.isclass(resolved):
                self.local_bases[node.name] = resolved
                break
        self.generic_visit(node)

    def visit_Assign(self, node):
        targets, values = node.targets[0], node.value
        pairs = (list(zip(targets.elts, values.elts))
                 if isinstance(targets, ast.Tuple) and isinstance(values, ast.Tuple)
                 else [(targets, values)])
        for target, value in pairs:
            if isinstance(target, ast.Name) and isinstance(value, ast.Call):
                klass = self.resolve(value.func)
                if inspect.isclass(klass):
                    self.instances[target.id] = klass
                elif inspect.ismethod(klass) and inspect.isclass(getattr(klass, "__self__", None)):
                    self.instances[target.id] = klass.__self__  # classmethod constructors
        self.generic_visit(node)

    def resolve(self, node):
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return resolve_dotted(self.aliases[node.id])
            if node.id in self.instances:
                return self.instances[node.id]
            if node.id in self.local_bases:
                return self.local_bases[node.id]
            if node.id in self.table and not hasattr(builtins, node.id):
                return self.table[node.id]
            return None
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return getattr(base, node.attr, None) if base is not None else None
        return None

    # calls -------------------------------------------------------------
    def visit_Call(self, node):
        keywords = [k.arg for k in node.keywords if k.arg is not None]
        if keywords:
            candidates = []
            target = self.resolve(node.func)
            if target is not None and getattr(target, "__module__", "").startswith("torch_geometric"):
                candidates = [target]
            elif target is None and isinstance(node.func, ast.Attribute) and self.unknown_root(node.func):
                candidates = self.methods.get(node.func.attr, [])
            if candidates:
                self.check(candidates, keywords, ast.unparse(node.func))
        self.generic_visit(node)

    def unknown_root(self, node):
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and node.id not in self.aliases and node.id not in (
            "torch", "dist", "mp", "F", "os", "sys", "np", "warnings", "json", "glob", "socket")

    def check(self, candidates, keywords, label):
        accepted = [accepted_keywords(c) for c in candidates]
        if any(a is None for a in accepted):
            return
        for keyword in keywords:
            self.checked.append((label, keyword))
            if not any(keyword in a for a in accepted):
                self.problems.append("%s: %s(%s=...) not in %s" % (
                    self.where, label, keyword, sorted(set().union(*accepted))))


def call_sources():
    """(where, source) for every code block, runnable example (references/examples/*.py) and inline code
    span that parses as Python."""
    sources = [(relative(path), read(path)) for path in EXAMPLES]
    for block in all_blocks():
        if block.lang in ("python", "py", ""):
            try:
                ast.parse(block.code)
            except SyntaxError:
                continue
            sources.append((block.id, block.code))
    for path in DOCS:
        for span in inline_code_spans(path):
            if "(" in span and "=" in span:
                try:
                    ast.parse(span)
                except SyntaxError:
                    continue
                sources.append(("%s `%s`" % (relative(path), span), span))
    return sources


def check_all_calls():
    table = short_names()
    methods = methods_by_name(table)
    checked, problems = [], []
    for where, source in call_sources():
        checker = CallChecker(table, methods, where)
        tree = ast.parse(source)
        # Imports and class definitions first, so later lines resolve regardless of order.
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                checker.visit(node)
        checker.visit(tree)
        checked += checker.checked
        problems += checker.problems
    return checked, problems


def test_every_keyword_in_a_pyg_call_exists_in_its_signature():
    checked, problems = check_all_calls()
    assert not problems, "\n".join(problems)
    assert len(checked) >= 40, "the keyword check resolved only %d keywords" % len(checked)
    labels = {label.split(".")[-1] for label, _ in checked}
    for expected in ("NeighborLoader", "Partitioner", "DistNeighborLoader", "DistContext",
                     "enable_cpu_affinity", "from_data", "put_edge_index"):
        assert expected in labels, "%s calls were not checked" % expected


def test_keyword_checker_rejects_a_wrong_keyword():
    table = short_names()
    checker = CallChecker(table, methods_by_name(table), "self-test")
    checker.visit(ast.parse("from torch_geometric.loader import NeighborLoader\n"
                            "NeighborLoader(data, num_neighbours=[5], batch_size=2)\n"))
    assert checker.problems and "num_neighbours" in checker.problems[0]
    assert ("NeighborLoader", "batch_size") in checker.checked


# ---------------------------------------------------------------------------
# Links, anchors and finding ids
# ---------------------------------------------------------------------------

def test_every_relative_link_and_anchor_resolves():
    broken = []
    for path in DOCS:
        for link in markdown_links(path):
            if re.match(r"^[a-z]+:", link):
                continue
            target, _, anchor = link.partition("#")
            target_path = os.path.normpath(os.path.join(os.path.dirname(path), target)) if target else path
            if not os.path.exists(target_path):
                broken.append("%s -> %s (no such file)" % (relative(path), link))
            elif anchor and anchor not in anchors(target_path):
                broken.append("%s -> %s (no such heading)" % (relative(path), link))
    assert not broken, "\n".join(broken)


def script_mentions():
    """(where, script, flags) for every mention of scripts/<name>.py in the docs."""
    mentions = []
    for path in DOCS:
        for number, line in enumerate(read(path).splitlines(), 1):
            for match in re.finditer(r"scripts/([\w-]+\.py)", line):
                rest = re.split(r"[`|#]", line[match.end():], maxsplit=1)[0]
                flags = re.findall(r"(?<!\S)(--[a-z][\w-]*)", rest)
                mentions.append(("%s:%d" % (relative(path), number), match.group(1), flags))
    return mentions


def test_script_commands_in_the_docs_use_real_scripts_and_flags():
    mentions = script_mentions()
    assert {script for _, script, _ in mentions} >= set(CHECKER_SCRIPTS) | {"ddp_neighbor_training.py"}
    helps, problems = {}, []
    for where, script, flags in mentions:
        path = os.path.join(REPO, "scripts", script)
        if not os.path.isfile(path):
            problems.append("%s: scripts/%s does not exist" % (where, script))
            continue
        if script not in helps:
            process = subprocess.run([sys.executable, path, "--help"], capture_output=True,
                                     text=True, timeout=SUBPROCESS_TIMEOUT)
            assert process.returncode == 0, "%s --help failed: %s" % (script, process.stderr[-2000:])
            helps[script] = process.stdout
        problems += ["%s: %s has no %s" % (where, script, flag)
                     for flag in flags if not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(flag), helps[script])]
    assert not problems, "\n".join(problems)


def emitted_finding_ids():
    """Finding ids of every script that supports --list-findings, by script."""
    ids = {}
    for name in CHECKER_SCRIPTS:
        script = os.path.join(REPO, "scripts", name)
        assert os.path.isfile(script), "scripts/%s is missing" % name
        process = subprocess.run([sys.executable, script, "--list-findings"],
                                 capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
        assert process.returncode == 0, process.stderr[-2000:]
        document = json.loads(process.stdout)
        entries = document["findings"] if isinstance(document, dict) else document
        ids[name] = [entry["id"] for entry in entries]
        for entry in entries:
            if entry.get("docs"):
                assert entry["docs"] == "references/troubleshooting.md#%s" % entry["id"], entry
    return ids


@pytest.fixture(scope="module")
def finding_ids():
    return emitted_finding_ids()


def finding_sections():
    """### headings whose text is a single kebab-case token: the finding sections."""
    return [text for level, text in headings(TROUBLESHOOTING)
            if level == 3 and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", text)]


def test_every_finding_id_has_a_section(finding_ids):
    sections = set(finding_sections())
    for script, ids in finding_ids.items():
        missing = sorted(set(ids) - sections)
        assert not missing, "troubleshooting.md lacks sections for %s ids: %s" % (script, missing)


def test_every_finding_section_names_a_real_id(finding_ids):
    known = set().union(*finding_ids.values())
    sections = finding_sections()
    assert len(sections) == len(set(sections)), "duplicate finding sections"
    assert not sorted(set(sections) - known), "sections without a finding id"


def test_finding_sections_say_symptom_cause_and_fix():
    # The evidence itself is in the tool's JSON; the section says what was seen, why, and the fix.
    text = read(TROUBLESHOOTING)
    for section in finding_sections():
        body = text.split("\n### %s\n" % section, 1)[1].split("\n#", 1)[0]
        for label in ("**Symptom:**", "**Cause:**", "**Fix:**"):
            assert label in body, "%s lacks %s" % (section, label)


# ---------------------------------------------------------------------------
# Claims about PyG's behaviour, replayed
# ---------------------------------------------------------------------------

def run_python(code, cwd, args=(), timeout=SUBPROCESS_TIMEOUT):
    script = os.path.join(str(cwd), "claim.py")
    with open(script, "w") as handle:
        handle.write(code)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, script, *args], cwd=str(cwd), env=env,
                          capture_output=True, text=True, timeout=timeout)


def block_defining(function_name):
    matches = [b for b in python_blocks() if re.search(r"^def %s\(" % function_name, b.code, re.M)]
    assert len(matches) == 1, "expected one block defining %s" % function_name
    return matches[0]


def test_neighbor_loader_constructs_without_a_backend_and_fails_at_iteration(tmp_path):
    code = textwrap.dedent("""
        import sys
        sys.modules['pyg_lib'] = None      # hide both backends from PyG
        sys.modules['torch_sparse'] = None
        import torch
        from torch_geometric.data import Data
        from torch_geometric.loader import NeighborLoader
        data = Data(x=torch.randn(10, 2), edge_index=torch.randint(0, 10, (2, 30)))
        loader = NeighborLoader(data, num_neighbors=[2], batch_size=2)
        try:
            next(iter(loader))
        except ImportError as error:
            print(error)
    """)
    process = run_python(code, tmp_path)
    assert process.returncode == 0, process.stderr[-3000:]
    message = "'NeighborSampler' requires either 'pyg-lib' or 'torch-sparse'"
    assert process.stdout.strip() == message
    assert message in read(SKILL)


QUOTED_PYG_MESSAGES = (
    "'NeighborSampler' requires either 'pyg-lib' or 'torch-sparse'",
    "'disjoint' sampling not supported for neighbor sampling via 'torch-sparse'",
    "Weighted neighbor sampling requires 'pyg-lib>=0.3.0'",
    "Edge-level temporal sampling requires a more recent 'pyg-lib' installation",
    "'ClusterData' requires either 'pyg-lib' or 'torch-sparse'",
    "'HGTSampler' requires 'torch-sparse'",
    "'ShaDowKHopSampler' requires 'torch-sparse'",
    "'enable_cpu_affinity' should be used with at least",
    "No RPC worker is in worker list",
    "could not initialize the worker loop of the neighbor sampler",
    "Using 'NeighborSampler' without a 'pyg-lib' installation is deprecated",
    "Received conflicting 'input_time' and 'time_attr' arguments",
    "stack_level=2",
)


def test_quoted_pyg_messages_exist_in_the_installed_pyg():
    import torch_geometric

    package = os.path.dirname(torch_geometric.__file__)
    source = ""
    for directory, _, files in os.walk(package):
        for name in files:
            if name.endswith(".py"):
                source += read(os.path.join(directory, name))
    # Join implicitly concatenated string literals split across lines.
    source = re.sub(r"\"\s*\n\s*f?\"|'\s*\n\s*f?'", "", source)
    docs = re.sub(r"\s+", " ", "\n".join(read(path) for path in DOCS))
    for message in QUOTED_PYG_MESSAGES:
        assert message in docs, "the docs no longer quote %r" % message
        # A quoted class name may be formatted in from self.__class__.__name__.
        pattern = re.sub(r"'([A-Z][A-Za-z]+)'", lambda m: r"'(?:%s|\{self\.__class__\.__name__\})'" % m.group(1),
                         re.escape(message).replace("\\'", "'"))
        assert re.search(pattern, source), "PyG %s no longer contains %r" % (torch_geometric.__version__, message)


def test_distributed_warn_patch_gets_past_construction(tmp_path):
    """The documented patch lets DistNeighborLoader construct and start RPC on 2 processes."""
    patch = block_defining("patch_pyg_dist_warn").code
    harness = patch + textwrap.dedent("""

        import os, socket, sys, tempfile
        import torch
        import torch.multiprocessing as mp
        from torch_geometric.data import Data
        from torch_geometric.loader import ClusterData
        from torch_geometric.distributed import (DistContext, DistNeighborLoader,
                                                 LocalFeatureStore, LocalGraphStore,
                                                 Partitioner)


        def say(line):
            # One write per line: two ranks share the pipe, and print() may split a line in two writes.
            os.write(1, (line + '\\n').encode())


        def free_port():
            with socket.socket() as sock:
                sock.bind(('127.0.0.1', 0))
                return sock.getsockname()[1]


        def run(rank, root, ddp_port, rpc_port, labels, patched):
            if patched:
                patch_pyg_dist_warn()
            else:
                import importlib, warnings
                for module in (dist_sampler_module, dist_loader_module, dist_link_loader_module):
                    module.warn = warnings.warn
            graph_store = LocalGraphStore.from_partition(root, rank)
            feature_store = LocalFeatureStore.from_partition(root, rank)
            feature_store.labels = labels
            ctx = DistContext(rank=rank, global_rank=rank, world_size=2, global_world_size=2,
                              group_name='docs-test')
            torch.distributed.init_process_group('gloo', rank=rank, world_size=2,
                                                 init_method=f'tcp://127.0.0.1:{ddp_port}')
            try:
                loader = DistNeighborLoader(
                    (feature_store, graph_store), num_neighbors=[2, 2], master_addr='127.0.0.1',
                    master_port=rpc_port, current_ctx=ctx, input_nodes=feature_store.get_global_id(None),
                    batch_size=4, num_workers=0, async_sampling=False)
            except TypeError as error:
                say(f'rank {rank} construct TypeError: {error}')
                return
            say(f'rank {rank} constructed')
            try:
                next(iter(loader))
                say(f'rank {rank} batch ok')
            except AttributeError as error:
                say(f'rank {rank} batch AttributeError: {error}')


        if __name__ == '__main__':
            # Stand-in for METIS (not available in CI): node i goes to part i % num_parts.
            ClusterData._metis = lambda self, edge_index, num_nodes: torch.arange(num_nodes) % self.num_parts
            torch.manual_seed(0)
            data = Data(x=torch.randn(40, 4), edge_index=torch.randint(0, 40, (2, 160)),
                        y=torch.randint(0, 3, (40,)))
            root = tempfile.mkdtemp(dir='.')
            Partitioner(data, num_parts=2, root=root).generate_partition()
            patched = sys.argv[1] == 'patched'
            mp.spawn(run, args=(root, free_port(), free_port(), data.y, patched), nprocs=2)
    """)
    unpatched = run_python(harness, tmp_path, ["unpatched"])
    assert unpatched.stdout.count("construct TypeError: 'stack_level' is an invalid keyword") == 2, (
        unpatched.stdout + unpatched.stderr[-3000:])
    patched = run_python(harness, tmp_path, ["patched"])
    assert patched.stdout.count("constructed") == 2, patched.stdout + patched.stderr[-3000:]
    for rank in (0, 1):
        outcome = [line for line in patched.stdout.splitlines() if line.startswith("rank %d batch" % rank)]
        assert outcome, patched.stdout + patched.stderr[-3000:]
        assert outcome[0].endswith("batch ok") or "dist_neighbor_sample" in outcome[0], outcome


def test_partition_recipe_layout_and_edge_feature_rewrite(tmp_path):
    """write_partitions + the edge_feats rewrite, on a partition made with a METIS stand-in."""
    writer = block_defining("write_partitions").code
    rewrite = block_defining("rewrite_edge_feats_as_dict").code
    with open(os.path.join(str(tmp_path), "rewrite_edge_feats.py"), "w") as handle:
        handle.write(rewrite)
    harness = writer + textwrap.dedent("""

        import json, subprocess, sys
        from torch_geometric.data import Data
        from torch_geometric.loader import ClusterData
        from torch_geometric.distributed import LocalFeatureStore, LocalGraphStore

        ClusterData._metis = lambda self, edge_index, num_nodes: torch.arange(num_nodes) % self.num_parts
        torch.manual_seed(0)
        data = Data(x=torch.randn(30, 4), edge_index=torch.randint(0, 30, (2, 120)),
                    edge_attr=torch.randn(120, 3), y=torch.randint(0, 3, (30,)),
                    train_mask=torch.rand(30) < 0.6)
        root = write_partitions(data, 2, 'out', 'toy')
        report = {'files': sorted(os.path.relpath(os.path.join(d, f), 'out')
                                  for d, _, fs in os.walk('out') for f in fs),
                  'meta': json.load(open(os.path.join(root, 'META.json')))}
        LocalGraphStore.from_partition(root, 0)
        try:
            LocalFeatureStore.from_partition(root, 0)
            report['before'] = 'loaded'
        except Exception as error:
            report['before'] = '%s: %s' % (type(error).__name__, error)
        rewrite = subprocess.run([sys.executable, 'rewrite_edge_feats.py', root],
                                 capture_output=True, text=True)
        report['rewrite_rc'] = rewrite.returncode
        store = LocalFeatureStore.from_partition(root, 1)
        report['after'] = sorted(str(a.attr_name) for a in store.get_all_tensor_attrs())
        print(json.dumps(report))
    """)
    process = run_python(harness, tmp_path)
    assert process.returncode == 0, process.stderr[-4000:]
    report = json.loads(process.stdout.strip().splitlines()[-1])
    for expected in ("toy-partitions/META.json", "toy-partitions/node_map.pt", "toy-partitions/edge_map.pt",
                     "toy-partitions/part_0/graph.pt", "toy-partitions/part_1/edge_feats.pt",
                     "toy-label/label.pt", "toy-train-partitions/partition1.pt"):
        assert expected in report["files"], report["files"]
    assert sorted(report["meta"]) == sorted(
        ["num_parts", "node_types", "edge_types", "node_offset", "is_hetero", "is_sorted"])
    assert "defaultdict" in report["before"] and report["before"].startswith("UnpicklingError"), report
    assert report["rewrite_rc"] == 0 and report["after"] == ["edge_attr", "x"], report
