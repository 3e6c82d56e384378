"""Install truth: the wheel table, the docs' install lines and the printed fixes agree, and the
rebuild the checker prints for a stale local build really rebuilds (proved on a real venv).

The wheel table lives in scripts/check_sampling_backends.py (WHEEL_ROWS); every install line in
README.md and references/*.md is checked against it, so the docs cannot drift from the checker.
The last test builds the broken venv of issue 12 (torch 2.14.1 with torch-scatter/torch-sparse
wheels that pip cached from a torch 2.13 build) and runs the printed rebuild for torch-scatter:
about 6 min of both cores. The torch 2.14.1 venv is the one the GPU tests use (conftest's
SCALABLE_DISTRIBUTED_CUDA_PYTHON, prepared by .ci/run with torch_geometric 2.8.1 and scipy; it is only read: the broken venv sees it through a
.pth file); without it the test installs that stack itself (about 5.5 GB).
"""

import base64
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from support import fakes
from conftest import (CUDA_PYTHON_VARIABLE, DEFAULT_CUDA_PYTHON, ENABLE, ROOT, clean_env, invoke_checker,
                      load_checker)

DOCS = [ROOT / "README.md"] + sorted((ROOT / "references").glob("*.md"))
WHEEL_LINE = re.compile(r"https://data\.pyg\.org/whl/torch-(\d+\.\d+)\.(\d+)\+(\w+)\.html")
PINNED = re.compile(r"\b(torch-scatter|torch-sparse|torch-cluster|torch-spline-conv)==([\w.]+)")


checker = load_checker()


def install_lines():
    """(file, line number, text) of every line in the docs that runs pip install."""
    for path in DOCS:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"pip install ", line):
                yield path.relative_to(ROOT), number, line


def named_packages(line):
    """The requirement names a `pip install ... -f URL` line installs (its flags and URL left out)."""
    command = line[line.index("pip install ") + len("pip install "):]
    command = command.split("`")[0].split("  #")[0]
    words = command.split()
    names = []
    for word in words:
        if word == "-f" or word.startswith("http"):
            break
        if not word.startswith("-"):
            names.append(word.replace("_", "-").lower())
    return names


# The table itself (its rows, lookups and install lines): tests/fast/test_checker_wheel_table.py

# ---------------------------------------------------------------------------
# The docs agree with the table
# ---------------------------------------------------------------------------

def test_every_wheel_index_line_in_the_docs_names_only_wheels_the_table_lists():
    checked = 0
    for path, number, line in install_lines():
        match = WHEEL_LINE.search(line)
        if not match:
            continue
        minor, patch, variant = match.groups()
        where = "%s:%d: %s" % (path, number, line.strip())
        assert patch == "0", where + " (the index pages use X.Y.0)"
        assert "--only-binary=:all:" in line, where + " (a missing wheel must fail fast, not compile)"
        for name in named_packages(line):
            status = checker.wheel_status(name, minor, variant, "linux-x86_64", (3, 11, 0))
            assert status["wheel"] is True, "%s names %s: %s" % (where, name, status["reason"])
        checked += 1
    assert checked >= 1  # README's line; the references point at --wheels instead of restating wheel lines


def test_every_source_build_line_in_the_docs_is_the_checkers_rebuild():
    versions = dict(checker.SOURCE_BUILDS)
    checked = 0
    for path, number, line in install_lines():
        if "--no-build-isolation" not in line or "keeps pip's wheel cache" in line:
            continue  # a line that says it keeps the cache is the one meant to fill it (Skipped tests)
        where = "%s:%d: %s" % (path, number, line.strip())
        assert checker.SOURCE_BUILD_FLAGS in line, where + " (without --no-cache-dir pip reuses a stale wheel)"
        pins = PINNED.findall(line)
        assert pins, where + " (pinned versions)"
        for dist, version in pins:
            assert versions[dist] == version, where
        checked += 1
    assert checked >= 1  # README's line; the references point at --wheels instead of restating wheel lines


def test_docs_build_torch_scatter_before_torch_sparse_and_give_one_time_figure():
    figure = checker.source_build_time(("torch-scatter", "torch-sparse"))
    for path in DOCS:
        text = path.read_text()
        scatter, sparse = text.find("torch-scatter==2.1.2"), text.find("torch-sparse==0.6.18")
        if sparse != -1:
            assert -1 < scatter < sparse, path
        for stated in re.findall(r"about \d+ min on 2 cores", text):
            assert stated == figure, (path, stated, figure)
    readme = (ROOT / "README.md").read_text()
    assert figure in readme


