"""The checker engine, run as users run it: facts, isolation, contract, safety."""

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from support import fakes
from conftest import CHECKER, ENABLE, ROOT, SCHEMA_FILE, clean_env, python_candidates

NEIGHBOR_LOADER_PROBE = textwrap.dedent("""\
    import json, torch
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader
    edge_index = torch.tensor([[1, 4, 0, 2, 3, 0, 5, 4], [0, 0, 1, 1, 1, 2, 2, 3]])
    data = Data(x=torch.randn(6, 4), edge_index=edge_index)
    try:
        batch = next(iter(NeighborLoader(data, num_neighbors=[2], batch_size=2)))
        print(json.dumps({"works": True, "nodes": batch.num_nodes}))
    except Exception as error:
        print(json.dumps({"works": False, "error": "%s: %s" % (type(error).__name__, error)}))
""")


def neighbor_loader_works(python):
    """What NeighborLoader really does in that interpreter."""
    out = subprocess.run([str(python), "-W", "ignore", "-c", NEIGHBOR_LOADER_PROBE], capture_output=True,
                         text=True, timeout=120, env=clean_env())
    return json.loads(out.stdout.strip().splitlines()[-1])


def own_view(python):
    """torch's and PyG's own view of themselves, read in the probed interpreter."""
    code = ("import json, warnings; warnings.simplefilter('ignore'); import torch, torch_geometric, "
            "torch_geometric.typing as T; print(json.dumps({'torch': torch.__version__, "
            "'cuda': torch.version.cuda, 'pyg': torch_geometric.__version__, 'flags': {k: getattr(T, k) "
            "for k in dir(T) if k.startswith(('WITH_', 'NO_')) and isinstance(getattr(T, k), bool)}}))")
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=120, env=clean_env())
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def full_run(request):
    """One full probe of the test interpreter, shared by the fact tests."""
    completed = subprocess.run([sys.executable, str(CHECKER)], capture_output=True, text=True,
                               timeout=180, env=clean_env(), stdin=subprocess.DEVNULL)
    return completed


def test_full_probe_facts_match_torch_and_pyg_own_view(run_checker):
    result = run_checker("--full")
    document = result.json
    view = own_view(sys.executable)
    assert document["torch"]["version"] == view["torch"]
    assert document["torch"]["cuda"] == view["cuda"]
    assert document["torch_build"]["version"] == view["torch"]  # read from version.py, not imported
    assert document["pyg"]["version"] == view["pyg"]
    assert document["pyg"]["flags"] == view["flags"]
    assert document["probe"]["complete"] is True
    assert len(document["probe"]["attempts"]) == 1  # the fast path is one child
    assert document["cuda"]["context_created"] is False
    assert document["distributions"]["packages"]["torch"]["version"] == view["torch"]


def test_neighbor_verdict_matches_neighbor_loader(run_checker, neighbor_backend):
    result = run_checker("--require-neighbor-backend", "--full")
    reality = neighbor_loader_works(sys.executable)
    assert reality["works"] is True
    assert result.returncode == 0
    assert result.json["gates"]["neighbor_backend"] == {"passed": True, "backend": "torch-sparse"}
    assert result.json["sampling"]["neighbor_backend"] == "torch-sparse"
    smoke = result.json["sampling"]["smoke"]["torch-sparse"]
    assert smoke["passed"] is True
    assert [s["sampled_edges"] for s in smoke["samples"]] == [5, 2]
    assert "neighbor-sampling-unavailable" not in result.ids()


def test_backend_hidden_from_probed_interpreter_fails_the_gate(run_checker, venv_factory, neighbor_backend):
    python = venv_factory("no_backend", exclude=("torch_sparse", "torch_scatter", "pyg_lib"))
    reality = neighbor_loader_works(python)
    assert reality["works"] is False
    assert "'NeighborSampler' requires either 'pyg-lib' or 'torch-sparse'" in reality["error"]
    result = run_checker("--python", python, "--require-neighbor-backend")
    assert result.returncode == 1
    assert result.json["status"] == "gate-failed"
    assert result.json["gates"]["neighbor_backend"]["passed"] is False
    found = result.only("neighbor-sampling-unavailable")
    assert found["severity"] == "error"
    assert "'NeighborSampler' requires either 'pyg-lib' or 'torch-sparse'" in found["evidence"]["predicted_error"]
    assert found["fix"] == ("%s -m pip install --only-binary=:all: pyg_lib -f "
                           "https://data.pyg.org/whl/torch-2.13.0+cpu.html" % python)


