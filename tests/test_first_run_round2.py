"""The first hour, round 2 (issue 23): each test replays a step a new user or agent took.

A long interpreter path, fixes run from another folder, `uv run` with another venv first on PATH,
`--wheels` instead of reading the checker's source, one meaning per finding id, a base Python's
torch install, a source build's prerequisites, and the skips' enabling commands.
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import (CHECKER, ENABLE, ROOT, clean_env, diagnoses, invoke_checker, load_schema, make_linked_venv,
                      pyenv_python, python_candidates, validate)

BACKENDS = ("pyg_lib", "torch_sparse", "torch_scatter")
BUDGET = 10000


def plain_run(command, env=None, cwd=None, timeout=300):
    return subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=timeout,
                          env=env if env is not None else clean_env(), cwd=cwd, stdin=subprocess.DEVNULL)


def deep_venv(root, length, exclude=()):
    """A real venv (this one's packages, linked) whose bin/python path is exactly `length` characters."""
    tail = "/venv/bin/python"
    folder = str(root)
    need = length - len(tail) - len(folder)
    assert need >= 2, "the temp folder is already longer than the path asked for"
    while need:
        step = min(61, need) - (1 if need - min(61, need) == 1 else 0)  # "/" + at least one character
        folder += "/" + "x" * (step - 1)
        need -= step
    os.makedirs(folder)
    python = make_linked_venv(folder + "/venv", exclude)
    assert len(str(python)) == length, python
    return python


# ---------------------------------------------------------------------------
# The compact document's budget holds by construction
# ---------------------------------------------------------------------------

def compact_run(python):
    result = invoke_checker(python=python, detail="compact")
    validate(result.json, load_schema())
    return result


def test_compact_json_fits_with_a_150_character_interpreter_path_without_a_backend(tmp_path):
    python = deep_venv(tmp_path, 150, exclude=BACKENDS)
    result = compact_run(python)
    assert result.json["sampling"]["neighbor_backend"] is None
    assert "neighbor-sampling-unavailable" in result.ids()
    assert len(result.stdout) < BUDGET, len(result.stdout)
    # What the user needs is there: every error and warning with its exact fix, naming this interpreter.
    fix = result.only("neighbor-sampling-unavailable")["fix"]
    assert fix.startswith(str(python) + " -m pip install")


def test_compact_json_fits_with_a_150_character_interpreter_path_with_a_backend(tmp_path, neighbor_backend):
    python = deep_venv(tmp_path, 150)
    result = compact_run(python)
    assert result.json["sampling"]["neighbor_backend"] is not None
    assert len(result.stdout) < BUDGET, len(result.stdout)


def test_a_path_too_long_for_the_whole_document_is_trimmed_visibly(tmp_path):
    """A 1,500-character interpreter path: the document still fits, and says what it cut."""
    python = deep_venv(tmp_path, 1500, exclude=BACKENDS)
    result = compact_run(python)
    assert len(result.stdout) < BUDGET, len(result.stdout)
    trimmed = result.json["checker"]["trimmed"]
    assert trimmed["cut"] and "--full" in trimmed["why"]
    errors = [f for f in result.json["findings"] if f["severity"] == "error"]
    assert errors and all(f["fix"] and f["title"] for f in errors)
    full = invoke_checker("--full", python=python)
    assert "trimmed" not in full.json["checker"] and len(full.stdout) > BUDGET


# ---------------------------------------------------------------------------
# Fixes run from any folder
# ---------------------------------------------------------------------------

def test_printed_fixes_name_scripts_by_absolute_path_and_run_from_another_folder(tmp_path):
    result = invoke_checker("--static-only")
    for item in result.json["findings"]:
        fix = item["fix"] or ""
        assert "python scripts/" not in fix and "python3 scripts/" not in fix, item
    deprecated = result.only("pyg-distributed-deprecated")["fix"].split("  #")[0]
    assert deprecated == "python3 %s --help" % (ROOT / "scripts" / "ddp_neighbor_training.py")
    ran = plain_run(["bash", "-c", deprecated], cwd="/")
    assert ran.returncode == 0 and ran.stdout.startswith("usage: ddp_neighbor_training.py"), ran.stderr
    # A usage error's fix, run from / as printed: the checker itself, by absolute path.
    refused = plain_run([sys.executable, CHECKER, "--static-only", "--require-cuda"], cwd=tmp_path)
    fix = json.loads(refused.stdout)["findings"][0]["fix"]
    assert fix == "python3 %s --require-cuda" % CHECKER
    again = plain_run(["bash", "-c", fix.replace("python3", shlex.quote(sys.executable), 1)], cwd="/")
    assert again.returncode in (0, 1) and json.loads(again.stdout)["gates"]["cuda"]["passed"] is False


# ---------------------------------------------------------------------------
# uv run with another venv's bin/ ahead of the activated one
# ---------------------------------------------------------------------------

def find_uv():
    """uv on PATH, or where .ci/run puts it; skips naming the command that installs it."""
    found = shutil.which("uv") or shutil.which("uv", path=str(Path.home() / ".cache" / "pyg-skill-ci" / "bin"))
    if not found:
        pytest.skip("uv is not on PATH; enable: " + ENABLE["uv"])
    return found


@diagnoses("interpreter-not-active")
def test_uv_run_probes_virtual_env_not_the_first_venv_on_path(tmp_path):
    uv = find_uv()
    user_venv = Path(sys.prefix)  # the activated venv: it has torch
    other = tmp_path / "other-venv"  # another project's venv, first on PATH, without torch
    subprocess.run([str(pyenv_python("3.12")), "-m", "venv", "--without-pip", str(other)], check=True, timeout=120)
    env = clean_env({"VIRTUAL_ENV": str(user_venv), "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
                     "PATH": os.pathsep.join([str(other / "bin"), str(user_venv / "bin"),
                                              os.path.dirname(uv), "/usr/local/bin:/usr/bin:/bin"])})
    completed = plain_run([uv, "run", "--quiet", CHECKER, "--static-only"], env=env, cwd=tmp_path)
    document = json.loads(completed.stdout)
    choice = document["interpreter"]
    assert choice["running_ephemeral"] == "uv", choice
    assert choice["active_environment"]["source"] == "VIRTUAL_ENV"
    assert Path(choice["probed"]).parent.parent == user_venv and choice["probed_is_active"] is True
    assert document["torch_build"]["found"] is True
    assert "probing %s" % choice["probed"] in completed.stderr


# ---------------------------------------------------------------------------
# --wheels: the wheel table without reading the source
# ---------------------------------------------------------------------------

def test_wheels_answers_for_a_torch_build_without_probing():
    completed = plain_run([sys.executable, CHECKER, "--wheels", "2.14.1+cu126"])
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    assert (report["torch"], report["torch_minor"], report["variant"]) == ("2.14.1", "2.14", "cu126")
    rows = {e["distribution"]: e for e in report["extensions"]}
    assert sorted(rows) == ["pyg-lib", "torch-cluster", "torch-scatter", "torch-sparse", "torch-spline-conv"]
    assert rows["pyg-lib"]["wheel"] is True and rows["pyg-lib"]["source"] and rows["pyg-lib"]["source_date"]
    assert rows["pyg-lib"]["install"] == ("python3 -m pip install --only-binary=:all: pyg_lib -f "
                                          "https://data.pyg.org/whl/torch-2.14.0+cu126.html")
    assert rows["torch-scatter"]["wheel"] is False and "pytorch_scatter#513" in rows["torch-scatter"]["source"]
    assert "--no-build-isolation torch-scatter==2.1.2" in rows["torch-scatter"]["install"]
    assert rows["torch-sparse"]["wheel"] is None
    newest = report["newest_torch_with_all_sampling_wheels"]
    assert newest["release"] == "2.12.1"
    assert newest["install"].startswith("python3 -m pip install torch==2.12.1+cu126 --index-url "
                                        "https://download.pytorch.org/whl/cu126 && ")
    # The same answer as the checker's own wheel table (one table, two readers).
    checker = load_checker_wheels()
    assert rows["torch-scatter"]["reason"] == checker.wheel_status("torch-scatter", "2.14", "cu126", report["platform"],
                                                                   (3, 11))["reason"]
    markdown = plain_run([sys.executable, CHECKER, "--wheels", "2.14.1+cu126", "--format", "markdown"]).stdout
    assert "| pyg-lib | yes |" in markdown and "| torch-scatter | no |" in markdown and "2.12.1" in markdown


def load_checker_wheels():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from diagnostics_core import wheels
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return wheels


def test_wheels_is_a_metadata_command_that_imports_nothing_heavy():
    code = ("import sys; sys.path.insert(0, %r); import check_sampling_backends as c; "
            "code = c.main(['--wheels', '2.13.0+cpu']); "
            "sys.stderr.write(repr(sorted(m for m in sys.modules if m.startswith(('sampling_checker', 'torch')))))"
            "; sys.exit(code)" % str(ROOT / "scripts"))
    completed = plain_run([sys.executable, "-B", "-c", code])
    assert completed.returncode == 0, completed.stderr
    loaded = eval(completed.stderr.strip().splitlines()[-1])
    assert not [m for m in loaded if m.startswith("torch")]
    assert not set(loaded) & {"sampling_checker.run", "sampling_checker.probe", "sampling_checker.render",
                              "sampling_checker.rules"}, loaded


def test_wheels_without_a_value_reads_the_probed_torch_and_refuses_nonsense():
    mine = json.loads(plain_run([sys.executable, CHECKER, "--wheels"]).stdout)
    code = "import torch, json; print(json.dumps([torch.__version__, torch.version.cuda]))"
    version, cuda = json.loads(plain_run([sys.executable, "-c", code]).stdout)
    assert mine["torch"] == version.split("+")[0]
    assert mine["variant"] == ("cu" + cuda.replace(".", "") if cuda else "cpu")
    refused = plain_run([sys.executable, CHECKER, "--wheels", "latest"])
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert json.loads(refused.stdout)["findings"][0]["fix"].endswith("--wheels 2.14.1+cu126")


def test_help_and_skill_route_to_wheels():
    assert "--wheels 2.14.1+cu126" in plain_run([sys.executable, CHECKER, "--help"]).stdout
    skill = (ROOT / "SKILL.md").read_text()
    assert "scripts/check_sampling_backends.py --wheels 2.14.1+cu126" in skill


# ---------------------------------------------------------------------------
# One id, one meaning: --list-findings and the emitted finding agree
# ---------------------------------------------------------------------------

def fake_torch(root, version, cuda):
    (root / "torch").mkdir(parents=True)
    (root / "torch" / "__init__.py").write_text("raise ImportError('static runs never import this')\n")
    (root / "torch" / "version.py").write_text("__version__ = %r\ncuda = %r\nhip = None\n" % (version, cuda))


def listed(finding_id):
    listing = json.loads(plain_run([sys.executable, CHECKER, "--list-findings"]).stdout)
    return next(item for item in listing if item["id"] == finding_id)


@diagnoses("no-scatter-sparse-wheels")
def test_no_scatter_sparse_wheels_is_its_own_id(tmp_path):
    """torch 2.13 (CPU): pyg-lib has a wheel, torch-scatter none; the finding says exactly that."""
    fake_torch(tmp_path, "2.13.0+cpu", None)
    result = invoke_checker("--static-only", env=clean_env({"PYTHONPATH": str(tmp_path)}))
    found = result.only("no-scatter-sparse-wheels")
    assert "no-prebuilt-wheels" not in result.ids()
    entry = listed("no-scatter-sparse-wheels")
    assert (found["severity"], found["title"]) == (entry["severity"], entry["title"]) == (
        "info", "PyG publishes no torch-scatter/torch-sparse wheel for this torch/CUDA")
    assert "torch-scatter" in found["evidence"]["missing"] and "pyg-lib" not in found["evidence"]["missing"]


def test_no_prebuilt_wheels_always_means_pyg_lib(tmp_path):
    fake_torch(tmp_path, "2.13.0+cu121", "12.1")  # no pyg-lib wheel for cu121 on torch 2.13
    found = invoke_checker("--static-only", env=clean_env({"PYTHONPATH": str(tmp_path)})).only("no-prebuilt-wheels")
    entry = listed("no-prebuilt-wheels")
    assert (found["severity"], found["title"]) == (entry["severity"], entry["title"])
    assert found["evidence"]["missing"][0] == "pyg-lib" and "pyg-lib" in entry["title"]


# ---------------------------------------------------------------------------
# torch-not-installed on a base Python: a venv first
# ---------------------------------------------------------------------------

def test_torch_fix_on_a_base_python_makes_the_venv_first(tmp_path):
    python = pyenv_python("3.12")  # a base interpreter, as Debian's /usr/bin/python3 is
    found = invoke_checker("--static-only", "--python", python).only("torch-not-installed")
    steps = found["fix"].split("  #")[0].split(" && ")
    assert steps[0] == "%s -m venv ~/.venvs/scalable-distributed" % shlex.quote(str(python))
    assert all(s.startswith("~/.venvs/scalable-distributed/bin/python -m pip install ") for s in steps[1:]), steps
    assert "this Python is no venv" in found["fix"]
    # The first step, run as printed in a fresh HOME (the pip steps download torch: not run here).
    home = tmp_path / "home"
    home.mkdir()
    made = plain_run(["bash", "-c", steps[0]], env=dict(clean_env(), HOME=str(home)), cwd="/")
    assert made.returncode == 0, made.stderr
    assert (home / ".venvs" / "scalable-distributed" / "bin" / "python").exists()
    # Inside a venv the fix installs in place.
    venv_fix = invoke_checker("--static-only", "--python", home / ".venvs" / "scalable-distributed" / "bin" / "python")
    assert " -m venv " not in venv_fix.only("torch-not-installed")["fix"]


# ---------------------------------------------------------------------------
# A source build's prerequisites, in a venv as plain as a user's
# ---------------------------------------------------------------------------

def test_source_build_fix_installs_the_missing_wheel_package_first(tmp_path):
    """Python 3.11's own `-m venv` gives setuptools 65.5 and no `wheel`: the build needs `wheel` there."""
    base = Path(getattr(sys, "_base_executable", sys.executable))
    plain = tmp_path / "plain"
    subprocess.run([str(base), "-m", "venv", str(plain)], check=True, timeout=300)
    python = plain / "bin" / "python"
    code = "import importlib.metadata as m, json; print(json.dumps(m.version('setuptools')))"
    setuptools = json.loads(plain_run([python, "-c", code]).stdout or "null")
    # The venv sees this one's torch and PyG, none of its build tools, and no torch-scatter.
    import sysconfig
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    linked = tmp_path / "stack"
    linked.mkdir()
    left_out = BACKENDS + ("pip", "setuptools", "wheel", "pkg_resources", "_distutils_hack", "distutils_precedence")
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.lower().replace("-", "_").startswith(left_out) and not entry.name.endswith(".pth"):
            (linked / entry.name).symlink_to(entry)
    Path(site, "stack.pth").write_text("%s\n" % linked)
    result = invoke_checker("--static-only", "--python", python)
    seen = result.json["python"]["build_prerequisites"]
    assert seen["wheel"] is None and seen["setuptools"] == setuptools
    found = result.only("no-scatter-sparse-wheels")
    needed = "wheel" if setuptools and tuple(int(p) for p in setuptools.split(".")[:2]) < (70, 1) else None
    if setuptools is None:
        needed = "setuptools"
    build = [o for o in found["fix"].split(" | ") if "build torch-scatter and torch-sparse from source" in o][0]
    py = shlex.quote(str(python))
    steps = build[build.index(py + " -m pip install "):].split(" && ")
    assert steps[-2:] == ["%s -m pip install --force-reinstall --no-deps --no-cache-dir --no-build-isolation %s" % (
        py, dist) for dist in ("torch-scatter==2.1.2", "torch-sparse==0.6.18")], steps
    step = steps[0]
    if needed:
        assert step.startswith("%s -m pip install " % py) and needed in step.split(), steps
    # The prerequisite step, run as printed from another folder: it installs what the build lacks.
    ran = plain_run(shlex.split(step), cwd="/", timeout=600)
    assert ran.returncode == 0, ran.stderr[-2000:]
    after = invoke_checker("--static-only", "--python", python).json["python"]["build_prerequisites"]
    assert after["wheel"] or tuple(int(p) for p in (after["setuptools"] or "0.0").split(".")[:2]) >= (70, 1)


# ---------------------------------------------------------------------------
# Skips name their enabling command; the pyenv helper looks everywhere
# ---------------------------------------------------------------------------

def test_python_candidates_look_in_pyenv_root_and_on_path(tmp_path):
    real = python_candidates("3.12") or [Path(sys.executable)]
    root = tmp_path / "pyenv"
    (root / "versions" / "3.12.99" / "bin").mkdir(parents=True)
    (root / "versions" / "3.12.99" / "bin" / "python").symlink_to(real[0])
    on_path = tmp_path / "bin"
    on_path.mkdir()
    (on_path / "python3.12").symlink_to(real[0])
    code = ("import sys, json; sys.path.insert(0, %r); import conftest; "
            "print(json.dumps([str(p) for p in conftest.python_candidates('3.12')]))" % str(ROOT / "tests"))
    env = clean_env({"PYENV_ROOT": str(root), "HOME": str(tmp_path / "home"), "PATH": str(on_path)})
    found = json.loads(plain_run([sys.executable, "-c", code], env=env, cwd=ROOT).stdout)
    assert str(root / "versions" / "3.12.99" / "bin" / "python") in found
    # The PATH one resolves to the same file as the pyenv one, so it is not listed twice.
    assert len(found) == 1


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