def test_readme_wheel_line_is_what_the_checker_prints_here(real_static_install):
    command = real_static_install["command"]
    assert command is not None
    line = command.replace(real_static_install["python"], "python3", 1)
    assert line in (ROOT / "README.md").read_text()


@pytest.fixture(scope="module")
def real_static_install():
    result = invoke_checker("--static-only")
    install = dict(result.json["install"])
    install["python"] = shlex.quote(sys.executable)
    return install


# ---------------------------------------------------------------------------
# Stale local builds (a fake one with a fake pip cache, laid out as pip lays it out)
# ---------------------------------------------------------------------------

def cache_wheel(cache, root, dist_info, wheel_name, tamper=False):
    """Pack the files a RECORD lists into pip's wheel-cache layout (wheels/<2>/<2>/<2>/<rest>/)."""
    folder = cache / "wheels" / "ab" / ("cd" if not tamper else "ef") / "01" / "23456789"
    folder.mkdir(parents=True)
    files = {}
    record = []
    for line in (Path(dist_info) / "RECORD").read_text().splitlines():
        name = line.split(",", 1)[0]
        files[name] = (root / name).read_bytes()
        if tamper and name.endswith(".so"):
            files[name] += b"\0"  # another build of the same version, with its own RECORD hash
            digest = base64.urlsafe_b64encode(hashlib.sha256(files[name]).digest()).rstrip(b"=").decode()
            line = "%s,sha256=%s,%d" % (name, digest, len(files[name]))
        record.append(line)
    with zipfile.ZipFile(folder / wheel_name, "w") as wheel:
        for name, data in files.items():
            wheel.writestr(name, "\n".join(record) + "\n" if name.endswith("/RECORD") else data)
    return folder / wheel_name


@pytest.mark.finding("ext-stale-local-build")
def test_stale_local_build_is_named_with_the_cached_wheel_it_came_from(tmp_path):
    root = tmp_path / "site"
    root.mkdir()
    dist_info = fakes.fake_extension(root, "torch-scatter", "torch_scatter", "2.1.2", failure="undefined-symbol")
    cache = tmp_path / "pip-cache"
    name = "torch_scatter-2.1.2-cp311-cp311-linux_x86_64.whl"
    same = cache_wheel(cache, root, dist_info, name)
    other = cache_wheel(cache, root, dist_info, name, tamper=True)
    env = clean_env({"PYTHONPATH": str(root), "PIP_CACHE_DIR": str(cache)})
    result = invoke_checker(env=env)
    found = result.only("ext-stale-local-build")
    assert found["severity"] == "error"
    assert found["evidence"]["distribution"] == "torch-scatter"
    assert sorted(found["evidence"]["pip_cache_wheels"]) == sorted([str(same), str(other)])
    assert found["evidence"]["installed_binary_is_cached_wheel"] == str(same)
    assert "--force-reinstall" in found["evidence"]["trap"] and "--no-cache-dir" in found["evidence"]["trap"]
    python = shlex.quote(sys.executable)
    assert found["fix"].startswith(
        "%s -m pip install --force-reinstall --no-deps --no-cache-dir --no-build-isolation torch-scatter==2.1.2  # "
        % python)
    assert "about 5 min on 2 cores" in found["fix"]
    # The symptom is reported as well, with the same rebuild.
    symptom = [f for f in result.findings("ext-undefined-symbol") if f["evidence"]["module"] == "torch_scatter"]
    assert symptom[0]["fix"] == found["fix"]
    # With pip's cache disabled there is nothing to compare against, but the build is still stale.
    env["PIP_NO_CACHE_DIR"] = "1"
    found = invoke_checker("--timeout", "120", env=env).only("ext-stale-local-build")
    assert found["evidence"]["pip_cache_wheels"] == [] and found["evidence"]["installed_binary_is_cached_wheel"] is None


# ---------------------------------------------------------------------------
# The real thing: issue 12's broken venv, diagnosed, then rebuilt with the printed command
# ---------------------------------------------------------------------------

CCACHE_MASQUERADE = "/usr/lib/ccache"  # Debian's ccache: gcc, g++, cc, c++ that cache


def run(command, env=None, **options):
    return subprocess.run([str(c) for c in command], capture_output=True, text=True, env=env or clean_env(),
                          stdin=subprocess.DEVNULL, **options)


