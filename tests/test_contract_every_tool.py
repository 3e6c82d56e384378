"""One contract for every tool: the same bad-flag behaviour, --explain for every finding id, a finding
registry each test suite keeps honest, no tool importing another, and the generated bare-node bundle."""

import ast
import functools
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, assert_help_names, load_modules, pyenv_python, skill_tools, tree_state

SCRIPTS = ROOT / "scripts"
TROUBLESHOOTING = ROOT / "references" / "troubleshooting.md"
TOOLS = dict(skill_tools())  # entry file -> package: the one list, scripts/diagnostics_core/tools.py
LIBRARY = "diagnostics_core"


def registry(package):
    return json.loads((SCRIPTS / package / "findings.json").read_text())


def usage_id(tool):
    """The finding of a refused command line: the one id of the tool's registry that ends in usage-error."""
    [found] = [i for i in registry(TOOLS[tool]) if i.endswith("usage-error")]
    return found


EXPLAIN_MAX_LINES = 80


def run_tool(tool, *args, env=None, cwd=None, python=None):
    env = dict(os.environ if env is None else env)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode writing on: the tool itself must keep the folder clean
    return subprocess.run([str(python or sys.executable), str(SCRIPTS / (tool + ".py"))] + list(args),
                          capture_output=True, text=True, timeout=120, env=env, cwd=cwd or ROOT)


def listed_ids(tool):
    completed = run_tool(tool, "--list-findings")
    assert completed.returncode == 0, completed.stderr[-2000:]
    return [entry["id"] for entry in json.loads(completed.stdout)]


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_a_bad_flag_is_one_line_one_document_exit_2_and_writes_nothing(tool, tmp_path):
    before = tree_state(ROOT / "scripts", ROOT / "references")
    completed = run_tool(tool, "--no-such-flag", cwd=tmp_path)
    assert completed.returncode == 2
    assert len(completed.stderr.splitlines()) == 1, completed.stderr
    assert "--no-such-flag" in completed.stderr and "\x1b" not in completed.stderr
    document = json.loads(completed.stdout)  # exactly one document: json.loads refuses trailing text
    assert (document["ok"], document["status"], document["exit_code"], document["gates"]) == (
        False, "usage-error", 2, {})
    assert [f["id"] for f in document["findings"]] == [usage_id(tool)]
    fix = document["findings"][0]["fix"]
    assert fix.endswith("--help") and str(SCRIPTS / (tool + ".py")) in fix
    assert tree_state(ROOT / "scripts", ROOT / "references") == before
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_the_printed_usage_fix_works_from_another_folder(tool, tmp_path):
    fix = json.loads(run_tool(tool, "--no-such-flag").stdout)["findings"][0]["fix"]
    words = fix.split()
    assert words[0] == "python3" and words[-1] == "--help"
    completed = subprocess.run([sys.executable] + words[1:], capture_output=True, text=True, timeout=120,
                               cwd=tmp_path)
    assert completed.returncode == 0 and completed.stdout.startswith("usage: "), completed.stderr[-2000:]


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_every_finding_id_is_explained_in_one_short_section(tool):
    for finding_id in listed_ids(tool):
        completed = run_tool(tool, "--explain", finding_id)
        assert completed.returncode == 0, (finding_id, completed.stderr[-500:])
        lines = completed.stdout.splitlines()
        assert lines[0] == "### " + finding_id
        assert len(lines) <= EXPLAIN_MAX_LINES, "%s: %d lines" % (finding_id, len(lines))
        assert "**Fix:**" in completed.stdout, finding_id
        assert not any(re.match(r"#{1,3} ", line) for line in lines[1:]), finding_id


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_explaining_an_unknown_id_is_a_usage_error(tool):
    completed = run_tool(tool, "--explain", "no-such-finding")
    assert completed.returncode == 2 and len(completed.stderr.splitlines()) == 1
    document = json.loads(completed.stdout)
    assert document["status"] == "usage-error" and document["findings"][0]["fix"].endswith("--list-findings")


def test_explain_matches_the_documented_awk_line():
    """--explain prints what the reference's own extraction line prints, for every finding section."""
    text = TROUBLESHOOTING.read_text()
    documented = re.search(r"^awk -v h='### [^']*' '([^']*)' references/troubleshooting.md$", text, re.M)
    assert documented, "troubleshooting.md shows no awk extraction line"
    for tool in sorted(TOOLS):
        for finding_id in listed_ids(tool)[:8]:
            explained = run_tool(tool, "--explain", finding_id).stdout
            awk = subprocess.run(["awk", "-v", "h=### " + finding_id, documented.group(1), str(TROUBLESHOOTING)],
                                 capture_output=True, text=True, check=True).stdout
            assert explained.rstrip() == awk.rstrip(), finding_id


