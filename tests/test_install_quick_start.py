"""README's quick start and the skill install, replayed as a new user takes them on a fresh machine:
the two commands, the Python floors, the console scripts, what a wheel ships and what the install copies."""

import json
import os
import re
import shlex
import shutil
import sys

import pytest

from conftest import ENABLE, ROOT, clean_env, plain_run, pyenv_python
from test_contract_every_tool import TOOLS as CONTRACT_TOOLS


README = ROOT / "README.md"


TOOLS = tuple(sorted(CONTRACT_TOOLS))  # every tool the contract tests cover


def readme_line_after(marker):
    lines = README.read_text().splitlines()
    index = next(i for i, line in enumerate(lines) if marker in line)
    return lines[index + 1]


def test_readme_quick_start_is_two_commands_with_a_venv_outside_the_skill():
    block = README.read_text().split("## Quick start (fresh machine)", 1)[1].split("```bash\n", 1)[1]
    commands = [line for line in block.split("```", 1)[0].splitlines() if line and not line.startswith("#")]
    assert len(commands) == 2
    assert commands[0].startswith("python3 scripts/check_sampling_backends.py")
    test_command = readme_line_after("<!-- test-command -->")
    assert test_command == commands[1]
    assert test_command == ('python3 -m venv ~/.venvs/scalable-distributed && ~/.venvs/scalable-distributed/bin/'
                            'python -m pip install torch==2.13.0+cpu --extra-index-url https://download.pytorch.org/whl/cpu && '
                            '~/.venvs/scalable-distributed/bin/python -m pip install -e ".[pyg,test]" && '
                            '~/.venvs/scalable-distributed/bin/python -m pytest -q')


def test_readme_states_the_real_python_floors():
    """torch 2.13 and PyG 2.8 declare 3.10+; the README must not promise the test command on 3.8."""
    text = README.read_text()
    assert "Python 3.8+" in text and "Python 3.10+" in text
    code = ("import json, importlib.metadata as m; print(json.dumps({d: m.metadata(d)['Requires-Python'] "
            "for d in ('torch', 'torch_geometric')}))")
    declared = json.loads(plain_run([sys.executable, "-c", code]).stdout)
    assert declared == {"torch": ">=3.10", "torch_geometric": ">=3.10"}
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'requires-python = ">=3.8"' in pyproject  # the checker's own floor


def test_readme_first_command_exits_zero_on_a_python_without_torch():
    python = pyenv_python("3.12")
    command = shlex.split(readme_line_after("```bash"))
    assert command[:2] == ["python3", "scripts/check_sampling_backends.py"]
    completed = plain_run([python] + command[1:], cwd=ROOT)
    assert completed.returncode == 0, completed.stderr
    assert "`torch-not-installed`" in completed.stdout
    assert "Traceback" not in completed.stderr


def test_scripts_are_committed_with_their_run_bit():
    listed = plain_run(["git", "ls-files", "-s", "scripts"], cwd=ROOT).stdout
    if not listed:
        pytest.skip("not a git checkout (an installed copy of the skill)")
    modes = {line.split()[3]: line.split()[0] for line in listed.splitlines()}
    for name in TOOLS:
        assert modes["scripts/%s.py" % name] == "100755", name
    assert not [path for path in modes if path.startswith("scripts/") and ("benchmark" in path or "build_bundle" in path)]


def test_one_console_script_per_tool_named_as_typed():
    import tomllib
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {tool.replace("_", "-"): "%s:main" % tool for tool in TOOLS}
    # argparse takes the program name from what was typed, so a console script says its own name.
    code = ("import sys; sys.path.insert(0, %r); sys.argv[0] = '/venv/bin/check-sampling-backends'; "
            "import check_sampling_backends as c; c.main(['--help'])" % str(ROOT / "scripts"))
    completed = plain_run([sys.executable, "-B", "-c", code])
    assert completed.stdout.startswith("usage: check-sampling-backends "), completed.stdout[:200]


