"""Hostile inputs round 3 (issue 21), the checker's side: every stage bounded by the tool's own
deadline, every driver fault named, nothing injected into markdown or the terminal, nothing private
on stderr of a report meant for the public.

Hang cases assert the tool's own reported elapsed_s against its --timeout (plus a little for
starting and rendering); the subprocess timeout is only an outer bound.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from support import fake_nvml
from support import fakes
from conftest import CHECKER, clean_env, invoke_checker

SLACK_S = 3.0  # interpreter start-up and rendering beyond the tool's own deadline
ESC = "\x1b"
# Markdown breakers and terminal escapes: OSC title + hyperlink, CSI, table pipe, code span, HTML.
HOSTILE = "9.9\x1b]0;owned\x07\x1b]8;;http://evil\x07link\x1b]8;;\x07\x1b[31m|x|`y`<img src=x onerror=alert(1)><script>"


def elapsed_within_deadline(result, timeout):
    assert result.json["checker"]["timeout_s"] == timeout
    assert result.json["checker"]["elapsed_s"] <= timeout + SLACK_S, result.json["checker"]


def assert_no_raw_controls(result):
    for stream in (result.stdout, result.stderr):
        assert ESC not in stream and "\x07" not in stream and "\x9b" not in stream


def table_rows(markdown):
    """Cells of every markdown table row, split on pipes that are not escaped by a backslash."""
    rows = []
    for line in markdown.splitlines():
        if not line.startswith("|"):
            continue
        cells, current, index = [], "", 0
        while index < len(line):
            char = line[index]
            if char == "\\" and index + 1 < len(line):
                current += line[index:index + 2]
                index += 2
                continue
            if char == "|":
                cells.append(current)
                current = ""
            else:
                current += char
            index += 1
        rows.append(cells)
    return rows


def assert_well_formed_markdown(markdown):
    rows = table_rows(markdown)
    assert rows and len(set(len(r) for r in rows)) == 1, rows
    lowered = markdown.lower()
    assert "<img" not in lowered and "<script" not in lowered
    # Every inline code span closes on its line (an odd count of lone backticks would open one).
    for line in markdown.splitlines():
        plain = re.sub(r"\\.", "", line)
        spans = re.findall(r"`+", plain)
        for fence in set(spans):
            assert spans.count(fence) % 2 == 0, line


# ---------------------------------------------------------------------------
# A stage without a deadline
# ---------------------------------------------------------------------------

def fifo_distribution(root, name="torch_cluster", version="1.6.3"):
    """A dist-info whose METADATA and RECORD are FIFOs: open() for reading blocks until a writer comes."""
    dist_info = root / ("%s-%s.dist-info" % (name, version))
    dist_info.mkdir(parents=True)
    for file_name in ("METADATA", "RECORD"):
        os.mkfifo(str(dist_info / file_name))
    return dist_info


@pytest.mark.finding("files-unreadable")
@pytest.mark.parametrize("mode", ["--static-only", "full"])
def test_fifo_metadata_on_sys_path_is_listed_not_waited_for(tmp_path, mode):
    dist_info = fifo_distribution(tmp_path / "site")
    args = ["--timeout", "10"] + ([mode] if mode != "full" else [])
    result = invoke_checker(*args, env=clean_env({"PYTHONPATH": str(tmp_path / "site")}), timeout=120)
    elapsed_within_deadline(result, 10.0)
    found = result.only("files-unreadable")
    assert {(p["path"], p["problem"]) for p in found["evidence"]["paths"]} == {
        (str(dist_info / "METADATA"), "not a regular file (FIFO)"),
        (str(dist_info / "RECORD"), "not a regular file (FIFO)")}
    assert found["fix"].startswith("ls -ld -- %s" % (dist_info / "METADATA"))
    assert result.json["environment"]["unreadable_files"]["count"] == 2
    if mode == "full":
        assert result.json["probe"]["complete"] is True


def write_hanging_psutil(root, holds_gil):
    """A psutil whose import never returns: blocked in a sleep (GIL released), or in C holding the GIL."""
    body = ("__import__('ctypes').PyDLL(None).sleep(600)\n" if holds_gil else "import time\ntime.sleep(600)\n")
    fakes.make_package(str(root), "psutil", body)


def test_static_stage_waits_for_a_blocked_read_only_until_its_deadline(tmp_path):
    # psutil is the one import of the static stage (in the probe child); this one blocks in a syscall.
    write_hanging_psutil(tmp_path, holds_gil=False)
    result = invoke_checker("--timeout", "10", env=clean_env({"PYTHONPATH": str(tmp_path)}), timeout=120)
    elapsed_within_deadline(result, 10.0)
    blocked = result.only("files-unreadable")["evidence"]["paths"]
    assert blocked == [{"path": "import psutil", "problem": "blocked: no answer within 2s (a hung mount or import)"}]
    assert result.json["environment"]["network_interfaces"]  # read after it, within the same stage
    assert result.json["torch"]["status"] == "ok"  # the rest of the probe still ran


@pytest.mark.finding("static-stage-incomplete")
def test_static_stage_blocked_while_holding_the_gil_ends_at_the_deadline(tmp_path):
    write_hanging_psutil(tmp_path, holds_gil=True)
    result = invoke_checker("--timeout", "6", "--require-cuda", env=clean_env({"PYTHONPATH": str(tmp_path)}),
                            timeout=120)
    elapsed_within_deadline(result, 6.0)
    assert result.returncode == 1 and result.json["gates"]["cuda"]["passed"] is False
    found = result.only("static-stage-incomplete")
    assert found["evidence"]["how"] == "deadline" and found["evidence"]["step_running"] == "static"
    assert "--timeout 12" in found["fix"] and "not run here" in found["fix"]


# ---------------------------------------------------------------------------
# Driver faults are named
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def nvml(tmp_path_factory):
    return fake_nvml.build(str(tmp_path_factory.mktemp("fake_nvml")))


def nvml_run(nvml, tmp_path, *args, mode=None, library=None, config=None, extra=None, timeout_s="20"):
    config_path = fake_nvml.write_config(str(tmp_path / "nvml.cfg"), config or fake_nvml.host_config())
    env = clean_env(dict(extra or {}, FAKE_NVML_CONFIG=config_path,
                         SCALABLE_DISTRIBUTED_NVML=str(library or nvml)), drop=("CUDA_VISIBLE_DEVICES",))
    if mode:
        env["FAKE_NVML_MODE"] = mode
    return invoke_checker("--timeout", timeout_s, *args, env=env, timeout=180, expect_json="markdown" not in args)


@pytest.mark.finding("nvml-crashed", "nvml-hung")
@pytest.mark.parametrize("mode, finding_id, stage, what", [
    ("segv-init", "nvml-crashed", "init", "it crashed the probe child in nvmlInit"),
    ("hang-init", "nvml-hung", "init", "it did not return in nvmlInit"),
    ("spin-constructor", "nvml-hung", "load", "it did not return while loading it (dlopen runs its constructors)"),
])
def test_nvml_that_crashes_or_hangs_is_named(nvml, tmp_path, mode, finding_id, stage, what):
    result = nvml_run(nvml, tmp_path, mode=mode)
    elapsed_within_deadline(result, 20.0)
    found = result.only(finding_id)
    assert found["evidence"]["library"] == nvml and found["evidence"]["library_override"] is True
    assert found["evidence"]["stage"] == stage and found["evidence"]["what"] == what
    if finding_id == "nvml-crashed":
        assert found["evidence"]["signal"] == "SIGSEGV"
    assert found["fix"].startswith("unset SCALABLE_DISTRIBUTED_NVML")
    nvml_facts = result.json["cuda"]["nvml"]
    assert nvml_facts["reason"] == finding_id[len("nvml-"):] and nvml_facts["available"] is False
    assert "nvml-" + nvml_facts["reason"] in result.json["cuda"]["blocked_by"]
    assert result.json["torch"]["status"] == "ok" and result.json["probe"]["culprits"] == ["nvml"]


@pytest.mark.finding("nvml-library-invalid")
@pytest.mark.parametrize("kind", ["text-file", "fifo", "missing"])
def test_override_that_is_not_a_shared_object(nvml, tmp_path, kind):
    library = tmp_path / "libnvidia-ml.so.1"
    if kind == "text-file":
        library.write_text("# not an ELF file: a config someone pointed the variable at\n" * 8)
    elif kind == "fifo":
        os.mkfifo(str(library))  # dlopen would block opening it
    result = nvml_run(nvml, tmp_path, library=library)
    elapsed_within_deadline(result, 20.0)
    found = result.only("nvml-library-invalid")
    assert found["evidence"]["library"] == str(library)
    assert {"text-file": "invalid ELF header", "fifo": "not a regular file (FIFO)",
            "missing": "No such file"}[kind] in found["evidence"]["loader_says"]
    assert result.json["cuda"]["nvml"]["reason"] == "library-invalid"
    assert "nvml-hung" not in result.ids() and result.json["probe"]["culprits"] == []


@pytest.mark.finding("nvml-devices-capped")
def test_huge_device_count_is_capped_and_says_so(nvml, tmp_path):
    result = nvml_run(nvml, tmp_path, config=fake_nvml.host_config(fake_nvml.H100, 100000))
    facts = result.json["cuda"]["nvml"]
    assert facts["device_count_reported"] == 100000 and facts["devices_capped_at"] == 64
    assert len(facts["devices"]) == 64
    found = result.only("nvml-devices-capped")
    assert found["evidence"] == {"reported": 100000, "read": 64, "cap": 64, "why": found["evidence"]["why"]}
    assert len(result.stdout.encode()) < 200000


def test_fullwidth_digit_in_cuda_visible_devices_names_no_device(nvml, tmp_path):
    result = nvml_run(nvml, tmp_path, config=fake_nvml.host_config(fake_nvml.H100, 2),
                      extra={"CUDA_VISIBLE_DEVICES": "\uff10"})
    visibility = result.json["cuda"]["visible_devices"]
    assert visibility["visible"] == []
    assert visibility["unmatched"] == [{"entry": "\uff10",
                                        "reason": "neither a device index nor a GPU-/MIG- UUID"}]


# ---------------------------------------------------------------------------
# Injection through reports, and redaction
# ---------------------------------------------------------------------------

def hostile_distribution(root):
    """A dist-info whose Name and Version headers hold escapes, pipes, backticks and HTML."""
    dist_info = fakes.fake_distribution(str(root), "torch-cluster", "1.6.3", top_level=["torch_cluster"])
    with open(os.path.join(dist_info, "METADATA"), "w") as handle:
        handle.write("Metadata-Version: 2.1\nName: torch-cluster%s\nVersion: %s\n" % (HOSTILE, HOSTILE))
    return dist_info


@pytest.mark.parametrize("output", ["markdown", "json"])
def test_hostile_metadata_breaks_no_table_and_reaches_no_terminal(tmp_path, output):
    hostile_distribution(tmp_path)
    result = invoke_checker("--static-only", "--format", output, env=clean_env({"PYTHONPATH": str(tmp_path)}),
                            expect_json=output == "json")
    assert result.returncode == 0
    assert_no_raw_controls(result)
    if output == "markdown":
        assert_well_formed_markdown(result.stdout)
        row = [r for r in table_rows(result.stdout) if "torch-cluster" in r[1]][0]
        assert "9.9\\\\x1b\\]0;owned" in row[2] and "&lt;img" in row[2]
    else:
        assert result.json["distributions"]["packages"]["torch-cluster"]["version"] == HOSTILE
    assert len(result.stderr.splitlines()) == len([line for line in result.stderr.split("\n") if line])


def test_hostile_nvml_device_name_reaches_no_terminal(nvml, tmp_path):
    name = fake_nvml.escape_text("H100 " + HOSTILE[:60] + "\nsecond line")
    config = fake_nvml.host_config(fake_nvml.H100, 2, **{"device.0.name": name, "driver_version": name})
    result = nvml_run(nvml, tmp_path, config=config)
    assert_no_raw_controls(result)
    assert result.json["cuda"]["nvml"]["devices"][0]["name"].startswith("H100 9.9\x1b]0;owned")
    result = nvml_run(nvml, tmp_path, "--format", "markdown", config=config)
    assert_no_raw_controls(result)
    assert_well_formed_markdown(result.stdout)
    assert "second line" in [r for r in table_rows(result.stdout) if "CUDA devices" in r[1]][0][2]


def test_markdown_redacts_stderr_too_and_only_whole_words(tmp_path):
    home = tmp_path / "li"
    site = home / "site"
    fakes.fake_distribution(str(site / "a"), "torch-cluster", "1.6.3", top_level=["torch_cluster"])
    fakes.fake_distribution(str(site / "b"), "torch-cluster", "1.6.2", top_level=["torch_cluster"])
    fifo_distribution(site / "a", name="torch_spline_conv", version="1.2.2")
    env = clean_env({"HOME": str(home), "USER": "li", "LOGNAME": "li",
                     "PYTHONPATH": "%s:%s" % (site / "a", site / "b")})
    result = invoke_checker("--static-only", "--format", "markdown", env=env, expect_json=False)
    assert result.returncode == 0
    for stream in (result.stdout, result.stderr):
        assert str(home) not in stream
        assert "dup<user>cate" not in stream and "dup&lt;user&gt;cate" not in stream
    assert "duplicate-distribution" in result.stdout and "duplicate-distribution" in result.stderr
    assert "~/site/a/torch_spline_conv-1.2.2.dist-info/METADATA" in result.stderr  # the fix, redacted
    assert "~/site/a/torch_spline_conv-1.2.2.dist-info/METADATA" in result.stdout
    plain = invoke_checker("--static-only", "--format", "markdown", "--no-redact", env=env, expect_json=False)
    assert str(home) in plain.stdout and str(home) in plain.stderr


# ---------------------------------------------------------------------------
# Interpreter choice
# ---------------------------------------------------------------------------

def shell_python(folder, body):
    """An executable named python (the checker runs only files named so) holding a shell script."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "python"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def test_active_environment_whose_python_hangs_is_blamed_not_python_flag(tmp_path):
    from conftest import pyenv_python
    base = pyenv_python("3.12")  # a base Python: the checker then probes the active environment
    venv = tmp_path / "venv"
    shell_python(venv / "bin", "exec sleep 600\n")
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    result = invoke_checker("--timeout", "6", env=clean_env({"VIRTUAL_ENV": str(venv)}), python=base, timeout=120)
    assert result.returncode == 2
    assert result.json["checker"]["elapsed_s"] <= 6 + SLACK_S
    [line] = result.stderr.strip().splitlines()
    assert "--python" not in line.split("(")[0] and "$VIRTUAL_ENV" in line and str(venv / "bin" / "python") in line
    found = result.only("interpreter-unsupported")
    assert found["evidence"]["chosen_by"] == "VIRTUAL_ENV" and "deactivate" in found["fix"]