def reach(source, tree, function):
    """A test's own text: its decorators, its body and the module-level tables it names (the cases of a
    parametrised test)."""
    tables = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    tables[target.id] = ast.get_source_segment(source, node)
    text = "\n".join(ast.unparse(d) for d in function.decorator_list) + "\n" + ast.get_source_segment(source, function)
    named = {n.id for n in ast.walk(function) if isinstance(n, ast.Name)}
    return text + "".join("\n" + tables[name] for name in sorted(named & set(tables)))


@functools.lru_cache(maxsize=None)
def finding_marks():
    """finding id -> the tests that mark it with @pytest.mark.finding(...) and name it (quoted) in their own
    text (see reach): read from every test file (tests/ and the fast tier, tests/fast/), so one file run alone
    still sees all."""
    marked = {}
    for path in sorted((ROOT / "tests").glob("**/test_*.py")):
        source = path.read_text()
        tree = ast.parse(source)
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef):
                continue
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Call) and ast.unparse(decorator.func) == "pytest.mark.finding":
                    text = reach(source, tree, node).replace(ast.unparse(decorator), "")
                    for argument in decorator.args:
                        if re.search(r"[\"']%s[\"']" % re.escape(argument.value), text):
                            marked.setdefault(argument.value, []).append("%s::%s" % (path.name, node.name))
    return marked


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_registry_every_id_is_reproduced_by_a_marked_test_and_documented(tool):
    """Every id a tool lists is marked by a test that asserts it (names it in its own source), and has a doc
    section; a test's mark names only ids its tool or another tool lists."""
    marks = finding_marks()
    sections = set(re.findall(r"^### ([a-z0-9-]+)$", TROUBLESHOOTING.read_text(), re.M))
    ids = listed_ids(tool)
    unmarked = [i for i in ids if i not in marks]
    undocumented = [i for i in ids if i not in sections]
    assert not unmarked, "%s ids no test marks with @pytest.mark.finding and asserts: %s" % (tool, unmarked)
    assert not undocumented, "%s ids without a doc section: %s" % (tool, undocumented)


def test_marks_name_only_registered_ids():
    registered = set()
    for tool in TOOLS:
        registered.update(listed_ids(tool))
    unknown = sorted(set(finding_marks()) - registered)
    assert not unknown, "marked ids that no tool lists: %s" % unknown


def imported_modules(path):
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("tool", sorted(set(TOOLS) - {"ddp_neighbor_training"}))  # the recipe is its own code
def test_each_entry_file_imports_its_own_package_explicitly(tool):
    """A reader and import tools see which package an entry file runs: `import <package>` in the entry file
    itself (its __init__ holds constants; the cli loads after the metadata answers), handed to tool_main."""
    tree = ast.parse((SCRIPTS / (tool + ".py")).read_text())
    imported = [alias.name for node in tree.body if isinstance(node, ast.Import) for alias in node.names
                if alias.name not in ("os", "sys")]
    handed = [ast.unparse(node.args[0]) for node in ast.walk(tree) if isinstance(node, ast.Call)
              and ast.unparse(node.func) == "entry.tool_main"]
    assert imported == handed == [TOOLS[tool]]


def test_no_tool_imports_another_tool():
    names = set(TOOLS) | set(TOOLS.values())
    for tool, package in sorted(TOOLS.items()):
        files = [SCRIPTS / (tool + ".py")] + sorted((SCRIPTS / package).glob("*.py"))
        for path in files:
            wrong = imported_modules(path) & (names - {tool, package})
            assert not wrong, "%s imports %s" % (path.relative_to(ROOT), sorted(wrong))
    for path in sorted((SCRIPTS / LIBRARY).glob("*.py")):  # the library imports no tool
        wrong = imported_modules(path) & names
        assert not wrong, "%s imports %s" % (path.relative_to(ROOT), sorted(wrong))