def test_python_without_torch_reports_it_and_exits_zero(run_checker):
    bare = next((str(p) for minor in ("3.10", "3.11", "3.12", "3.13") for p in python_candidates(minor)
                 if subprocess.run([p, "-c", "import torch"], capture_output=True).returncode != 0), None)
    if bare is None:
        pytest.skip("no CPython 3.10-3.13 without torch in $PYENV_ROOT, ~/.pyenv or on PATH; enable: "
                    + ENABLE["python"].format(minor="3.12"))
    result = run_checker("--python", bare)
    assert result.returncode == 0
    assert result.ids()[0] == "torch-not-installed"
    assert result.json["torch_build"] == {"found": False}
    assert result.json["extensions"]["torch_sparse"]["status"] == "not-run"
    gated = run_checker("--python", bare, "--require-neighbor-backend")
    assert gated.returncode == 1


def test_venv_with_torch_but_no_pyg(run_checker, venv_factory):
    python = venv_factory("no_pyg", exclude=("torch_geometric",))
    result = run_checker("--python", python)
    assert result.returncode == 0
    assert "pyg-not-installed" in result.ids()
    assert result.json["torch"]["status"] == "ok"
    assert result.json["pyg"]["status"] == "error"  # the probe's import raised ModuleNotFoundError
    assert result.json["sampling"]["neighbor_backend"] is None
    assert run_checker("--python", python, "--require-neighbor-backend").returncode == 1


@pytest.mark.parametrize("minor", ["3.8", "3.9", "3.10", "3.11", "3.12", "3.13"])
def test_every_cpython_runs_the_static_stage(run_checker, minor):
    candidates = python_candidates(minor)
    if not candidates:
        pytest.skip("no CPython %s in $PYENV_ROOT, ~/.pyenv or on PATH; enable: %s"
                    % (minor, ENABLE["python"].format(minor=minor)))
    result = run_checker("--static-only", python=candidates[0])
    assert result.returncode == 0
    assert result.json["python"]["version"].startswith(minor + ".")
    assert result.json["checker"]["mode"] == "static-only"
    assert result.json["torch"] is None or result.json["torch"].get("status") == "not-probed"


def test_static_only_imports_nothing_heavy(run_checker):
    result = run_checker("--static-only")
    assert result.json["torch"] == {"status": "not-probed"}
    assert result.json["probe"] is None
    assert result.json["torch_build"]["found"] is True
    assert result.json["status"] != "ok"  # nothing was imported, so nothing is known to work


def fake_env(root, **extra):
    return clean_env({"PYTHONPATH": str(root), **extra})


def test_extension_that_raises_is_named_with_its_whole_chain(run_checker, tmp_path):
    fakes.fake_extension(tmp_path, "pyg_lib", "pyg_lib", "0.9.0+pt213cpu", failure="undefined-symbol")
    result = run_checker(env=fake_env(tmp_path))
    entry = result.json["extensions"]["pyg_lib"]
    assert entry["status"] == "import-error"
    chain = entry["error"]["chain"]
    assert chain[0]["type"] == "OSError" and "Could not load this library" in chain[0]["message"]
    assert any("undefined symbol" in link["message"] for link in chain[1:])


def test_segfaulting_extension_still_gives_json_naming_it(run_checker, tmp_path):
    fakes.fake_extension(tmp_path, "torch-cluster", "torch_cluster", "1.6.3+pt213cpu", failure="import-crashed")
    result = run_checker("--timeout", "60", env=fake_env(tmp_path))
    assert result.returncode == 0
    entry = result.json["extensions"]["torch_cluster"]
    assert entry["status"] == "crashed" and entry["signal"] == "SIGSEGV"
    assert result.json["probe"]["culprits"] == ["ext:torch_cluster"]
    assert result.json["probe"]["blocked_modules"] == ["torch_cluster"]
    assert len(result.json["probe"]["attempts"]) == 2
    # the rest was probed in the second child, with the culprit blocked
    assert result.json["pyg"]["status"] == "ok"
    assert result.only("ext-import-crashed")["evidence"]["module"] == "torch_cluster"


