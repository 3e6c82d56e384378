"""check_sampling_backends.py under hostile metadata arguments, a -c-only wrapper and a hostile NVML,
seen in the default (compact) document an agent reads (issue 32, classes 4 and 6)."""

import json
import shlex
import shutil
import subprocess
import sys

import pytest

from support import fake_nvml
from conftest import CHECKER, clean_env, invoke_checker


def run(*args, env=None):
    return subprocess.run([sys.executable, str(CHECKER), *args], capture_output=True, timeout=180,
                          env=env or clean_env(), stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("spec", ["2.14.1+cu\uff11\uff12\uff16", "\uff12.14.1", "2.14.\u0661"],
                         ids=["fullwidth-variant", "fullwidth-major", "arabic-indic-patch"])
def test_wheels_refuses_version_text_a_command_cannot_use(spec):
    completed = run("--wheels", spec)
    assert completed.returncode == 2
    document = json.loads(completed.stdout)
    assert document["status"] == "usage-error" and document["findings"][0]["id"] == "usage-error"
    assert "ASCII digits" in completed.stderr.decode()
    fix = document["findings"][0]["fix"]
    assert fix.endswith("--wheels 2.14.1+cu126") and fix.isascii()


def test_wheels_with_a_10_kb_value_is_not_echoed_whole():
    completed = run("--wheels", "9" * 10000)
    assert completed.returncode == 2
    stderr = completed.stderr.decode()
    assert len(stderr.splitlines()) == 1 and len(stderr) < 1000 and "characters cut" in stderr
    assert len(json.dumps(json.loads(completed.stdout)["findings"])) < 2000


def test_a_wrapper_that_runs_only_c_programs_is_refused_on_one_line(tmp_path):
    folder = tmp_path / "bin"
    folder.mkdir()
    python = folder / "python"
    python.write_text('#!/bin/sh\nif [ "$1" = "-c" ]; then exec %s "$@"; fi\n'
                      'echo "launcher: only -c is forwarded" >&2\nexit 64\n' % sys.executable)
    python.chmod(0o755)
    completed = run("--python", str(python), "--timeout", "20")
    assert completed.returncode == 2
    [line] = completed.stderr.decode().splitlines()  # no "probing ..." line before the refusal
    assert "did not run the checker's probe script" in line
    assert json.loads(completed.stdout)["findings"][0]["id"] == "interpreter-unsupported"


@pytest.fixture(scope="module")
def nvml(tmp_path_factory):
    return fake_nvml.build(str(tmp_path_factory.mktemp("fake_nvml")))


@pytest.mark.finding("nvml-devices-capped")
def test_the_compact_document_still_says_what_nvml_reported(nvml, tmp_path):
    config = fake_nvml.write_config(str(tmp_path / "nvml.cfg"), fake_nvml.host_config(fake_nvml.H100, 100000))
    visible = "%s,-1" % fake_nvml.uuid(0, "MIG")  # a MIG UUID, then -1 (which hides what follows)
    env = clean_env({"FAKE_NVML_CONFIG": config, "SCALABLE_DISTRIBUTED_NVML": str(nvml),
                     "CUDA_VISIBLE_DEVICES": visible})
    result = invoke_checker("--timeout", "20", env=env, detail="compact")
    assert result.json["checker"]["detail"] == "compact" and len(result.stdout) < 10000
    cuda = result.json["cuda"]
    assert cuda["nvml"]["device_count_reported"] == 100000 and cuda["nvml"]["devices_capped_at"] == 64
    assert cuda["visible_devices"]["value"] == visible and cuda["visible_devices"]["visible"] == []
    assert [entry["entry"] for entry in cuda["visible_devices"]["unmatched"]] == [visible.split(",")[0]]
    assert cuda["visible_devices"]["ignored"] == ["-1"]
    assert "nvml-devices-capped" in result.ids()


@pytest.mark.parametrize("name, runs", [("x$(:>MARKER)y", (["--static-only"], [])),
                                        ("a;:>MARKER;b'q'\"d\"`:>MARKER`", (["--static-only"],))],
                         ids=["substitution", "semicolon-quotes-backticks"])
def test_fixes_built_from_a_hostile_interpreter_path_run_nothing_from_it(tmp_path, name, runs):
    """--python at a real venv whose path holds $(...), ;, quotes or backticks (balanced, so that a path pasted
    unquoted would run them): every fix printed, run as an agent pastes it (bash, PATH empty, another folder)
    with that interpreter replaced by a stub, creates no MARKER."""
    from conftest import make_linked_venv
    venv = make_linked_venv(tmp_path / "venv").parent.parent
    hostile = tmp_path / name  # venv refuses such a path: the same venv, by symlinks
    (hostile / "bin").mkdir(parents=True)
    (hostile / "pyvenv.cfg").write_text((venv / "pyvenv.cfg").read_text())
    (hostile / "lib").symlink_to(venv / "lib")
    python = hostile / "bin" / "python"
    python.symlink_to(venv / "bin" / "python")
    seen = {}
    for args in runs:
        result = invoke_checker("--python", python, *args, detail="full")
        assert result.json["python"]["executable"] == str(python), result.stderr
        seen.update((f["fix"], f["id"]) for f in result.json["findings"] if f["fix"])
    assert [fix for fix in seen if shlex.quote(str(python)) in fix]  # the fixes do name it, as one word
    python.unlink()
    python.write_text("#!/bin/sh\nexit 0\n")  # a fix that runs the interpreter runs nothing of the user's
    python.chmod(0o755)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for fix, finding_id in seen.items():
        subprocess.run([shutil.which("bash"), "-c", fix], cwd=str(elsewhere),
                       env={"PATH": str(tmp_path / "no-commands")}, capture_output=True, timeout=30)
        assert not (elsewhere / "MARKER").exists() and not (tmp_path / "MARKER").exists(), (finding_id, fix)