def test_only_the_one_list_and_pyproject_name_every_tool():
    """pyproject.toml's console scripts, modules, packages and package data are the list's; no other code of the
    skill, its maintainers' scripts, its tests or CI names every tool (each reads the list instead), but for a
    test's per-tool table that the test itself pins to the list."""
    import tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    tools = load_modules(["diagnostics_core.tools"])
    assert project["project"]["scripts"] == {tools.console_script(t): "%s:main" % t for t in TOOLS}
    setuptools = project["tool"]["setuptools"]
    assert setuptools["py-modules"] == list(TOOLS)
    assert setuptools["packages"] == [LIBRARY] + list(TOOLS.values())
    data = setuptools["package-data"]
    assert sorted(data) == sorted([LIBRARY] + list(TOOLS.values()))
    assert all("findings.json" in data[package] for package in data)
    code = sorted(p for p in ROOT.glob("**/*.py") if not p.relative_to(ROOT).parts[0].startswith(".")) + [
        ROOT / ".ci" / "run"]
    every = [path for path in code if all(tool in path.read_text() for tool in TOOLS)]
    # A test's table of per-tool inputs is pinned to the list by that test itself (a new tool fails it loudly).
    unpinned = [path for path in every if path != SCRIPTS / LIBRARY / "tools.py"
                and "== sorted(dict(skill_tools()))" not in path.read_text()]
    assert unpinned == [], unpinned


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_each_tool_keeps_its_registry_beside_its_package_one_id_a_line(tool):
    """The metadata fast path finds an id by its line (diagnostics_core/fast.py): the layout is checked here,
    for each tool's registry; --list-findings lists it with the shared ids."""
    shared = registry(LIBRARY)
    for package in (TOOLS[tool], LIBRARY):
        text = (SCRIPTS / package / "findings.json").read_text()
        for finding_id, (severity, title) in json.loads(text).items():
            assert '\n  "%s": [' % finding_id in text, (package, finding_id)
            assert severity in ("error", "warning", "info") and title
    assert sorted(listed_ids(tool)) == sorted(set(registry(TOOLS[tool])) | set(shared))
    assert not set(registry(TOOLS[tool])) & set(shared)


def test_the_fast_metadata_answers_match_argparse(tmp_path):
    """--help, --list-findings and --explain ID answered before argparse print what the runner prints."""
    slow = ("import importlib, sys; sys.argv[0] = '{tool}.py'; sys.path.insert(0, %r); "
            "from diagnostics_core import runner; "
            "sys.exit(runner.main(importlib.import_module('{package}.cli').SPEC, sys.argv[1:]))")
    for tool, package in sorted(TOOLS.items()):
        for args in (["--list-findings"], ["--list-findings", "--pretty"], ["--explain", usage_id(tool)], ["--help"]):
            fast = run_tool(tool, *args, env=dict(os.environ, COLUMNS="80"))
            full = subprocess.run([sys.executable, "-c", slow.format(tool=tool, package=package) % str(SCRIPTS), *args],
                                  capture_output=True, text=True, timeout=120, env=dict(os.environ, COLUMNS="80"),
                                  cwd=tmp_path)
            assert fast.returncode == full.returncode == 0 and fast.stdout == full.stdout, (tool, args)


def test_the_bundle_is_what_the_build_script_writes():
    completed = subprocess.run([sys.executable, str(ROOT / "maintainers" / "build_bundle.py"), "--check"],
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr


def test_the_bundle_runs_alone_on_python_3_8_in_an_empty_folder(tmp_path):
    python = pyenv_python("3.8")
    shutil.copy(SCRIPTS / "check_sampling_backends.pyz", tmp_path)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}
    completed = subprocess.run([str(python), "check_sampling_backends.pyz", "--static-only"], capture_output=True,
                               text=True, timeout=120, cwd=tmp_path, env=env)
    assert completed.returncode == 0, completed.stderr[-2000:]
    document = json.loads(completed.stdout)
    assert document["status"] == "incomplete" and document["python"]["version"].startswith("3.8.")
    explained = subprocess.run([str(python), "check_sampling_backends.pyz", "--explain", "torch-not-installed"],
                               capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert explained.returncode == 0 and explained.stdout.startswith("### torch-not-installed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["check_sampling_backends.pyz"]  # nothing written


def test_the_bundle_probes_a_torch_environment_from_an_empty_folder(tmp_path):
    """The child probe runs from inside the zipapp too."""
    shutil.copy(SCRIPTS / "check_sampling_backends.pyz", tmp_path)
    # --full: the compact document trims fixes to a budget that a long HOME uses up.
    completed = subprocess.run([sys.executable, "check_sampling_backends.pyz", "--full"], capture_output=True,
                               text=True, timeout=180, cwd=tmp_path)
    document = json.loads(completed.stdout)
    assert document["checker"]["mode"] == "full" and document["torch"]["status"] == "ok", completed.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["check_sampling_backends.pyz"]
    # The bundle holds the checker alone: a fix naming another script says where that script is.
    fixes = {f["id"]: f["fix"] or "" for f in document["findings"]}
    assert not [fix for fix in fixes.values() if ".pyz/" in fix], fixes
    if "pyg-distributed-deprecated" in fixes:  # PyG >= 2.7
        assert fixes["pyg-distributed-deprecated"].startswith(
            "python3 scripts/ddp_neighbor_training.py --help  # from the skill's folder"), fixes