def test_hanging_extension_is_named_within_the_deadline(run_checker, tmp_path):
    fakes.fake_extension(tmp_path, "torch-spline-conv", "torch_spline_conv", "1.2.2+pt213cpu",
                         failure="import-hung")
    # 30 s leaves room for two torch imports on a loaded machine besides the
    # 12 s no-progress limit; the bounds are the ones the checker reports.
    result = run_checker("--timeout", "30", env=fake_env(tmp_path))
    assert result.json["checker"]["elapsed_s"] <= result.json["checker"]["timeout_s"] + 2
    hung = result.json["probe"]["attempts"][0]
    assert hung["killed_for"] == "hung" and hung["seconds"] >= result.json["probe"]["hang_limit_s"]
    assert result.json["extensions"]["torch_spline_conv"]["status"] == "hung"
    assert result.only("ext-import-hung")["evidence"]["module"] == "torch_spline_conv"
    assert result.json["pyg"]["status"] == "ok"  # probed again without it


def test_total_wall_time_is_bounded_by_timeout(run_checker, tmp_path):
    fakes.fake_hang(tmp_path, "pyg_lib")
    result = run_checker("--timeout", "5", env=fake_env(tmp_path))
    # The checker's own clock, against the deadline it reports (kill and reap take well under 2 s).
    assert result.json["checker"]["elapsed_s"] <= result.json["checker"]["timeout_s"] + 2
    assert result.json["extensions"]["pyg_lib"]["status"] in ("hung", "not-run")


def test_prints_from_extensions_cannot_corrupt_stdout(run_checker, tmp_path):
    fakes.make_package(tmp_path, "torch_cluster", "import sys\nprint('noise from an extension')\n"
                                                  "sys.stdout.write('{\"not\": \"ours\"}\\n')\n")
    result = run_checker(env=fake_env(tmp_path))
    assert result.json["extensions"]["torch_cluster"]["status"] == "ok"
    assert "noise from an extension" not in result.stdout


def test_help_documents_flags_exit_codes_and_read_only(run_checker):
    result = run_checker("--help", expect_json=False)
    assert result.returncode == 0
    for text in ("--require-neighbor-backend", "--require-cuda", "--require-distributed", "--python",
                 "--timeout", "--static-only", "--pretty", "--schema", "--list-findings",
                 "exit codes", "Read-only", "examples"):
        assert text in result.stdout, text
    for code in ("0 ", "1 ", "2 ", "3 "):
        assert "\n  " + code in result.stdout


@pytest.mark.parametrize("args, message", [
    (["--timeout", "soon"], "expected a number of seconds"),
    (["--timeout", "0"], "between 1 and 3600"),
    (["--python", "/nonexistent/python"], "is not an executable file"),
    (["--require-distributed", "carrier-pigeon"], "invalid choice"),
    (["--no-such-flag"], "unrecognized arguments"),
])
def test_bad_flags_give_one_line_and_exit_2(run_checker, args, message):
    result = run_checker(*args)
    assert result.returncode == 2
    assert result.json["status"] == "usage-error" and result.ids() == ["usage-error"]
    assert len(result.stderr.strip().splitlines()) == 1
    assert message in result.stderr and "Traceback" not in result.stderr


def test_schema_flag_prints_the_shipped_schema(run_checker):
    result = run_checker("--schema", expect_json=False)
    assert json.loads(result.stdout) == json.loads(SCHEMA_FILE.read_text())


def test_list_findings_matches_schema_enum(run_checker, output_schema):
    listed = run_checker("--list-findings").json
    ids = [entry["id"] for entry in listed]
    assert ids == output_schema["properties"]["findings"]["items"]["properties"]["id"]["enum"]
    assert all(entry["docs"] == "references/troubleshooting.md#" + entry["id"] for entry in listed)