def torch_214_site(tmp_path_factory):
    """site-packages holding torch 2.14.1, torch_geometric 2.8.1 and scipy (prepared, or installed now)."""
    prepared = Path(os.environ.get(CUDA_PYTHON_VARIABLE) or DEFAULT_CUDA_PYTHON)
    if prepared.exists():
        python = prepared
    else:
        venv = tmp_path_factory.mktemp("torch214") / "venv"
        run([sys.executable, "-m", "venv", venv], check=True)
        python = venv / "bin" / "python"
        run([python, "-m", "pip", "install", "-q", "torch==2.14.1", "torch_geometric==2.8.1", "scipy"],
            check=True, timeout=3600)
    code = "import sysconfig, torch; print(sysconfig.get_paths()['purelib']); print(torch.__version__)"
    site, version = run([python, "-c", code], check=True).stdout.split()
    assert version.startswith("2.14.1"), version
    return site


def cached_wheel(python, name):
    listed = run([python, "-m", "pip", "cache", "list", name, "--format=abspath"]).stdout.split()
    return [path for path in listed if path.endswith(".whl")]


BUILD_TOOLS = ("pip", "setuptools", "wheel", "_distutils_hack", "pkg_resources", "distutils-precedence")


def linked_site(site):
    """A folder beside `site` linking to everything in it but the build tools, made once and reused: torch's
    include folder is then found at the same path in every run (ccache reuses a compile only for the same
    command line)."""
    linked = Path(site).parent / "site-packages-without-build-tools"
    wanted = sorted(entry.name for entry in Path(site).iterdir()
                    if not entry.name.lower().startswith(BUILD_TOOLS) and not entry.name.endswith(".pth"))
    if not linked.is_dir() or sorted(os.listdir(linked)) != wanted:
        shutil.rmtree(str(linked), ignore_errors=True)
        linked.mkdir()
        for name in wanted:
            (linked / name).symlink_to(Path(site) / name)
    return linked


@pytest.fixture(scope="module")
def stale_venv(tmp_path_factory):
    """Issue 12's venv: torch 2.14.1 plus the torch-scatter 2.1.2 / torch-sparse 0.6.18 wheels pip
    cached when .ci/run built them against torch 2.13, reinstalled from that cache as pip does."""
    base = Path(getattr(sys, "_base_executable", sys.executable))
    for name in ("torch_scatter", "torch_sparse"):
        if not cached_wheel(sys.executable, name):
            message = "pip's wheel cache holds no %s wheel built against torch 2.13; enable: %s" % (
                name, ENABLE["wheel-cache"])
            if os.environ.get("CI") == "true":
                pytest.fail(message)
            pytest.skip(message)
    site = torch_214_site(tmp_path_factory)
    # As plain as a user's venv: what this CPython's own `-m venv` gives (3.11.7: pip 23.2.1, setuptools
    # 65.5.0, no wheel). The torch 2.14.1 stack comes in through a .pth, without its build tools.
    venv = tmp_path_factory.mktemp("stale") / "venv"
    run([base, "-m", "venv", venv], check=True)
    python = venv / "bin" / "python"
    version = "python%d.%d" % sys.version_info[:2]
    (venv / "lib" / version / "site-packages" / "torch-2.14.pth").write_text("%s\n" % linked_site(site))
    shown = run([python, "-m", "pip", "show", "torch"], check=True).stdout
    assert "Version: 2.14.1" in shown  # pip sees the linked torch as installed
    installed = run([python, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                     "torch-scatter==2.1.2", "torch-sparse==0.6.18"], check=True, timeout=1800)
    assert installed.stdout.count("Using cached torch_s") == 2, installed.stdout
    return python