def test_python_that_floods_stderr_gives_one_clean_line(tmp_path):
    python = shell_python(tmp_path / "bin", "i=0\nwhile [ $i -lt 3000 ]; do printf '\\033]0;t\\007\\033[2Jflood %d\\n' $i >&2; "
                                            "i=$((i+1)); done\nexit 1\n")
    # --timeout 60 gives the interpreter question its longest bound: a loaded machine once took longer
    # than a shorter one to print the 3,000 lines.
    result = invoke_checker("--python", python, "--timeout", "60")
    assert result.returncode == 2
    assert_no_raw_controls(result)
    [line] = result.stderr.strip().splitlines()
    assert len(line) < 600 and "flood 2999" in line
    assert "flood 2999" in result.only("interpreter-unsupported")["evidence"]["reason"]


@pytest.mark.parametrize("mode", ["full", "--static-only"])
def test_wrapper_that_runs_python_only_for_c_is_refused_naming_the_inner_python(tmp_path, mode):
    python = shell_python(tmp_path / "bin", 'if [ "$1" = "-c" ]; then exec %s "$@"; fi\n'
                                            'echo "launcher: only -c is forwarded" >&2\nexit 64\n' % sys.executable)
    result = invoke_checker("--python", python, "--timeout", "20", *([mode] if mode != "full" else []))
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()  # "probing ..." is said only once the probe script runs
    assert "did not run the checker's probe script" in line
    found = result.only("interpreter-unsupported")
    assert found["evidence"]["runs_scripts"] is False
    assert found["fix"].startswith("python3 ") and "--python %s" % sys.executable in found["fix"]