def test_interpreter_that_is_not_python_is_a_usage_error_with_json(run_checker, tmp_path):
    fake_python = tmp_path / "python"
    fake_python.write_text("#!/bin/sh\nexit 0\n")
    fake_python.chmod(0o755)
    result = run_checker("--python", fake_python)
    assert result.returncode == 2
    assert result.json["status"] == "usage-error"
    assert result.ids() == ["interpreter-unsupported"]
    assert result.json["findings"][0]["evidence"]["is_python"] is False


def snapshot(*roots):
    state = {}
    for root in roots:
        for path, dirs, files in os.walk(root):
            for name in dirs + files:
                full = os.path.join(path, name)
                state[full] = os.lstat(full).st_mtime_ns
    return state


def test_a_real_run_writes_no_file_anywhere(run_checker, tmp_path):
    home, work, temp = tmp_path / "home", tmp_path / "cwd", tmp_path / "tmp"
    for folder in (home, work, temp):
        folder.mkdir()
    (home / "existing").write_text("x")
    repo_before = snapshot(ROOT / "scripts", ROOT / "tests")
    env = clean_env({"HOME": str(home), "TMPDIR": str(temp), "XDG_CACHE_HOME": str(home / ".cache")})
    result = run_checker(env=env, cwd=work)
    assert result.json["probe"]["complete"] is True
    # torch._dynamo would create $TMPDIR/torchinductor_<user> on import without the checker's guard
    assert snapshot(home, work, temp) == {str(home / "existing"): (home / "existing").stat().st_mtime_ns}
    assert snapshot(ROOT / "scripts", ROOT / "tests") == repo_before


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed (.ci/run installs it)")
def test_no_socket_no_write_no_process_beyond_the_child(tmp_path):
    trace = tmp_path / "trace"
    completed = subprocess.run(
        ["strace", "-f", "-qq", "-o", str(trace), "-e",
         "trace=socket,connect,bind,listen,execve,mkdir,mkdirat,rename,renameat,renameat2,unlink,unlinkat,"
         "open,openat,creat",
         sys.executable, str(CHECKER)], capture_output=True, text=True, timeout=240, env=clean_env(),
        stdin=subprocess.DEVNULL)
    assert completed.returncode == 0, completed.stderr[-2000:]
    json.loads(completed.stdout)
    lines = trace.read_text().splitlines()
    sockets = [line for line in lines if re.search(r"\b(socket|connect|bind|listen)\(", line)]
    assert sockets == []
    writes = [line for line in lines if re.search(r"\bopen(at)?\(.*O_(WRONLY|RDWR|CREAT)", line)
              and "= -1" not in line and "/dev/" not in line]
    assert writes == []
    changes = [line for line in lines if re.search(r"\b(mkdir|mkdirat|rename\w*|unlink\w*|creat)\(", line)
               and "= -1" not in line]
    assert changes == []
    programs = [re.search(r'execve\("([^"]+)"', line).group(1) for line in lines
                if "execve(" in line and "= -1" not in line]
    # the checker itself and one child interpreter: no shell, no pip, no nvidia-smi
    assert len(programs) == 2 and all(os.path.basename(p).startswith("python") for p in programs), programs


def test_pretty_output_is_the_same_document(run_checker):
    compact = run_checker("--static-only").json
    pretty = run_checker("--static-only", "--pretty")
    assert pretty.stdout.startswith("{\n  ")
    assert set(pretty.json) == set(compact)


def test_console_entry_point_and_pep723_header():
    text = CHECKER.read_text()
    assert re.search(r"^# /// script\n# requires-python = \">=3.8\"\n# dependencies = \[\]\n# ///$", text, re.M)
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'check-sampling-backends = "check_sampling_backends:main"' in pyproject


def test_module_level_imports_are_stdlib_only():
    import ast
    tree = ast.parse(CHECKER.read_text())
    top = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    names = {alias.name.split(".")[0] for node in top if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module.split(".")[0] for node in top if isinstance(node, ast.ImportFrom)}
    # The standard library, and the skill's own library and the checker's package beside the entry file
    # (stdlib-only themselves: the static stage runs in any Python 3.8+ without torch).
    assert names <= set(sys.stdlib_module_names) | {"diagnostics_core", "sampling_checker"}, names
