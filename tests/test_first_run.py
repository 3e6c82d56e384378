"""The first hour with the project, replayed: every "What was seen" item of issue 11.

Each test takes the step a new user (or an agent) takes on a fresh machine:
README's commands, `uv run`, an old or foreign interpreter, --static-only,
a report to paste into an issue, installing the skill, and asserts what
they see now.
"""

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CHECKER, ENABLE, ROOT, clean_env, diagnoses, invoke_checker, load_checker, pyenv_python

README = ROOT / "README.md"
DDP = ROOT / "scripts" / "ddp_neighbor_training.py"
TOOLS = ("check_sampling_backends", "check_store_contract", "check_partition", "ddp_neighbor_training",
         "compare_reports", "profile_loader")


def readme_line_after(marker):
    lines = README.read_text().splitlines()
    index = next(i for i, line in enumerate(lines) if marker in line)
    return lines[index + 1]


def plain_run(command, env=None, cwd=None, timeout=300):
    return subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=timeout,
                          env=env if env is not None else clean_env(), cwd=cwd, stdin=subprocess.DEVNULL)


def one_line_refusal(completed, finding_id):
    """Exit 2, one clean stderr line, and a JSON document on stdout naming the finding."""
    assert completed.returncode == 2, completed.stderr
    assert len(completed.stderr.strip().splitlines()) == 1, completed.stderr
    assert "Traceback" not in completed.stderr + completed.stdout
    document = json.loads(completed.stdout)
    assert document["status"] == "usage-error" and document["exit_code"] == 2 and document["ok"] is False
    assert [f["id"] for f in document["findings"]] == [finding_id]
    return document


# ---------------------------------------------------------------------------
# README's quick start
# ---------------------------------------------------------------------------

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


@pytest.mark.parametrize("minor", ["3.9", "3.12"])
def test_torch_install_fix_is_pinned_and_cpu_only_without_a_gpu(minor):
    python = pyenv_python(minor)
    result = invoke_checker("--python", python)  # the full probe: NVML is asked and sees no GPU
    found = result.only("torch-not-installed")
    assert found["evidence"]["gpu_seen"] is False
    assert "torch==2.13.0+cpu --index-url https://download.pytorch.org/whl/cpu" in found["fix"]
    if minor == "3.9":  # torch 2.13 cannot install there: a newer Python's venv, not a failing pip line
        assert found["fix"].startswith("torch 2.13.0 and PyG 2.8 need Python 3.10+")
        assert "-m pip install" not in found["fix"].split("python3.11 -m venv")[0]
    else:  # pyenv's Python is no venv: the fix makes the one venv first, then installs into it
        assert found["fix"].startswith("%s -m venv ~/.venvs/scalable-distributed && "
                                       "~/.venvs/scalable-distributed/bin/python -m pip install torch==2.13.0"
                                       % shlex.quote(str(python)))
    # A torch PyG's wheels cover: pyg-lib has a wheel for the pinned minor on this platform.
    checker = load_checker()
    minor = checker.TORCH_PIN.rsplit(".", 1)[0]
    assert checker.wheel_status("pyg-lib", minor, "cpu", "linux-x86_64", (3, 11))["wheel"] is True


# ---------------------------------------------------------------------------
# uv run / pipx run: the interpreter that runs the script is not the user's
# ---------------------------------------------------------------------------

def make_throwaway_env(root, tool="uv"):
    """A venv without pip and without torch where `uv run` (PEP 723) or `pipx run` puts one."""
    if tool == "uv":
        prefix = root / "cache" / "uv" / "environments-v2" / "check-sampling-backends-0123456789abcdef"
    else:
        prefix = root / ".local" / "pipx" / ".cache" / "0123456789abcde"
    base = pyenv_python("3.12")
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=120)
    if tool == "uv":  # uv writes its name into pyvenv.cfg
        with open(prefix / "pyvenv.cfg", "a") as handle:
            handle.write("uv = 0.13.9\n")
    return prefix


def the_real_venv():
    """The venv running the tests: it has torch (and pip)."""
    assert sys.prefix != sys.base_prefix, "the tests run in a venv (README's test command makes one)"
    return Path(sys.prefix)


def uv_like_env(throwaway, user_venv):
    """What `uv run` leaves: VIRTUAL_ENV names its own env; the activated venv's bin stays on PATH."""
    return clean_env({"VIRTUAL_ENV": str(throwaway),
                      "PATH": os.pathsep.join([str(throwaway / "bin"), str(user_venv / "bin"), SYSTEM_PATH])})


SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"  # no venv on it, whatever the test runner activated


