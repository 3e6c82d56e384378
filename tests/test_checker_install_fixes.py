"""The checker's install fixes run where they are printed: pinned CPU torch, pip-less venvs, uv venvs,
a base Python, a source build's prerequisites."""

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ENABLE, clean_env, invoke_checker, load_checker, plain_run, pyenv_python
from support.helpers import BACKENDS


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