def test_wheel_ships_every_tool_and_the_docs_its_findings_point_at(tmp_path):
    pytest.importorskip("setuptools", reason="building the wheel needs setuptools in this venv")
    import zipfile
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", "__pycache__", ".venv", "tests"))
    completed = plain_run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", tmp_path / "dist", source], cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for tool in TOOLS:
        assert "%s.py" % tool in names
    # The packages behind the entry files, with the data they read (registry, help texts).
    for data in ("sampling_checker/findings.json", "diagnostics_core/generated/check_sampling_backends.help.txt",
                 "store_checker/findings.json", "ddp_recipe/findings.json", "partition_checker/rules.py",
                 "cluster_compare/cli.py", "diagnostics_core/generated/ddp_neighbor_training.help.txt"):
        assert data in names, data
    assert any(n.endswith(".data/data/share/scalable-distributed/references/troubleshooting.md") for n in names)
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    for tool in TOOLS:
        assert "%s = %s:main" % (tool.replace("_", "-"), tool) in entry_points


def test_install_command_copies_only_the_skill(tmp_path):
    """From a clone where the quick start's -e install and a `pip install .` left their output."""
    pytest.importorskip("setuptools", reason="building needs setuptools in this venv")
    home, clone = tmp_path / "home", tmp_path / "scalable-distributed"
    home.mkdir()
    shutil.copytree(ROOT, clone, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", "build"))
    shipped = sorted(["SKILL.md", "LICENSE"] + [str(p.relative_to(clone)) for d in ("references", "scripts")
                                               for p in (clone / d).rglob("*") if p.is_file()])
    command = readme_line_after("<!-- install-command -->")
    assert command.startswith("mkdir -p ~/.claude/skills/scalable-distributed && ")
    assert "```bash\n%s\n```" % command in (ROOT / "SKILL.md").read_text()  # the installed SKILL.md has it
    # What the quick start's `pip install -e` and a `pip install .` write into the clone: egg-info under
    # scripts/ and build/ (a wheel build writes both), and __pycache__ from importing the scripts.
    built = plain_run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                       "-w", tmp_path / "dist", clone], cwd=tmp_path)
    assert built.returncode == 0, built.stderr[-2000:]
    assert list((clone / "scripts").glob("*.egg-info")) and (clone / "build").is_dir()
    (clone / "scripts" / "__pycache__").mkdir(exist_ok=True)
    (clone / "scripts" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"")
    (clone / "scripts" / "build").mkdir()  # a stray build folder inside scripts/ as well
    completed = plain_run(["bash", "-c", command], env=dict(clean_env(), HOME=str(home)), cwd=clone)
    assert completed.returncode == 0, completed.stderr
    installed = home / ".claude" / "skills" / "scalable-distributed"
    assert sorted(p.name for p in installed.iterdir()) == ["LICENSE", "SKILL.md", "references", "scripts"]
    tree = sorted(str(p.relative_to(installed)) for p in installed.rglob("*") if p.is_file())
    assert tree == shipped
    assert not any(part in ("tests", ".venv", "__pycache__", "build") or part.endswith(".egg-info")
                   for p in installed.rglob("*") for part in p.relative_to(installed).parts)
    assert os.access(installed / "scripts" / "check_sampling_backends.py", os.X_OK)
    skill = (ROOT / "SKILL.md").read_text()
    for text in ("~/.claude/skills/scalable-distributed/", ".claude/skills/scalable-distributed/",
                 "/scalable-distributed", "disable-model-invocation: true"):
        assert text in skill
    readme = README.read_text()
    assert "must be\nnamed `scalable-distributed`" in readme or "must be named `scalable-distributed`" in readme


def test_readme_lists_every_skip_with_its_enabling_command():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Skipped tests", 1)[1].split("\n## ", 1)[0]
    for command in ("pyenv install 3.12", "torch-sparse==0.6.18", "python3 -m pip install uv",
                    "apt-get install -y strace", "apt-get install -y iproute2",
                    "~/.cache/pyg-skill-ci/cu130/bin/python -m pip install torch==2.14.1"):
        assert command in section, command
    for key, text in ENABLE.items():  # what the skip texts say is in README too
        first = text.split(" (")[0].split(", or")[0].format(minor="3.12")
        assert first.split(" && ")[-1] in readme, (key, first)
    assert re.search(r"on 2 cores the tests take about \d+ minutes without a sampling backend", readme)
