"""One test per diagnosis: the finding id, its severity and the fix it prints.

Failures are reproduced the way users meet them: fake extensions on a
temporary PYTHONPATH that fail exactly as broken wheels do (tests/support/fakes.py),
fake installation metadata, a real venv with a package removed, and launch or
thread variables in the environment. Runs are shared per scenario (one probe
costs about 4 s). Facts this machine cannot produce (a visible GPU, several
NUMA nodes, pyg-lib) are replayed: a real run's facts with that one fact
changed, diagnosed by the checker's own rules.

Each test carries @pytest.mark.finding(<id>, ...) for the ids it asserts;
tests/test_contract_every_tool.py checks that every id of every tool has one.
"""

import copy
import json
import os
import platform
import shlex
import subprocess
import sys

import pytest

from support import fakes
from support.fakes import checker_findings
from support.helpers import one
from conftest import CHECKER, ROOT, clean_env, invoke_checker, load_checker, pyenv_python

PY_TAG = "cp%d%d" % sys.version_info[:2]
LINUX_TAG = "%s-%s-linux_%s" % (PY_TAG, PY_TAG, platform.machine())


# ---------------------------------------------------------------------------
# Shared facts and runs
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def torch_build():
    """The installed torch as torch itself reports it, and the PyG index it maps to."""
    code = "import json, torch; print(json.dumps({'version': torch.__version__, 'cuda': torch.version.cuda}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(),
                         check=True, timeout=120)
    facts = json.loads(out.stdout)
    facts["release"] = facts["version"].split("+")[0]
    facts["minor"] = ".".join(facts["release"].split(".")[:2])
    facts["tag"] = "pt" + facts["minor"].replace(".", "")
    facts["variant"] = "cu" + facts["cuda"].replace(".", "") if facts["cuda"] else "cpu"
    facts["index"] = "https://data.pyg.org/whl/torch-%s.0+%s.html" % (facts["minor"], facts["variant"])
    return facts


def run_with(root=None, *args, extra=None, drop=(), python=None, preexec_fn=None):
    env = clean_env(extra, drop=drop)
    if root is not None:
        env["PYTHONPATH"] = str(root)
    return invoke_checker(*args, env=env, python=python, preexec_fn=preexec_fn)


def static_run(root=None, *args, **options):
    return run_with(root, "--static-only", *args, **options)


def reinstall_fix(package, torch_build, python=sys.executable):
    return "%s -m pip install --force-reinstall --no-deps --no-cache-dir --only-binary=:all: %s -f %s" % (
        shlex.quote(str(python)), package, torch_build["index"])


def legacy_fix(dist, torch_build, python=sys.executable):
    """torch-cluster and torch-spline-conv: deprecated, no wheels for torch 2.13+, ignored by PyG 2.8."""
    return ("%s -m pip uninstall -y %s  # %s: no wheel for torch %s+%s and PyG 2.8 ignores them "
            "(pyg-lib >= 0.6 has their ops)" % (shlex.quote(str(python)), dist, dist, torch_build["minor"],
                                                torch_build["variant"]))


def source_build_fix(dists, python=sys.executable):
    """PyPI's sdists, rebuilt past pip's wheel cache (no torch-scatter/torch-sparse wheels for torch 2.13+)."""
    versions = {"torch-scatter": "2.1.2", "torch-sparse": "0.6.18"}
    return " && ".join("%s -m pip install --force-reinstall --no-deps --no-cache-dir --no-build-isolation %s==%s"
                       % (shlex.quote(str(python)), d, versions[d]) for d in dists)


def install_fix(package, torch_build, python=sys.executable):
    return "%s -m pip install --only-binary=:all: %s -f %s" % (shlex.quote(str(python)), package,
                                                                torch_build["index"])


def replay(document, edit, *flags):
    """Diagnose a real run's facts after `edit(facts)` changed the facts this machine lacks (the options as the
    runner plans them, bounds included)."""
    facts = copy.deepcopy({section: document[section] for section in load_checker().FACT_SECTIONS})
    edit(facts)
    return checker_findings(facts, *flags)


@pytest.fixture(scope="module")
def real_full(torch_build):
    """The real stack, asking for nccl and CUDA that a CPU build cannot give."""
    return run_with(None, "--require-distributed", "nccl", "--require-cuda", "--full")


@pytest.fixture(scope="module")
def real_static():
    return static_run(None, "--full")


PYG_LIB, CLUSTER, SPLINE = ("pyg-lib", "pyg_lib", "0.5.0"), ("torch-cluster", "torch_cluster", "1.6.3"), \
    ("torch-spline-conv", "torch_spline_conv", "1.2.2")