@diagnoses("interpreter-not-active")
def test_uv_run_probes_the_activated_venv_not_its_throwaway_env(tmp_path):
    throwaway, user_venv = make_throwaway_env(tmp_path), the_real_venv()
    result = invoke_checker("--static-only", python=throwaway / "bin" / "python",
                            env=uv_like_env(throwaway, user_venv))
    assert result.returncode == 0
    choice = result.json["interpreter"]
    assert choice["chosen_by"] == "active-environment" and choice["running_ephemeral"] == "uv"
    assert choice["probed_is_active"] is True
    assert Path(choice["probed"]).parent.parent == user_venv
    assert result.json["torch_build"]["found"] is True  # the user's torch, found
    assert "torch-not-installed" not in result.ids()
    assert "the active environment" in result.stderr and "throwaway uv environment" in result.stderr
    # Explicit --python elsewhere: probed as asked, and said so (info: the user chose it).
    other = invoke_checker("--static-only", "--python", throwaway / "bin" / "python",
                           env=clean_env({"VIRTUAL_ENV": str(user_venv)}))
    found = other.only("interpreter-not-active")
    assert found["severity"] == "info" and found["evidence"]["active_environment"] == str(user_venv)
    assert found["fix"] == "python3 %s --python %s" % (CHECKER, shlex.quote(str(user_venv / "bin" / "python")))
    assert "is not the active environment" in other.stderr


def test_a_real_venv_run_while_another_is_active_is_probed_and_flagged(tmp_path):
    """No surprise switch away from an interpreter that is itself a venv; a warning instead."""
    stale = tmp_path / "stale-venv"
    stale.mkdir()
    result = invoke_checker("--static-only", env=clean_env({"VIRTUAL_ENV": str(stale)}))
    assert result.json["interpreter"]["chosen_by"] == "running"
    found = result.only("interpreter-not-active")
    assert found["severity"] == "warning"
    assert "has no bin/python" in found["fix"]


@diagnoses("interpreter-ephemeral")
@pytest.mark.parametrize("tool", ["uv", "pipx"])
def test_throwaway_env_with_no_active_venv_says_so_and_prints_no_pip_fix(tmp_path, tool):
    throwaway = make_throwaway_env(tmp_path, tool)
    env = clean_env(dict({"VIRTUAL_ENV": str(throwaway)} if tool == "uv" else {}, PATH=SYSTEM_PATH))
    result = invoke_checker("--static-only", python=throwaway / "bin" / "python", env=env)
    found = result.only("interpreter-ephemeral")
    assert found["evidence"]["tool"] == tool
    assert result.json["python"]["pip"] is False
    torch_fix = result.only("torch-not-installed")["fix"]
    python = str(throwaway / "bin" / "python")
    assert "%s -m pip" % python not in torch_fix  # that env has no pip
    assert torch_fix.startswith("not into this throwaway %s env" % tool)
    for item in result.json["findings"]:
        assert "%s -m pip" % python not in (item["fix"] or ""), item


