"""Which interpreter the checker probes and which it refuses: the active venv under uv run, throwaway
environments, old Pythons (as target and as runner), executables that are not Python, --static-only."""

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import (CHECKER, ENABLE, ROOT, clean_env, invoke_checker, plain_run, pyenv_python,
                      python_candidates)


def one_line_refusal(completed, finding_id):
    """Exit 2, one clean stderr line, and a JSON document on stdout naming the finding."""
    assert completed.returncode == 2, completed.stderr
    assert len(completed.stderr.strip().splitlines()) == 1, completed.stderr
    assert "Traceback" not in completed.stderr + completed.stdout
    document = json.loads(completed.stdout)
    assert document["status"] == "usage-error" and document["exit_code"] == 2 and document["ok"] is False
    assert [f["id"] for f in document["findings"]] == [finding_id]
    return document


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


@pytest.mark.finding("interpreter-not-active")
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


@pytest.mark.finding("interpreter-ephemeral")
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


@pytest.mark.finding("interpreter-unsupported")
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


@pytest.mark.finding("usage-error")
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


def find_uv():
    """uv on PATH, or where .ci/run puts it; skips naming the command that installs it."""
    found = shutil.which("uv") or shutil.which("uv", path=str(Path.home() / ".cache" / "pyg-skill-ci" / "bin"))
    if not found:
        pytest.skip("uv is not on PATH; enable: " + ENABLE["uv"])
    return found


@pytest.mark.finding("interpreter-not-active")
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