def run_with_fakes(tmp_path_factory, name, failures, *flags):
    """One checker run over a root of fake extensions: [((dist, module, version), failure)]."""
    root = tmp_path_factory.mktemp(name)
    for (distribution, module, version), failure in failures:
        fakes.fake_extension(root, distribution, module, version, failure=failure)
    if name == "broken_imports":  # anything else an import can raise
        fakes.fake_raises(root, "torch_spline_conv", RuntimeError, "torch_spline_conv: unexpected state 42")
    return run_with(root, *flags)


@pytest.fixture(scope="module")
def broken_loads(tmp_path_factory):
    """Three libraries the dynamic loader refuses, each for its own reason."""
    return run_with_fakes(tmp_path_factory, "broken_loads", [
        (PYG_LIB, "undefined-symbol"), (CLUSTER, "cuda-runtime-missing"), (SPLINE, "glibc-too-old")])


@pytest.fixture(scope="module")
def broken_imports(tmp_path_factory):
    """Three imports that fail in Python: CUDA check, missing operator, anything else."""
    return run_with_fakes(tmp_path_factory, "broken_imports", [(CLUSTER, "cuda-mismatch"), (PYG_LIB, "operator-missing")])


@pytest.fixture(scope="module")
def crash_and_hang(tmp_path_factory):
    # 45 s: room for three torch imports on a loaded machine besides the 18 s
    # no-progress limit, so the hang is named before the overall deadline.
    return run_with_fakes(tmp_path_factory, "crash_and_hang", [(CLUSTER, "import-crashed"), (SPLINE, "import-hung")],
                          "--timeout", "45")


# ---------------------------------------------------------------------------
# torch, PyG, Python, the probe itself
# ---------------------------------------------------------------------------

@pytest.mark.finding("torch-not-installed")
def test_torch_not_installed():
    python = pyenv_python("3.12")
    result = static_run(None, "--python", python)
    assert result.returncode == 0
    found = result.only("torch-not-installed")
    assert found["severity"] == "warning"
    # Pinned to a torch PyG's wheels cover; CPU-only unless a GPU was seen (static-only asks no one).
    # pyenv's Python is a base interpreter: a venv first, then the install into it.
    venv = "~/.venvs/scalable-distributed/bin/python"
    pinned = "%s -m venv ~/.venvs/scalable-distributed && %s -m pip install torch==2.13.0+cpu --index-url " \
             "https://download.pytorch.org/whl/cpu && %s -m pip install torch_geometric" % (
                 shlex.quote(str(python)), venv, venv)
    assert found["fix"].startswith(pinned)
    assert found["evidence"]["gpu_seen"] is None


@pytest.mark.finding("torch-import-failed")
def test_torch_import_failed(tmp_path, torch_build):
    fakes.fake_raises(tmp_path, "torch", OSError,
                      "libtorch_cpu.so: cannot open shared object file: No such file or directory")
    (tmp_path / "torch" / "version.py").write_text(
        "__version__ = %r\ncuda = %r\n" % (torch_build["version"], torch_build["cuda"]))
    result = run_with(tmp_path)
    found = result.only("torch-import-failed")
    assert found["severity"] == "error"
    assert "cannot open shared object file" in found["evidence"]["outcome"]["error"]["message"]
    assert found["fix"].startswith("%s -m pip install --force-reinstall torch==%s" % (
        shlex.quote(sys.executable), torch_build["release"]))
    if "+" in torch_build["version"]:  # a local tag names PyTorch's own index
        assert found["fix"].endswith("--index-url https://download.pytorch.org/whl/%s" % torch_build["variant"])


@pytest.mark.finding("pyg-not-installed")
def test_pyg_not_installed(venv_factory):
    python = venv_factory("no_pyg", exclude=("torch_geometric",))
    found = static_run(None, "--python", python).only("pyg-not-installed")
    assert found["severity"] == "warning"
    assert found["fix"] == "%s -m pip install torch_geometric" % shlex.quote(str(python))


@pytest.mark.finding("pyg-import-failed")
def test_pyg_import_failed(tmp_path):
    fakes.fake_raises(tmp_path, "torch_geometric", ImportError, "cannot import name 'Tensor' from 'torch'")
    found = run_with(tmp_path).only("pyg-import-failed")
    assert found["severity"] == "error"
    assert found["evidence"]["outcome"]["error"]["message"] == "cannot import name 'Tensor' from 'torch'"
    assert found["fix"] == "%s -m pip install --force-reinstall --no-deps torch_geometric" % shlex.quote(
        sys.executable)