@pytest.mark.finding("ext-stale-local-build")
def test_real_stale_build_is_diagnosed_and_the_printed_rebuild_works(stale_venv):
    python = stale_venv
    broken = run([python, "-c", "import torch_scatter"])
    assert "Could not load this library" in broken.stderr

    # What the user reads first: the compact document, within budget, every error with its fix.
    compact = invoke_checker("--python", python, "--timeout", "150", timeout=400, detail="compact")
    assert len(compact.stdout) < 10000, len(compact.stdout)
    assert {"ext-undefined-symbol", "ext-stale-local-build", "neighbor-sampling-unavailable"} <= set(compact.ids())
    assert all(f["fix"] for f in compact.json["findings"] if f["severity"] == "error")
    result = invoke_checker("--python", python, "--timeout", "150", "--full", timeout=400)  # every detail
    symptoms = {f["evidence"]["module"] for f in result.findings("ext-undefined-symbol")}
    assert {"torch_scatter", "torch_sparse"} <= symptoms
    stale = {f["evidence"]["module"]: f for f in result.findings("ext-stale-local-build")}
    assert set(stale) == {"torch_scatter", "torch_sparse"}
    for module, found in stale.items():
        assert found["evidence"]["torch"].startswith("2.14.1")
        assert found["evidence"]["installed_binary_is_cached_wheel"], module  # byte-identical to pip's cache
    py = shlex.quote(str(python))
    # The build prerequisites this plain venv lacks come first (setuptools < 70.1 has no bdist_wheel of
    # its own: without `wheel` the build ends in "error: invalid command 'bdist_wheel'").
    seen = result.json["python"]["build_prerequisites"]
    assert seen["wheel"] is None and seen["compiler"] and seen["python_headers"], seen
    needed = ([] if seen["setuptools"] and tuple(map(int, seen["setuptools"].split(".")[:2])) >= (70, 1) else
              ["wheel"] if seen["setuptools"] else ["setuptools"])
    prerequisites = "{py} -m pip install %s && " % " ".join(needed) if needed else ""
    rebuild = (prerequisites + "{py} -m pip install --force-reinstall --no-deps --no-cache-dir --no-build-isolation "
               "torch-scatter==2.1.2 && {py} -m pip install --force-reinstall --no-deps --no-cache-dir "
               "--no-build-isolation torch-sparse==0.6.18").format(py=py)
    assert stale["torch_scatter"]["fix"].startswith(rebuild + "  # torch-scatter, torch-sparse: no wheel for torch "
                                                    "2.14+cu130")
    install = result.json["install"]
    assert install["command"] == "%s -m pip install --only-binary=:all: pyg_lib -f " \
        "https://data.pyg.org/whl/torch-2.14.0+cu130.html" % py
    assert result.only("no-scatter-sparse-wheels")["evidence"]["missing"] == ["torch-scatter"]

    # The printed wheel line names only what exists, so it either installs or fails fast, as predicted.
    attempt = run(shlex.split(install["command"]), timeout=900)
    assert attempt.returncode == 0 or install["error_without_index"] in attempt.stderr, attempt.stderr[-2000:]

    # The trap: a reinstall that keeps pip's cache "succeeds" and changes nothing.
    trap = run([python, "-m", "pip", "install", "--force-reinstall", "--no-deps", "--no-build-isolation",
                "torch-scatter==2.1.2"], check=True, timeout=1800)
    assert "Successfully installed torch-scatter-2.1.2" in trap.stdout
    assert "Could not load this library" in run([python, "-c", "import torch_scatter"]).stderr

    # The printed rebuild, run as printed up to torch-scatter's build (a real build against torch 2.14.1;
    # torch-sparse's would take 15 more minutes), from another folder. The same command, sooner: torch-scatter
    # builds without ninja, one extension after another, and a distutils config (what a user's
    # ~/.pydistutils.cfg may hold) builds them side by side; where ccache is installed (.ci/run installs it) the
    # compiler runs through it, so a later run reuses the objects of identical compiles and still links.
    parallel = stale_venv.parent.parent / "parallel-build.cfg"
    parallel.write_text("[build_ext]\nparallel = %d\n" % max(2, os.cpu_count() or 2))
    build_env = {"DIST_EXTRA_CONFIG": str(parallel)}
    if os.path.isdir(CCACHE_MASQUERADE):
        build_env.update(PATH=CCACHE_MASQUERADE + os.pathsep + os.environ.get("PATH", os.defpath),
                         CCACHE_NOHASHDIR="1")  # pip builds in a new temp folder each time
    commands = stale["torch_scatter"]["fix"].split("  # ")[0].split(" && ")
    for command in commands[:next(i for i, c in enumerate(commands) if "torch-scatter==" in c) + 1]:
        built = run(shlex.split(command), timeout=3600, cwd="/",  # a bound for a hung build, not a benchmark
                    env=clean_env(build_env))
        assert built.returncode == 0, (command, built.stdout[-3000:] + built.stderr[-3000:])
    works = run([python, "-c", "import torch_scatter, json; print(json.dumps(torch_scatter.__version__))"])
    assert works.returncode == 0, works.stderr[-2000:]
    assert json.loads(works.stdout) == "2.1.2"

    again = invoke_checker("--python", python, "--timeout", "150", "--full", timeout=400)
    assert again.json["extensions"]["torch_scatter"]["status"] == "ok"
    assert "torch_scatter" not in {f["evidence"]["module"] for f in again.findings("ext-stale-local-build")}