def test_pip_less_venvs_get_fixes_that_run(tmp_path):
    """A uv-made venv gets `uv pip ... --python`; a plain pip-less venv runs ensurepip first."""
    base = pyenv_python("3.12")
    for name, tool_line, expected in (("uv-venv", "uv = 0.13.9\n", "uv pip install --python "),
                                      ("bare-venv", "", "-m ensurepip --upgrade && ")):
        prefix = tmp_path / name
        subprocess.run([str(base), "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=120)
        with open(prefix / "pyvenv.cfg", "a") as handle:
            handle.write(tool_line)
        python = prefix / "bin" / "python"
        result = invoke_checker("--static-only", "--python", python)
        fix = result.only("torch-not-installed")["fix"]
        assert expected in fix, fix
        for item in result.json["findings"]:  # every fix, not only this one: each site must adapt
            other = item["fix"] or ""
            assert "%s -m pip" % python not in other or other.startswith("%s -m ensurepip" % python), item
        if name == "uv-venv":
            assert "%s -m pip" % python not in fix
            assert fix.startswith("uv pip install --python %s torch==2.13.0" % python)


@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not on PATH; enable: " + ENABLE["uv"])
def test_a_uv_venv_gets_a_removal_that_real_uv_runs(tmp_path):
    """legacy-extension-ignored in a pip-less uv venv with no torch (so no wheel index is known): the fix is
    the removal alone, without -y (uv before astral-sh/uv#19082 refuses it), and the real uv runs it."""
    prefix = tmp_path / "uv-venv"
    subprocess.run([str(pyenv_python("3.12")), "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=120)
    with open(prefix / "pyvenv.cfg", "a") as handle:
        handle.write("uv = 0.13.9\n")
    site = next((prefix / "lib").glob("python3.*/site-packages"))
    (site / "torch_cluster").mkdir()
    (site / "torch_cluster" / "__init__.py").write_text("")
    info = site / "torch_cluster-1.6.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch-cluster\nVersion: 1.6.3\n")
    (info / "RECORD").write_text("".join("%s,,\n" % name for name in (
        "torch_cluster/__init__.py", "torch_cluster-1.6.3.dist-info/METADATA", "torch_cluster-1.6.3.dist-info/RECORD")))
    python = prefix / "bin" / "python"
    fix = invoke_checker("--static-only", "--python", python).only("legacy-extension-ignored")["fix"]
    assert fix == "uv pip uninstall --python %s torch-cluster" % python, fix
    completed = plain_run(shlex.split(fix), env=dict(os.environ, UV_CACHE_DIR=str(tmp_path / "uv-cache")),
                          cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert not info.exists() and not (site / "torch_cluster").exists()
    assert "legacy-extension-ignored" not in invoke_checker("--static-only", "--python", python).ids()


@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not on PATH; enable: " + ENABLE["uv"])
def test_real_uv_run_with_the_pep723_header(tmp_path):
    user_venv = the_real_venv()
    env = clean_env({"VIRTUAL_ENV": str(user_venv), "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
                     "PATH": os.pathsep.join([str(user_venv / "bin"), os.environ.get("PATH", "")])})
    completed = plain_run(["uv", "run", "--quiet", str(CHECKER), "--static-only"], env=env, cwd=tmp_path)
    document = json.loads(completed.stdout)
    assert document["interpreter"]["running_ephemeral"] == "uv", document["interpreter"]
    assert document["interpreter"]["probed_is_active"] is True
    assert "torch-not-installed" not in [f["id"] for f in document["findings"]]


# ---------------------------------------------------------------------------
# Clear refusals
# ---------------------------------------------------------------------------

@diagnoses("interpreter-unsupported")
@pytest.mark.parametrize("version", ["2.7", "3.6", "3.7"])
def test_old_python_is_refused_as_probe_target_and_as_runner(version):
    python = pyenv_python(version)
    probed = plain_run([sys.executable, CHECKER, "--python", python])
    document = one_line_refusal(probed, "interpreter-unsupported")
    evidence = document["findings"][0]["evidence"]
    assert evidence["version"].startswith(version + ".") and evidence["is_python"] is True
    assert "needs Python 3.8+" in probed.stderr or "probes CPython 3.8+" in probed.stderr
    # The checker itself started by that Python: the same clean refusal, no traceback, not exit 1.
    ran = plain_run([python, CHECKER])
    document = one_line_refusal(ran, "interpreter-unsupported")
    assert "the checker needs Python 3.8+" in ran.stderr
    assert document["findings"][0]["evidence"]["python"].startswith(version + ".")


def test_the_checker_stays_parseable_by_python_2_7():
    """The refusal above can only run if 2.7 compiles the whole file."""
    python = pyenv_python("2.7")
    code = "import sys; compile(open(sys.argv[1]).read(), sys.argv[1], 'exec')"
    completed = plain_run([python, "-c", code, CHECKER])
    assert completed.returncode == 0, completed.stderr


@pytest.mark.parametrize("kind", ["shell-script-named-python", "bash"])
def test_an_executable_that_is_not_python_is_refused(tmp_path, kind):
    if kind == "bash":
        target = shutil.which("bash")  # never run: `bash -c CODE` would run the probe as shell
    else:
        target = tmp_path / "python3"
        target.write_text("#!/bin/sh\necho hello\n")
        target.chmod(0o755)
    document = one_line_refusal(plain_run([sys.executable, CHECKER, "--python", target]),
                                "interpreter-unsupported")
    assert document["findings"][0]["evidence"]["is_python"] is False


@diagnoses("usage-error")
def test_static_only_gate_is_a_usage_error_with_a_finding():
    for gate in (["--require-neighbor-backend"], ["--require-cuda"], ["--require-distributed", "gloo"]):
        completed = plain_run([sys.executable, CHECKER, "--static-only"] + gate)
        document = one_line_refusal(completed, "usage-error")
        assert "needs the full probe" in completed.stderr
        assert document["findings"][0]["fix"] == "python3 %s %s" % (CHECKER, " ".join(gate))


def test_static_only_never_claims_what_it_did_not_probe(run_checker):
    result = run_checker("--static-only")
    assert result.json["status"] == "incomplete" or result.json["status"] == "error"
    assert result.json["status"] != "ok"
    sampling = result.json["sampling"]
    assert set(sampling["features"].values()) == {None}
    assert {s["passed"] for s in sampling["smoke"].values()} == {None}
    assert {e["status"] for e in result.json["extensions"].values()} == {"not-probed"}
    for section in ("torch", "cuda", "distributed", "pyg"):
        assert result.json[section] == {"status": "not-probed"}


def test_ddp_recipe_help_and_refusal_without_torch():
    python = pyenv_python("3.12")
    helped = plain_run([python, DDP, "--help"])
    assert helped.returncode == 0 and helped.stdout.startswith("usage: ddp_neighbor_training.py")
    refused = plain_run([python, DDP, "--nprocs", "2"])
    assert refused.returncode == 2
    assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
    assert "No module named 'torch'" in refused.stderr and "-m pip install torch==2.13.0" in refused.stderr


def test_ddp_recipe_parses_its_arguments_before_importing_torch():
    import ast
    tree = ast.parse(DDP.read_text())
    top_imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    names = {alias.name.split(".")[0] for node in top_imports for alias in getattr(node, "names", [])}
    modules = {node.module.split(".")[0] for node in top_imports if isinstance(node, ast.ImportFrom)}
    assert not ({"torch", "torch_geometric"} & (names | modules))


# ---------------------------------------------------------------------------
# One meaning of ok and exit codes
# ---------------------------------------------------------------------------

def test_help_schema_and_docs_say_what_ok_and_each_exit_code_mean(run_checker, output_schema):
    text = run_checker("--help", expect_json=False).stdout
    assert '"ok" is true when there is no finding of severity error, no failed gate and' in text
    assert '"ok": false with exit 0 means' in text
    assert output_schema["properties"]["ok"]["description"] == "no error finding, no failed gate, no internal error"
    assert output_schema["properties"]["exit_code"]["enum"] == [0, 1, 2, 3]
    assert "incomplete" in output_schema["properties"]["status"]["enum"]
    assert "MAJOR changes when a key" in output_schema["description"]
    skill = (ROOT / "SKILL.md").read_text()
    assert "`ok` and the exit codes mean the same in every script" in skill


# ---------------------------------------------------------------------------
# Output for people as well as agents
# ---------------------------------------------------------------------------

def full_probe(*args, python=None):
    return invoke_checker(*args, python=python, detail="compact")


def test_compact_json_fits_agent_harnesses_and_full_keeps_the_bulk(neighbor_backend):
    compact = full_probe()
    assert compact.returncode == 0
    assert compact.json["sampling"]["neighbor_backend"] is not None  # a typical working environment
    assert len(compact.stdout) <= 10000, len(compact.stdout)
    assert list(compact.json)[4] == "findings"  # what is wrong comes first
    full = full_probe("--full")
    assert full.json["checker"]["detail"] == "full" and compact.json["checker"]["detail"] == "compact"
    assert len(full.stdout) > len(compact.stdout)
    assert any("ops" in entry for entry in full.json["extensions"].values())
    assert not any("ops" in entry for entry in compact.json["extensions"].values())


def test_compact_json_without_a_backend_also_fits():
    result = full_probe()
    assert len(result.stdout) <= 10000, len(result.stdout)


def test_markdown_report_is_short_redacted_and_has_versions_and_fixes(tmp_path):
    completed = plain_run([sys.executable, CHECKER, "--format", "markdown"], cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    report = completed.stdout
    lines = report.splitlines()
    assert len(lines) < 80, len(lines)
    assert lines[0].startswith("### PyG environment")
    assert "| component | version (state) |" in report and "| torch |" in report and "| PyG |" in report
    assert "#### Findings" in report and "  fix: `" in report
    home, host = os.path.expanduser("~"), os.uname().nodename
    assert home not in report and host not in report
    assert "redacted" in report
    unredacted = plain_run([sys.executable, CHECKER, "--format", "markdown", "--no-redact"], cwd=tmp_path).stdout
    assert sys.executable in unredacted


def test_markdown_redacts_job_node_lists_and_master_addr(tmp_path):
    env = clean_env({"SLURM_JOB_NODELIST": "gpu-node[017-019]", "MASTER_ADDR": "gpu-node017.cluster.example",
                     "MASTER_PORT": "29500"})
    report = plain_run([sys.executable, CHECKER, "--static-only", "--format", "markdown"], env=env).stdout
    assert "gpu-node" not in report and "cluster.example" not in report


def test_a_normal_run_ends_with_a_one_screen_summary_on_stderr():
    result = full_probe()
    summary = result.stderr.split("check_sampling_backends: %s (exit" % result.json["status"], 1)
    assert len(summary) == 2, result.stderr
    assert len(summary[1].splitlines()) <= 20
    for item in result.json["findings"]:
        if item["severity"] == "error":
            assert item["id"] in summary[1]


# ---------------------------------------------------------------------------
# Small things users trip on
# ---------------------------------------------------------------------------

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


def test_docs_path_points_at_the_troubleshooting_file(run_checker):
    path = run_checker("--static-only").json["checker"]["docs_path"]
    assert path and os.path.isfile(path) and path.endswith("references/troubleshooting.md")


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