@pytest.mark.finding("python-unsupported-by-pyg")
def test_python_older_than_pyg_supports(tmp_path):
    python = pyenv_python("3.9")
    fakes.fake_distribution(tmp_path, "torch-geometric", "2.8.1", wheel_tag="py3-none-any",
                            requires_python=">=3.10")
    found = static_run(tmp_path, "--python", python).only("python-unsupported-by-pyg")
    assert found["severity"] == "warning"
    assert found["evidence"]["python"].startswith("3.9.")
    assert found["evidence"]["requires_python"] == ">=3.10"
    assert "Python 3.10 or newer" in found["fix"]


@pytest.mark.finding("probe-deadline")
def test_probe_deadline(tmp_path):
    # Each fake import takes 1.2 s, under the 2 s no-progress limit, so none
    # is "hung"; together with torch they overrun a 2 s deadline.
    for module in ("pyg_lib", "torch_cluster", "torch_spline_conv"):
        fakes.make_package(tmp_path, module, "import time\ntime.sleep(1.2)\n")
    result = run_with(tmp_path, "--timeout", "2")
    found = result.only("probe-deadline")
    assert found["severity"] == "warning"
    assert found["evidence"]["timeout_s"] == 2
    assert found["fix"].endswith("--timeout 4")
    # Running out of time is not blamed on whatever step was running.
    assert not {"ext-import-hung", "torch-import-failed", "pyg-import-failed",
                "neighbor-smoke-failed"} & set(result.ids())
    assert result.json["checker"]["elapsed_s"] <= result.json["checker"]["timeout_s"] + 2


@pytest.mark.finding("checker-internal-error")
def test_checker_internal_error(tmp_path):
    # A rule of the checker that raises: the checker's own failure, still one JSON document, exit 3.
    # (A child that dies before it says anything is no longer unexplained: tests/test_checker_hostile_drivers.py
    # reports it as an interpreter that does not run scripts.)
    code = ("import sys; sys.argv[0] = %r; sys.path.insert(0, %r)\n"
            "import sampling_checker.rules as rules\n"
            "def broken(facts, options):\n    raise KeyError('rule bug')\n"
            "rules.RULES = rules.RULES + (broken,)\n"
            "from diagnostics_core import runner\n"
            "from sampling_checker.cli import SPEC\n"
            "sys.exit(runner.main(SPEC, ['--static-only']))" % (str(CHECKER), str(CHECKER.parent)))
    completed = subprocess.run([sys.executable, "-B", "-c", code], capture_output=True, text=True, timeout=120,
                               env=clean_env())
    document = json.loads(completed.stdout)
    assert completed.returncode == 3 and document["status"] == "internal-error"
    found = [f for f in document["findings"] if f["id"] == "checker-internal-error"]
    assert len(found) == 1 and found[0]["severity"] == "error"
    assert "rule bug" in found[0]["evidence"]["error"]["message"] and "traceback" in found[0]["evidence"]
    assert found[0]["fix"] == "report it with this JSON attached"


# ---------------------------------------------------------------------------
# Import failures, classified through the whole exception chain
# ---------------------------------------------------------------------------

@pytest.mark.finding("ext-undefined-symbol")
def test_extension_built_for_another_torch(broken_loads, torch_build):
    found = [f for f in broken_loads.findings("ext-undefined-symbol") if f["evidence"]["module"] == "pyg_lib"][0]
    assert found["severity"] == "error"
    # torch wraps the loader's error: the symbol is only in the chained cause.
    assert found["evidence"]["error"]["message"].startswith("Could not load this library")
    assert "undefined symbol: " + fakes.OLD_TORCH_SYMBOL in found["evidence"]["matched"]
    assert found["fix"] == reinstall_fix("pyg_lib", torch_build)


@pytest.mark.finding("ext-undefined-symbol")
def test_broken_pyg_lib_is_blamed_for_torch_sparse_failing_too(broken_loads, torch_build, neighbor_backend):
    # torch_sparse/typing.py imports pyg_lib catching only ImportError, so
    # pyg-lib's OSError breaks torch-sparse as well: the fix is pyg-lib's.
    found = [f for f in broken_loads.findings("ext-undefined-symbol") if f["evidence"]["module"] == "torch_sparse"]
    assert len(found) == 1
    assert found[0]["evidence"]["caused_by"] == "pyg_lib"
    assert found[0]["fix"] == reinstall_fix("pyg_lib", torch_build)