# ---------------------------------------------------------------------------
# Pipes and limits
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("output", ["json", "markdown"])
@pytest.mark.parametrize("stderr_too", [False, True], ids=["stdout-closed", "both-closed"])
def test_reader_that_went_away_changes_nothing(output, stderr_too):
    read_end, write_end = os.pipe()
    os.close(read_end)  # like `| head -c 10` once head has exited: every write gets EPIPE
    try:
        completed = subprocess.run([sys.executable, str(CHECKER), "--static-only", "--format", output],
                                   stdout=write_end, stderr=write_end if stderr_too else subprocess.PIPE,
                                   stdin=subprocess.DEVNULL, env=clean_env(), timeout=120)
    finally:
        os.close(write_end)
    assert completed.returncode == 0  # the verdict's code (status incomplete), not 1
    if not stderr_too:
        assert b"Traceback" not in completed.stderr and b"BrokenPipe" not in completed.stderr
        assert completed.stderr.startswith(b"check_sampling_backends: incomplete (exit 0)")


@pytest.mark.finding("open-files-limit")
def test_open_files_limit_too_low_is_named_with_ulimit(tmp_path):
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (7, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    result = invoke_checker("--timeout", "20", preexec_fn=limit)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()  # the probe never started, so no "probing ..." line
    assert "ulimit -Sn" in line and "is 7" in line
    found = result.only("open-files-limit")
    assert found["evidence"]["RLIMIT_NOFILE"]["soft"] == 7
    assert found["fix"].startswith("ulimit -Sn 1024 && python3 ")
    assert "checker-internal-error" not in result.ids()
    # The fix, run (as a shell would: the raised limit, then the same command).
    fixed = subprocess.run(["bash", "-c", found["fix"].replace("python3 ", sys.executable + " ", 1)],
                           capture_output=True, env=clean_env(), timeout=180, preexec_fn=limit)
    assert json.loads(fixed.stdout)["exit_code"] == fixed.returncode in (0, 1)