@pytest.mark.finding("ext-cuda-runtime-missing")
def test_cuda_runtime_library_missing(broken_loads, torch_build):
    found = broken_loads.only("ext-cuda-runtime-missing")
    assert found["severity"] == "error"
    assert found["evidence"]["module"] == "torch_cluster"
    assert "libcudart.so.11.0: cannot open shared object file" in found["evidence"]["matched"]
    assert found["fix"] == legacy_fix("torch-cluster", torch_build)


@pytest.mark.finding("ext-glibc-too-old")
def test_glibc_older_than_the_wheel_needs(broken_loads):
    found = broken_loads.only("ext-glibc-too-old")
    assert found["severity"] == "error"
    assert found["evidence"]["module"] == "torch_spline_conv"
    assert "GLIBC_2.99' not found" in found["evidence"]["matched"]
    assert "newer glibc" in found["fix"]
    assert found["fix"].endswith("%s -m pip install --force-reinstall --no-deps --no-cache-dir --no-build-isolation "
                                 "torch-spline-conv==1.2.2" % shlex.quote(sys.executable))


@pytest.mark.finding("ext-cuda-mismatch", "ext-operator-missing", "ext-import-error")
@pytest.mark.parametrize("finding_id, module, shown, fix", [
    # compiled for another CUDA
    ("ext-cuda-mismatch", "torch_cluster", "were compiled with different CUDA versions",
     lambda build: legacy_fix("torch-cluster", build)),
    ("ext-operator-missing", "pyg_lib", "'_OpNamespace' 'pyg' object has no attribute 'neighbor_sample'",
     lambda build: reinstall_fix("pyg_lib", build)),
    # anything else is reported verbatim
    ("ext-import-error", "torch_spline_conv", "torch_spline_conv: unexpected state 42",
     lambda build: legacy_fix("torch-spline-conv", build)),
])
def test_an_import_that_fails_in_python_is_named_by_its_cause(broken_imports, torch_build, finding_id, module,
                                                               shown, fix):
    found = broken_imports.only(finding_id)
    assert found["severity"] == "error"
    assert found["evidence"]["module"] == module
    assert shown in json.dumps(found["evidence"])
    assert found["fix"] == fix(torch_build)
    if finding_id == "ext-cuda-mismatch":
        assert found["evidence"]["error"]["type"] == "RuntimeError"


@pytest.mark.finding("ext-missing-dependency")
def test_torch_sparse_without_torch_scatter(venv_factory, torch_build, neighbor_backend):
    # The real torch-sparse, whose wheel does not declare torch-scatter.
    python = venv_factory("no_scatter", exclude=("torch_scatter",))
    result = run_with(None, "--python", python)
    found = result.only("ext-missing-dependency")
    assert found["severity"] == "error"
    assert found["evidence"]["module"] == "torch_sparse"
    assert found["evidence"]["missing"] == "torch_scatter"
    assert found["fix"].startswith(source_build_fix(["torch-scatter"], python) + "  # torch-scatter: no wheel")
    # PyG silently disables torch-sparse then: sampling is predicted to fail.
    assert "neighbor-sampling-unavailable" in result.ids()


@pytest.mark.finding("ext-import-crashed")
def test_import_killed_by_a_signal(crash_and_hang, torch_build):
    found = crash_and_hang.only("ext-import-crashed")
    assert found["severity"] == "error"
    assert found["evidence"]["module"] == "torch_cluster"
    assert found["evidence"]["signal"] == "SIGSEGV"
    assert found["fix"] == legacy_fix("torch-cluster", torch_build)  # the fix is the removal


@pytest.mark.finding("ext-import-hung")
def test_import_that_never_finishes(crash_and_hang, torch_build):
    found = crash_and_hang.only("ext-import-hung")
    assert found["severity"] == "error"
    assert found["evidence"]["module"] == "torch_spline_conv"
    assert found["fix"] == legacy_fix("torch-spline-conv", torch_build)  # the fix is the removal
    # Bounded by the deadlines the checker reports, not by a wall clock of ours.
    checker, probe = crash_and_hang.json["checker"], crash_and_hang.json["probe"]
    assert found["evidence"]["seconds"] >= probe["hang_limit_s"]
    assert checker["elapsed_s"] <= checker["timeout_s"] + 2
    assert "probe-deadline" not in crash_and_hang.ids()


# ---------------------------------------------------------------------------
# Predicted from metadata, before any import
# ---------------------------------------------------------------------------

@pytest.mark.finding("wheel-torch-mismatch")
def test_wheel_built_for_another_torch(tmp_path, torch_build):
    other = "pt%d%s" % (int(torch_build["minor"].split(".")[0]), int(torch_build["minor"].split(".")[1]) - 1)
    fakes.fake_distribution(tmp_path, "pyg-lib", "0.5.0+%scpu" % other, wheel_tag=LINUX_TAG)
    found = static_run(tmp_path).only("wheel-torch-mismatch")
    assert found["severity"] == "error"
    assert found["evidence"]["built_for_torch"] == "%s.%s" % (other[2], other[3:])
    assert found["fix"] == reinstall_fix("pyg_lib", torch_build)


@pytest.mark.finding("wheel-cuda-on-cpu-torch")
def test_cuda_wheel_beside_cpu_torch(tmp_path, torch_build):
    if torch_build["variant"] != "cpu":
        pytest.skip("needs a CPU-only torch (this one is %s)" % torch_build["version"])
    fakes.fake_distribution(tmp_path, "pyg-lib", "0.5.0+%scu126" % torch_build["tag"], wheel_tag=LINUX_TAG)
    found = static_run(tmp_path).only("wheel-cuda-on-cpu-torch")
    assert found["severity"] == "error"
    assert found["evidence"]["wheel_variant"] == "cu126"
    assert found["fix"] == reinstall_fix("pyg_lib", torch_build)


def fake_torch_build(root, version, cuda, hip=None):
    """A torch package folder whose version.py says `version`; static runs only read that file."""
    (root / "torch").mkdir(parents=True)
    (root / "torch" / "__init__.py").write_text("raise ImportError('static runs never import this')\n")
    (root / "torch" / "version.py").write_text(
        "__version__ = %r\ncuda = %r\nhip = %r\n" % (version, cuda, hip))


@pytest.mark.finding("wheel-cuda-mismatch")
def test_wheel_for_another_cuda_variant(tmp_path, torch_build):
    fake_torch_build(tmp_path, torch_build["release"] + "+cu126", "12.6")
    fakes.fake_distribution(tmp_path, "pyg-lib", "0.5.0+%scu118" % torch_build["tag"], wheel_tag=LINUX_TAG)
    fakes.fake_distribution(tmp_path, "torch-cluster", "1.6.3+%scpu" % torch_build["tag"], wheel_tag=LINUX_TAG)
    result = static_run(tmp_path)
    index = "https://data.pyg.org/whl/torch-%s.0+cu126.html" % torch_build["minor"]
    by_distribution = {f["evidence"]["distribution"]: f for f in result.findings("wheel-cuda-mismatch")}
    assert by_distribution["pyg-lib"]["severity"] == "error"
    assert by_distribution["pyg-lib"]["evidence"]["wheel_variant"] == "cu118"
    assert by_distribution["pyg-lib"]["fix"].endswith("pyg_lib -f " + index)
    # A CPU wheel beside a CUDA torch imports, but has no GPU kernels.
    assert by_distribution["torch-cluster"]["severity"] == "warning"
    assert "-m pip uninstall -y torch-cluster  # " in by_distribution["torch-cluster"]["fix"]  # no 2.13 wheels


@pytest.mark.finding("wheel-platform-mismatch")
def test_wheel_needs_a_newer_glibc(tmp_path, torch_build):
    if platform.system() != "Linux":
        pytest.skip("manylinux tags are checked against glibc on Linux only")
    tag = "%s-%s-manylinux_2_99_%s" % (PY_TAG, PY_TAG, platform.machine())
    fakes.fake_distribution(tmp_path, "pyg-lib", "0.5.0+%s%s" % (torch_build["tag"], torch_build["variant"]),
                            wheel_tag=tag)
    found = static_run(tmp_path).only("wheel-platform-mismatch")
    assert found["severity"] == "error"
    assert found["evidence"]["problem"].startswith("needs glibc >= 2.99, this system has ")
    assert found["fix"] == reinstall_fix("pyg_lib", torch_build)


@pytest.mark.finding("ext-source-build")
def test_local_source_build_is_flagged_for_checking(tmp_path):
    fakes.fake_distribution(tmp_path, "pyg-lib", "0.5.0", wheel_tag=LINUX_TAG)
    found = [f for f in static_run(tmp_path).findings("ext-source-build")
             if f["evidence"]["distribution"] == "pyg-lib"]
    assert len(found) == 1
    assert found[0]["severity"] == "info"
    assert "extensions.pyg_lib.cuda_version" in found[0]["fix"]
    assert "sampling.features.metis" in found[0]["fix"]


@pytest.mark.finding("no-prebuilt-wheels")
def test_no_wheels_for_this_torch_and_cuda(tmp_path, torch_build):
    fake_torch_build(tmp_path, torch_build["release"] + "+cu121", "12.1")  # cu121 ended with torch 2.5
    result = static_run(tmp_path)
    found = result.only("no-prebuilt-wheels")
    assert found["severity"] == "warning"
    assert found["evidence"]["variant"] == "cu121"
    assert "not cu121" in found["evidence"]["reasons"][0]
    assert found["evidence"]["support_table_date"] == result.json["install"]["support_table_date"]
    assert found["evidence"]["missing"][0] == "pyg-lib"
    # The newest torch with every wheel for cu121, pinned with its CUDA tag, then those wheels.
    assert "-m pip install torch==2.5.0+cu121 --index-url https://download.pytorch.org/whl/cu121 && " in found["fix"]
    assert ("--only-binary=:all: pyg_lib torch_scatter torch_sparse -f https://data.pyg.org/whl/torch-2.5.0+cu121.html"
            in found["fix"])
    assert found["fix"].endswith(source_build_fix(["torch-scatter", "torch-sparse"]))
    assert result.json["install"]["wheels_available"] is False


# ---------------------------------------------------------------------------
# Feature-level verdicts
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def no_backend(venv_factory):
    python = venv_factory("no_backend", exclude=("torch_sparse", "torch_scatter", "pyg_lib"))
    return python, run_with(None, "--python", python, "--require-neighbor-backend")


@pytest.mark.finding("neighbor-sampling-unavailable")
def test_no_neighbor_backend(no_backend, torch_build):
    python, result = no_backend
    assert result.returncode == 1
    found = result.only("neighbor-sampling-unavailable")
    assert found["severity"] == "error"
    assert found["evidence"]["predicted_error"] == (
        "ImportError: 'NeighborSampler' requires either 'pyg-lib' or 'torch-sparse'")
    assert found["fix"] == install_fix("pyg_lib", torch_build, python)


@pytest.mark.finding("neighbor-smoke-failed")
def test_backend_that_imports_but_samples_wrongly(tmp_path, torch_build):
    fakes.fake_wrong_sampler(tmp_path, "pyg_lib")
    result = run_with(tmp_path, "--require-neighbor-backend")
    assert result.returncode == 1
    assert result.json["gates"]["neighbor_backend"] == {"passed": False, "backend": "pyg-lib"}
    found = result.only("neighbor-smoke-failed")
    assert found["severity"] == "error"
    assert any("does not exist" in problem for sample in found["evidence"]["result"]["samples"]
               for problem in sample["problems"])
    assert found["fix"] == reinstall_fix("pyg_lib", torch_build)


@pytest.mark.finding("induced-sampling-unavailable")
def test_induced_sampling_needs_torch_sparse(real_full, torch_build):
    # Replayed: pyg-lib (not installable here) samples, torch-sparse is absent.
    def pyg_lib_only(facts):
        facts["sampling"]["features"].update(neighbor=True, induced=False)
        facts["sampling"]["neighbor_backend"] = "pyg-lib"
    found = one(replay(real_full.json, pyg_lib_only), "induced-sampling-unavailable")
    assert found["severity"] == "info"
    assert "subgraph_type='induced'" in found["evidence"]["affects"]
    # No torch-scatter/torch-sparse wheels for torch 2.13+: the fix is the source build, in order, after
    # installing the build prerequisites this venv lacks (a plain venv has no `wheel`).
    before, build, after = found["fix"].partition(source_build_fix(["torch-scatter", "torch-sparse"]))
    assert build and after.startswith("  # torch-scatter, torch-sparse: no wheel for torch %s+%s"
                                      % (torch_build["minor"], torch_build["variant"]))
    assert before == "" or (before.startswith("%s -m pip install " % shlex.quote(sys.executable))
                            and before.endswith(" && ")), before


@pytest.mark.finding("weighted-sampling-unavailable")
def test_weighted_sampling_needs_pyg_lib(real_full, torch_build, neighbor_backend):
    found = real_full.only("weighted-sampling-unavailable")
    assert found["severity"] == "info"
    assert found["evidence"]["needs"] == "pyg-lib >= 0.3.0"
    assert found["fix"] == install_fix("pyg_lib", torch_build)


@pytest.mark.finding("temporal-sampling-unavailable")
def test_temporal_sampling_needs_pyg_lib(real_full, torch_build, neighbor_backend):
    found = real_full.only("temporal-sampling-unavailable")
    assert found["severity"] == "info"
    assert found["evidence"]["node_level"] is False and found["evidence"]["edge_level"] is False
    assert found["fix"] == install_fix("pyg_lib", torch_build)


@pytest.mark.finding("metis-unavailable")
def test_metis_unavailable(real_full, torch_build):
    found = real_full.only("metis-unavailable")
    assert found["severity"] == "warning"
    assert found["evidence"]["pyg_lib_partition"] is False
    if real_full.json["extensions"]["torch_sparse"]["status"] == "ok":
        # A source build of torch-sparse was really asked to partition, and refused.
        assert found["evidence"]["torch_sparse_metis"]["works"] is False
        assert "METIS" in found["evidence"]["torch_sparse_metis"]["error"]["message"]
    assert found["fix"] == install_fix("pyg_lib", torch_build)


@pytest.mark.finding("distributed-sampling-unavailable")
def test_distributed_sampling_needs_pyg_lib_operators(real_full, torch_build):
    found = real_full.only("distributed-sampling-unavailable")
    assert found["severity"] == "info"
    for operator in ("dist_neighbor_sample", "merge_sampler_outputs", "relabel_neighborhood",
                     "hetero_relabel_neighborhood"):
        assert operator in found["evidence"]["needs"]
    assert found["fix"] == install_fix("pyg_lib", torch_build)


# ---------------------------------------------------------------------------
# Installation hygiene
# ---------------------------------------------------------------------------

@pytest.mark.finding("legacy-extension-ignored")
def test_torch_cluster_is_ignored_by_pyg_2_8(tmp_path, torch_build):
    fakes.fake_distribution(tmp_path, "torch-cluster", "1.6.3+%scpu" % torch_build["tag"], wheel_tag=LINUX_TAG)
    found = static_run(tmp_path).only("legacy-extension-ignored")
    assert found["severity"] == "warning"
    assert "sources disagree" in found["evidence"]["replacement"]
    assert found["fix"].startswith("%s -m pip uninstall -y torch-cluster" % shlex.quote(sys.executable))
    assert found["fix"].endswith(install_fix("pyg_lib", torch_build))


@pytest.mark.finding("duplicate-distribution")
def test_pyg_nightly_beside_torch_geometric(tmp_path):
    fakes.fake_distribution(tmp_path, "pyg-nightly", "2.9.0.dev20261101", wheel_tag="py3-none-any",
                            top_level=["torch_geometric"])
    fakes.fake_distribution(tmp_path, "torch-geometric", "2.7.0", wheel_tag="py3-none-any")
    result = static_run(tmp_path)
    by_kind = {("module" in f["evidence"]): f for f in result.findings("duplicate-distribution")}
    claimed = by_kind[True]
    assert claimed["severity"] == "error"
    assert claimed["evidence"] == {"module": "torch_geometric", "distributions": ["pyg-nightly", "torch-geometric"]}
    assert claimed["fix"] == "%s -m pip uninstall -y pyg-nightly" % shlex.quote(sys.executable)
    twice = by_kind[False]
    assert twice["evidence"]["distribution"] == "torch-geometric"
    assert sorted(twice["evidence"]["versions"])[0] == "2.7.0"
    assert "pip uninstall -y torch-geometric" in twice["fix"]


@pytest.mark.finding("conda-pip-mixed")
def test_conda_and_pip_both_own_the_stack(venv_factory):
    python = venv_factory("conda_mixed", exclude=("torch_sparse", "torch_scatter"))
    prefix = python.parent.parent
    if not (prefix / "conda-meta").exists():
        fakes.fake_conda_install(str(prefix), "torch-sparse", "0.6.18",
                                 python_version="%d.%d" % sys.version_info[:2])
    found = static_run(None, "--python", python).only("conda-pip-mixed")
    assert found["severity"] == "warning"
    assert "torch" in found["evidence"]["pip"]
    assert found["evidence"]["conda"] == ["pytorch-sparse-0.6.18-py311_torch_2.13.0_cpu"]
    assert "conda create -n pyg" in found["fix"]


# ---------------------------------------------------------------------------
# Known defects of the installed PyG, read from its source
# ---------------------------------------------------------------------------

def pyg_version():
    from importlib.metadata import version
    return version("torch-geometric")


@pytest.mark.finding("pyg-dist-loader-typeerror")
def test_distributed_loaders_typeerror(real_static):
    found = real_static.only("pyg-dist-loader-typeerror")
    assert found["severity"] == "info"
    assert found["evidence"]["pyg_version"] == pyg_version()
    assert any(loc.startswith("torch_geometric/distributed/dist_neighbor_loader.py:")
               for loc in found["evidence"]["locations"])
    assert found["fix"].endswith("python3 %s --help" % (ROOT / "scripts" / "ddp_neighbor_training.py"))


@pytest.mark.finding("pyg-distributed-deprecated")
def test_distributed_package_deprecated(real_static):
    found = real_static.only("pyg-distributed-deprecated")
    assert found["severity"] == "info"
    assert found["evidence"]["pyg_version"] == pyg_version()
    assert "ddp_neighbor_training.py" in found["fix"] and "cuGraph-PyG" in found["fix"]


@pytest.mark.finding("pyg-from-partition-edge-feats")
def test_from_partition_edge_features(real_static):
    found = real_static.only("pyg-from-partition-edge-feats")
    assert found["severity"] == "info"
    assert "defaultdict" in found["evidence"]["error"]
    assert found["fix"].startswith("%s %s PARTITION_ROOT" % (shlex.quote(sys.executable),
                                                             ROOT / "scripts" / "check_partition.py"))


@pytest.mark.finding("pyg-dist-loader-typeerror", "pyg-distributed-deprecated", "pyg-from-partition-edge-feats")
def test_pyg_defects_are_keyed_on_the_source_not_guessed(tmp_path):
    # A PyG 2.6 whose sources have none of the three defects: no finding.
    package = tmp_path / "torch_geometric"
    (package / "distributed").mkdir(parents=True)
    (package / "__init__.py").write_text("__version__ = '2.6.1'\n")
    (package / "distributed" / "dist_neighbor_loader.py").write_text("warnings.warn(msg, stacklevel=2)\n")
    (package / "distributed" / "partition.py").write_text("torch.save(dict(feats), path)\n")
    fakes.fake_distribution(tmp_path, "torch-geometric", "2.6.1", wheel_tag="py3-none-any")
    ids = static_run(tmp_path).ids()
    assert not {"pyg-dist-loader-typeerror", "pyg-distributed-deprecated", "pyg-from-partition-edge-feats"} & set(ids)


# ---------------------------------------------------------------------------
# Distributed launch environment (never a socket); the other launch rules: tests/fast/test_checker_rules.py
# ---------------------------------------------------------------------------

@pytest.mark.finding("launch-backend-unavailable")
def test_nccl_requested_on_a_build_without_it(real_full):
    if real_full.json["distributed"].get("backends", {}).get("nccl"):
        pytest.skip("this torch has NCCL: the finding needs a CPU build")
    assert real_full.returncode == 1
    found = real_full.only("launch-backend-unavailable")
    assert found["severity"] == "error"
    assert found["evidence"]["requested"] == "nccl"
    assert "gloo" in found["evidence"]["available"]
    assert found["fix"].startswith("use init_process_group(backend='gloo') here")


# ---------------------------------------------------------------------------
# CPU
# ---------------------------------------------------------------------------

@pytest.mark.finding("cpu-affinity-restricted")
def test_affinity_narrower_than_the_machine():
    if not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs at least two usable cores to narrow the affinity mask")
    first = min(os.sched_getaffinity(0))
    result = static_run(None, preexec_fn=lambda: os.sched_setaffinity(0, {first}))
    found = result.only("cpu-affinity-restricted")
    assert found["severity"] == "info"
    assert found["evidence"]["allowed"] == {"count": 1, "cpus": str(first)}
    assert found["evidence"]["logical_cores"] == os.cpu_count()


# ---------------------------------------------------------------------------
# CUDA and torch.distributed
# ---------------------------------------------------------------------------

@pytest.mark.finding("cuda-unavailable")
def test_cuda_required_but_no_device(real_full):
    if (real_full.json["cuda"].get("device_count") or 0) > 0:
        pytest.skip("a GPU is visible here")
    assert real_full.returncode == 1
    assert real_full.json["gates"]["cuda"] == {"passed": False, "device_count": 0}
    found = real_full.only("cuda-unavailable")
    assert found["severity"] == "error"  # --require-cuda makes it an error
    if real_full.json["torch"]["cuda"] is None:
        assert "-m pip install torch" in found["fix"] and "pytorch.org/get-started" in found["fix"]

    def cuda_build(facts):
        facts["torch"]["cuda"] = "12.6"
    replayed = one(replay(real_full.json, cuda_build), "cuda-unavailable")
    assert replayed["severity"] == "info" and replayed["fix"] is None


@pytest.mark.finding("distributed-unavailable")
def test_torch_without_distributed(real_full):
    # Replayed: macOS/Windows builds without torch.distributed; Linux wheels have it.
    assert "distributed-unavailable" not in real_full.ids()

    def no_distributed(facts):
        facts["distributed"] = {"available": False, "backends": {}, "rpc_available": False}
    found = one(replay(real_full.json, no_distributed), "distributed-unavailable")
    assert found["severity"] == "info"
    gated = one(replay(real_full.json, no_distributed, "--require-distributed"), "distributed-unavailable")
    assert gated["severity"] == "error"
    assert "distributed support" in gated["fix"]
