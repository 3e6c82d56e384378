"""Fake PyG extension packages that fail the way real broken wheels fail.

Every helper writes into a caller-given ``root`` directory and nowhere else.
Put ``root`` first on ``PYTHONPATH`` of the probed interpreter: the fakes then
shadow the real installed modules and distributions of the same name.

Compiled fakes are built with ``gcc`` and loaded through
``torch.ops.load_library`` exactly like torch-sparse and pyg-lib load theirs,
so the dynamic loader itself produces the error and torch wraps it:
``OSError('Could not load this library: <path>')`` whose ``__cause__`` is the
loader's ``OSError`` (torch >= 2.9, pytorch/pytorch#157524). Where a failure
cannot be produced honestly on this machine (a CUDA version check that only
runs on a CUDA build of torch), the fake raises the same exception type with
the package's own message format; each docstring says which.

F-numbers refer to section 3 of the research notes (diagnostics.md).
"""

import base64
import builtins
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
import textwrap

# The shared library each real package loads first, inside its package folder.
# pyg-lib >= 0.7 ships pyg_lib/libpyg.so; torch-scatter/-sparse/-cluster/
# -spline-conv load _version_cpu.so (or _version_cuda.so) first.
FIRST_LIBRARY = {"pyg_lib": "libpyg.so"}
DEFAULT_LIBRARY = "_version_cpu.so"

# The torch operator namespace of each package (torch.ops.<namespace>).
OP_NAMESPACE = {"pyg_lib": "pyg"}

# A C++ symbol that torch builds before the C++11 ABI switch exported and
# torch 2.13 does not: the F1 text of rusty1s/pytorch_sparse#250.
OLD_TORCH_SYMBOL = "_ZN5torch3jit17parseSchemaOrNameERKSs"

HEADER = "# Fake {module} written by tests/support/fakes.py: {what}\n"


# --------------------------------------------------------------------------
# Generic building blocks
# --------------------------------------------------------------------------

def make_package(root, module, init_source, files=None):
    """Write package ``root/<module>/`` with ``__init__.py`` = ``init_source``.

    ``files`` maps further paths inside the package (``"sampler/__init__.py"``)
    to their source. Returns the package directory.
    """
    package = os.path.join(root, module)
    sources = {"__init__.py": init_source, **(files or {})}
    for relative, source in sources.items():
        path = os.path.join(package, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(source)
    return package


def library_path(root, module):
    """Where the fake of ``module`` keeps its compiled library."""
    return os.path.join(root, module, FIRST_LIBRARY.get(module, DEFAULT_LIBRARY))


def _load_library_package(root, module, what, extra_source="", files=None):
    """A package whose ``__init__`` loads its library the way the real one does."""
    name = os.path.basename(library_path(root, module))
    source = HEADER.format(module=module, what=what) + textwrap.dedent(f"""\
        import os.path as osp

        import torch

        torch.ops.load_library(osp.join(osp.dirname(__file__), {name!r}))
        """) + extra_source
    return make_package(root, module, source, files)


def _torch_libraries():
    """libc10.so and libtorch_cpu.so of the torch this process would import.

    Real extension libraries list both as DT_NEEDED without an rpath and rely
    on ``import torch`` having loaded them; the fakes do the same. Without
    torch here the fakes are linked without them (same loader errors).
    """
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return []
    lib = os.path.join(os.path.dirname(spec.origin), "lib")
    paths = [os.path.join(lib, name) for name in ("libc10.so", "libtorch_cpu.so")]
    return paths if all(os.path.exists(p) for p in paths) else []


def _gcc(build, output, c_source, *link_inputs, soname=None, version_script=None):
    """Compile ``c_source`` into the shared library ``output`` with gcc."""
    if shutil.which("gcc") is None:
        raise RuntimeError("tests/support/fakes.py needs gcc to build its fake libraries")
    source = os.path.join(build, os.path.basename(output) + ".c")
    with open(source, "w") as handle:
        handle.write(c_source)
    command = ["gcc", "-shared", "-fPIC", "-fno-builtin", "-o", output, source]
    if soname:
        command.append("-Wl,-soname," + soname)
    if version_script:
        command.append("-Wl,--version-script=" + version_script)
    # --no-as-needed keeps DT_NEEDED entries even for libraries we take no
    # symbol from (the torch libraries), as real extensions have them.
    command += ["-Wl,--no-as-needed", *link_inputs]
    # TMPDIR keeps gcc's own intermediate files inside root too.
    done = subprocess.run(command, capture_output=True, text=True,
                          env={**os.environ, "TMPDIR": build})
    if done.returncode != 0:
        raise RuntimeError(f"gcc failed building {output}:\n{done.stderr}")
    return output


def _build_library(root, module, c_source, stubs=()):
    """Build the fake's library, linked against throw-away ``stubs``.

    ``stubs`` are ``(soname, c_source, version_script_or_None)``: stand-in
    libraries that exist only while linking, so the result records a
    dependency (DT_NEEDED, and symbol versions) the real system cannot meet.
    All intermediate files live in a temporary folder inside ``root``.
    """
    os.makedirs(root, exist_ok=True)
    build = tempfile.mkdtemp(prefix=".fakes-build-", dir=root)
    try:
        stub_paths = []
        for soname, stub_source, version_script in stubs:
            script = None
            if version_script:
                script = os.path.join(build, soname + ".map")
                with open(script, "w") as handle:
                    handle.write(version_script)
            stub_paths.append(_gcc(build, os.path.join(build, soname), stub_source,
                                   soname=soname, version_script=script))
        output = library_path(root, module)
        os.makedirs(os.path.dirname(output), exist_ok=True)
        return _gcc(build, output, c_source, *stub_paths, *_torch_libraries())
    finally:
        shutil.rmtree(build)


# --------------------------------------------------------------------------
# Failures at import time
# --------------------------------------------------------------------------

def fake_undefined_symbol(root, module="torch_sparse", symbol=OLD_TORCH_SYMBOL):
    """Extension built for another torch: a genuine dlopen failure (F1).

    The library references ``symbol``, which this torch does not export, and
    ``__init__`` loads it with ``torch.ops.load_library``. Real torch 2.13
    raises ``OSError('Could not load this library: <lib>')`` from
    ``OSError('<lib>: undefined symbol: <symbol>')``.
    https://github.com/rusty1s/pytorch_sparse/issues/250
    """
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", symbol):
        raise ValueError(f"not a linkable symbol name: {symbol!r}")
    _build_library(root, module, textwrap.dedent(f"""\
        extern void {symbol}(void);
        void fake_register_ops(void) {{ {symbol}(); }}
        """))
    return _load_library_package(root, module, f"F1, undefined symbol {symbol}")


def fake_cuda_runtime_missing(root, module="pyg_lib", soname="libcudart.so.11.0"):
    """CUDA wheel on a machine without that CUDA runtime: genuine dlopen failure (F7).

    The library is linked against a stub ``soname`` that is deleted after
    linking, so the loader really cannot find it. torch 2.13 raises
    ``OSError('Could not load this library: <lib>')`` from
    ``OSError('libcudart.so.11.0: cannot open shared object file: No such file
    or directory')``. Pass ``soname='libc10_cuda.so'`` for a CUDA build of an
    extension beside a CPU-only torch (pyg-team/pytorch_geometric#3904).
    https://github.com/pyg-team/pytorch_geometric/issues/9636
    """
    stub = (soname, "int cudaGetDeviceCount(int *count) { *count = 0; return 0; }\n", None)
    _build_library(root, module, textwrap.dedent("""\
        extern int cudaGetDeviceCount(int *count);
        int fake_device_count(void) { int n; cudaGetDeviceCount(&n); return n; }
        """), stubs=[stub])
    return _load_library_package(root, module, f"F7, needs missing {soname}")


def fake_glibc_too_old(root, module="pyg_lib", glibc_version="GLIBC_2.99",
                       library="libm.so.6", symbol="exp"):
    """manylinux wheel built against a newer glibc: genuine loader failure (F8).

    The library is linked against a stub ``library`` whose ``symbol`` carries
    the version node ``glibc_version``; the stub is deleted, so at load time
    the system's real ``library`` is used and lacks that version. torch 2.13
    raises ``OSError('Could not load this library: <lib>')`` from
    ``OSError("/lib/x86_64-linux-gnu/libm.so.6: version `GLIBC_2.99' not found
    (required by <lib>)")``.
    https://github.com/pyg-team/pyg-lib/issues/363
    """
    stub = (library, f"double {symbol}(double x) {{ return x; }}\n",
            f"{glibc_version} {{ global: {symbol}; local: *; }};\n")
    _build_library(root, module, textwrap.dedent(f"""\
        extern double {symbol}(double x);
        double fake_kernel(double x) {{ return {symbol}(x); }}
        """), stubs=[stub])
    return _load_library_package(root, module, f"F8, needs {glibc_version} of {library}")


def fake_cuda_mismatch(root, module="torch_sparse", torch_cuda="12.6", extension_cuda="11.8"):
    """CUDA major version of the extension differs from torch's (F2). Raised message.

    torch-sparse and torch-scatter compare ``torch.version.cuda`` with their
    own ``cuda_version()`` after loading their libraries; on a CPU-only torch
    that branch never runs, so the fake raises the same ``RuntimeError`` with
    the text format of ``torch_sparse/__init__.py`` 0.6.18 (identical in
    torch_scatter 2.1.2).
    https://github.com/rusty1s/pytorch_sparse/issues/122
    """
    message = (f"Detected that PyTorch and {module} were compiled with different CUDA "
               f"versions. PyTorch has CUDA version {torch_cuda} and {module} has CUDA "
               f"version {extension_cuda}. Please reinstall the {module} that matches "
               f"your PyTorch install.")
    source = HEADER.format(module=module, what="F2, CUDA version mismatch (raised)")
    source += f"import torch\n\nraise RuntimeError({message!r})\n"
    return make_package(root, module, source)


def block_module(root, module):
    """Make ``module`` look not installed to imports from ``root``.

    Writes ``root/<module>/__init__.py`` that raises what the import system
    raises for an absent module: ``ModuleNotFoundError("No module named
    '<module>'", name='<module>')``. Raised message: ``find_spec`` still finds
    the blocker, and a real distribution's metadata stays visible.
    """
    message = f"No module named {module!r}"
    source = HEADER.format(module=module, what="stands in for an absent module")
    source += f"raise ModuleNotFoundError({message!r}, name={module!r})\n"
    return make_package(root, module, source)


def fake_missing_dependency(root, module="torch_sparse", dependency="torch_scatter",
                            block_dependency=True):
    """Package whose import needs another, absent package (F5).

    Like torch-sparse 0.6.18 without torch-scatter (its ``install_requires``
    omits it): ``import torch_sparse`` ends in
    ``ModuleNotFoundError: No module named 'torch_scatter'`` raised from a
    submodule, and PyG silently disables torch-sparse. The import of
    ``dependency`` is genuine; with ``block_dependency`` (default) a
    ``block_module`` stand-in shadows an installed ``dependency`` so the
    failure also happens where it is installed, as in this venv. Pass False
    when the probed interpreter really lacks ``dependency``.
    https://github.com/benedekrozemberczki/APPNP/issues/2
    """
    if block_dependency:
        block_module(root, dependency)
    source = HEADER.format(module=module, what=f"F5, needs absent {dependency}")
    source += "import torch\n\nfrom .storage import SparseStorage  # noqa: F401\n"
    storage = f"import {dependency}  # noqa: F401\n\n\nclass SparseStorage:\n    pass\n"
    return make_package(root, module, source, files={"storage.py": storage})


def fake_operator_missing(root, module="pyg_lib"):
    """Imports fine, but its sampling operators are not registered (F15).

    A stale or partial build: the library loads and ``<namespace>::cuda_version``
    is registered (returns -1 like a CPU build), nothing else. Touching
    ``torch.ops.<namespace>.neighbor_sample`` (through
    ``<module>.sampler.neighbor_sample``, or PyG's NeighborSampler for pyg_lib)
    raises torch's own ``AttributeError: '_OpNamespace' 'pyg' object has no
    attribute 'neighbor_sample'``, and
    ``torch._C._dispatch_find_schema_or_throw('pyg::neighbor_sample', '')``
    raises ``RuntimeError: Could not find schema for pyg::neighbor_sample.``
    The namespace is ``pyg`` for pyg_lib, else the module name.
    https://github.com/rusty1s/pytorch_sparse/issues/179
    """
    namespace = OP_NAMESPACE.get(module, module)
    _build_library(root, module, "int fake_library_loaded = 1;\n")
    # The registration object must live as long as the module, hence a global.
    registration = textwrap.dedent(f"""\

        _LIBRARY = torch.library.Library({namespace!r}, "FRAGMENT")
        _LIBRARY.define("cuda_version() -> int")
        _LIBRARY.impl("cuda_version", lambda: -1, "CompositeExplicitAutograd")

        from . import ops, sampler  # noqa: E402,F401
        """)
    # Parameter names follow pyg-lib's sampler API: PyG inspects them.
    sampler = textwrap.dedent(f"""\
        import torch


        def neighbor_sample(rowptr, col, seed, num_neighbors, node_time=None,
                            edge_time=None, seed_time=None, edge_weight=None,
                            csc=False, replace=False, directed=True, disjoint=False,
                            temporal_strategy='uniform', return_edge_id=True):
            return torch.ops.{namespace}.neighbor_sample(
                rowptr, col, seed, num_neighbors, node_time, edge_time, seed_time,
                edge_weight, csc, replace, directed, disjoint, temporal_strategy,
                return_edge_id)
        """)
    return _load_library_package(root, module, f"F15, {namespace} ops not registered",
                                 extra_source=registration,
                                 files={"ops/__init__.py": "", "sampler/__init__.py": sampler})


def fake_wrong_sampler(root, module="pyg_lib"):
    """Imports fine and samples, but wrongly (finding neighbor-smoke-failed).

    Pure Python: ``<module>.sampler.neighbor_sample`` returns one self-loop per
    seed, an edge the graph does not have, the way a miscompiled or
    ABI-mismatched kernel returns garbage instead of raising. ``ops`` exists,
    so PyG's typing.py sets WITH_PYG_LIB and picks it as the backend.
    """
    sampler = textwrap.dedent("""\
        import torch


        def neighbor_sample(rowptr, col, seed, num_neighbors, node_time=None,
                            edge_time=None, seed_time=None, edge_weight=None,
                            csc=False, replace=False, directed=True, disjoint=False,
                            temporal_strategy='uniform', return_edge_id=True):
            index = torch.arange(seed.numel())
            return index, index, seed.clone(), None, [seed.numel()], [seed.numel()]
        """)
    source = HEADER.format(module=module, what="samples wrong edges") + "from . import ops, sampler  # noqa: F401\n"
    return make_package(root, module, source, files={"ops/__init__.py": "", "sampler/__init__.py": sampler})


def fake_segfault(root, module):
    """Import killed by SIGSEGV (F11): ``ctypes.string_at(0)`` reads address 0.

    The probing process exits with return code -11 (SIGSEGV).
    https://github.com/pyg-team/pytorch_geometric/issues/6878
    """
    source = HEADER.format(module=module, what="F11, segfault on import")
    source += "import ctypes\n\nctypes.string_at(0)\n"
    return make_package(root, module, source)


def fake_hang(root, module):
    """Import that never finishes (finding ext-import-hung; no F-number).

    Sleeps forever; only a deadline in the prober ends it.
    """
    source = HEADER.format(module=module, what="import never finishes")
    source += "import time\n\nwhile True:\n    time.sleep(60)\n"
    return make_package(root, module, source)


def fake_raises(root, module, exc_type, message, cause=None):
    """Import raises ``exc_type(message)``, chained ``from`` ``cause`` if given.

    ``exc_type`` and ``cause[0]`` are builtin exception classes; ``cause`` is
    ``(exc_type, message)``. For texts that cannot be produced on Linux, e.g.
    Windows ``OSError('[WinError 127] The specified procedure could not be
    found')`` (F10) or macOS ``Symbol not found`` (F9), raised message.
    """
    def spelled(kind, text):
        if getattr(builtins, kind.__name__, None) is not kind:
            raise ValueError(f"{kind!r} is not a builtin exception")
        return f"{kind.__name__}({text!r})"

    raised = f"raise {spelled(exc_type, message)}"
    if cause is not None:
        raised += f" from {spelled(*cause)}"
    source = HEADER.format(module=module, what=f"raises {exc_type.__name__} (raised)")
    return make_package(root, module, source + raised + "\n")


# Keys are the checker's finding ids without the "ext-" prefix.
FAILURES = {
    "undefined-symbol": fake_undefined_symbol,
    "cuda-mismatch": fake_cuda_mismatch,
    "cuda-runtime-missing": fake_cuda_runtime_missing,
    "glibc-too-old": fake_glibc_too_old,
    "missing-dependency": fake_missing_dependency,
    "operator-missing": fake_operator_missing,
    "import-crashed": fake_segfault,
    "import-hung": fake_hang,
    "import-error": fake_raises,
}


# --------------------------------------------------------------------------
# Installation metadata
# --------------------------------------------------------------------------

def dist_info_name(name, version):
    """``torch-sparse``, ``0.6.18+pt213cpu`` -> ``torch_sparse-0.6.18+pt213cpu.dist-info``."""
    return f"{re.sub(r'[-_.]+', '_', name)}-{version}.dist-info"


def _expand_tags(wheel_tag):
    """One ``Tag:`` line per tag, as wheel writers expand compressed tag sets."""
    tags = [wheel_tag] if isinstance(wheel_tag, str) else list(wheel_tag)
    lines = []
    for tag in tags:
        python, abi, platform = tag.split("-")
        lines += [f"{p}-{a}-{plat}" for p in python.split(".")
                  for a in abi.split(".") for plat in platform.split(".")]
    return lines


def _record_line(root, path):
    with open(path, "rb") as handle:
        data = handle.read()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{os.path.relpath(path, root)},sha256={digest},{len(data)}"


def _package_files(root, top_level):
    for module in top_level:
        single = os.path.join(root, module + ".py")
        if os.path.isfile(single):
            yield single
        for folder, _, names in os.walk(os.path.join(root, module)):
            yield from (os.path.join(folder, n) for n in sorted(names))


def fake_distribution(root, name, version, wheel_tag="cp311-cp311-linux_x86_64",
                      installer="pip", top_level=None, record=True, requires=(), requires_python=None):
    """Write ``root/<name>-<version>.dist-info`` as an installer would.

    METADATA (Name, Version, Requires-Python, Requires-Dist), WHEEL (one ``Tag:`` line per tag;
    omitted when ``wheel_tag`` is None), INSTALLER, top_level.txt and a RECORD
    with sha256 hashes of the dist-info files and of the package files already
    under ``root``. ``importlib.metadata`` then reports e.g. pyg_lib
    ``0.9.0+pt212cu126`` or torch_sparse ``0.6.18+pt213cpu`` with tag
    ``cp311-cp311-manylinux_2_99_x86_64``: the inputs of the metadata
    predictions for F1, F2, F6, F7 and F8. Returns the dist-info path.
    """
    top_level = list(top_level or [re.sub(r"[-.]+", "_", name)])
    dist_info = os.path.join(root, dist_info_name(name, version))
    os.makedirs(dist_info, exist_ok=True)
    contents = {
        "METADATA": "Metadata-Version: 2.1\n" f"Name: {name}\n" f"Version: {version}\n"
                    + (f"Requires-Python: {requires_python}\n" if requires_python else "")
                    + "".join(f"Requires-Dist: {r}\n" for r in requires),
        "top_level.txt": "".join(m + "\n" for m in top_level),
    }
    if wheel_tag is not None:
        contents["WHEEL"] = ("Wheel-Version: 1.0\nGenerator: bdist_wheel (0.45.1)\n"
                             "Root-Is-Purelib: false\n"
                             + "".join(f"Tag: {t}\n" for t in _expand_tags(wheel_tag)))
    if installer is not None:
        contents["INSTALLER"] = installer + "\n"
    for file_name, text in contents.items():
        with open(os.path.join(dist_info, file_name), "w") as handle:
            handle.write(text)
    if record:
        files = [*_package_files(root, top_level),
                 *(os.path.join(dist_info, f) for f in sorted(contents))]
        lines = [_record_line(root, p) for p in files if "__pycache__" not in p]
        lines.append(os.path.relpath(os.path.join(dist_info, "RECORD"), root) + ",,")
        with open(os.path.join(dist_info, "RECORD"), "w") as handle:
            handle.write("\n".join(lines) + "\n")
    return dist_info


def fake_conda_install(prefix, dist_name, version, conda_name=None,
                       build="py311_torch_2.13.0_cpu", channel="https://conda.anaconda.org/pyg",
                       subdir="linux-64", depends=(), python_version="3.11", top_level=None):
    """A package installed by conda into the conda environment ``prefix``.

    Writes, as conda-build/rattler-build packages and conda itself leave them:
    - ``<prefix>/lib/pythonX.Y/site-packages/<dist>.dist-info`` whose INSTALLER
      is ``conda`` (prefix-dev/rattler-build src/post_process/python.rs
      rewrites every INSTALLER to "conda\\n"), plus any package files the
      caller already put in that site-packages;
    - ``<prefix>/conda-meta/<name>-<version>-<build>.json``, the serialized
      PrefixRecord (conda/conda conda/models/records.py; field list in the
      conda/ceps "Management and structure of conda environments" CEP), and
      ``conda-meta/history``, whose presence marks ``prefix`` a conda env.
    Conda names differ from PyPI names (pyg channel: ``pytorch-sparse`` for
    torch-sparse, build strings like ``py311_torch_2.13.0_cpu``); default
    ``conda_name`` maps ``torch-X`` to ``pytorch-X``. Put the site-packages
    on PYTHONPATH and set ``CONDA_PREFIX=prefix`` to probe it (finding
    conda-pip-mixed; rusty1s/pytorch_scatter#476).
    Returns ``(dist_info_path, conda_meta_json_path)``.
    """
    conda_name = conda_name or re.sub(r"^torch[-_]", "pytorch-", dist_name).replace("_", "-")
    site_packages = os.path.join(prefix, "lib", f"python{python_version}", "site-packages")
    os.makedirs(site_packages, exist_ok=True)
    dist_info = fake_distribution(site_packages, dist_name, version, installer="conda",
                                  wheel_tag=f"cp{python_version.replace('.', '')}-"
                                            f"cp{python_version.replace('.', '')}-linux_x86_64",
                                  top_level=top_level)
    top = list(top_level or [re.sub(r"[-.]+", "_", dist_name)])
    installed = [*_package_files(site_packages, top),
                 *(os.path.join(dist_info, f) for f in sorted(os.listdir(dist_info)))]
    files = sorted(os.path.relpath(p, prefix) for p in installed)
    fn = f"{conda_name}-{version}-{build}.tar.bz2"
    package_cache = os.path.join(prefix, "pkgs", fn[: -len(".tar.bz2")])
    paths = []
    for relative in files:
        with open(os.path.join(prefix, relative), "rb") as handle:
            data = handle.read()
        paths.append({"_path": relative, "path_type": "hardlink",
                      "sha256": hashlib.sha256(data).hexdigest(), "size_in_bytes": len(data)})
    # There is no real tarball: its checksums are those of its file name.
    record = {
        "build": build, "build_number": 0, "channel": channel, "constrains": [],
        "depends": list(depends), "extracted_package_dir": package_cache, "files": files,
        "fn": fn, "license": "MIT", "link": {"source": package_cache, "type": 1},
        "md5": hashlib.md5(fn.encode()).hexdigest(), "name": conda_name,
        "package_tarball_full_path": package_cache + ".tar.bz2",
        "paths_data": {"paths": paths, "paths_version": 1},
        "requested_spec": conda_name, "sha256": hashlib.sha256(fn.encode()).hexdigest(),
        "size": 0, "subdir": subdir, "timestamp": 1700000000000,
        "url": f"{channel}/{subdir}/{fn}", "version": version,
    }
    conda_meta = os.path.join(prefix, "conda-meta")
    os.makedirs(conda_meta, exist_ok=True)
    history = os.path.join(conda_meta, "history")
    if not os.path.exists(history):
        open(history, "w").close()
    meta_path = os.path.join(conda_meta, f"{conda_name}-{version}-{build}.json")
    with open(meta_path, "w") as handle:
        json.dump(record, handle, indent=2, sort_keys=True)
    return dist_info, meta_path


# --------------------------------------------------------------------------
# Both at once
# --------------------------------------------------------------------------

def fake_extension(root, dist_name, module, version, failure="undefined-symbol",
                   wheel_tag="cp311-cp311-linux_x86_64", installer="pip", **failure_options):
    """Fake package ``module`` failing as ``failure`` plus its distribution metadata.

    ``failure`` is a key of ``FAILURES`` (the finding id without ``ext-``) or
    None for metadata only (then the installed module, if any, is not
    shadowed). ``failure_options`` go to the failure's helper. Returns the
    dist-info path.
    """
    if failure is not None:
        FAILURES[failure](root, module, **failure_options)
    return fake_distribution(root, dist_name, version, wheel_tag=wheel_tag,
                             installer=installer, top_level=[module])


# ---------------------------------------------------------------------------
# Fake checker facts: what the static stage and the probe child report for a typical environment (torch 2.13
# CPU build, PyG 2.8.1, torch-scatter and torch-sparse source builds, no pyg-lib, no GPU), assembled by the
# checker's own code. The fast tier edits copies and replays the rules, rendering and fixes on them.
# ---------------------------------------------------------------------------

FAKE_PYTHON = "/venvs/pyg/bin/python"
FAKE_SITE = "/venvs/pyg/lib/python3.11/site-packages"


def fake_record(name, version, module, tags=("cp311-cp311-linux_x86_64",), site=FAKE_SITE, requires_python=None):
    """One install record as static_facts.get_distribution_record reads it from a .dist-info."""
    local = version.split("+", 1)[1] if "+" in version else None
    tag = None
    if local:
        match = re.match(r"^pt(\d)(\d+)(cpu|cu\d+)$", local)
        tag = {"raw": local, "torch": "%s.%s" % match.groups()[:2] if match else None,
               "variant": match.group(3) if match else None}
    return {"name": name, "version": version, "local_tag": tag, "wheel_tags": list(tags), "installer": "pip",
            "location": site, "metadata_dir": "%s/%s-%s.dist-info" % (site, module, version.split("+")[0]),
            "top_level": [module], "requires_python": requires_python, "editable_or_url": False}


def fake_static_facts(python=FAKE_PYTHON):
    """The static stage's sections for the typical environment (see above)."""
    prefix = python.rsplit("/bin/", 1)[0]
    installed = {
        "torch": fake_record("torch", "2.13.0+cpu", "torch"),
        "torch-geometric": fake_record("torch_geometric", "2.8.1", "torch_geometric", ("py3-none-any",),
                                       requires_python=">=3.10"),
        "torch-scatter": fake_record("torch_scatter", "2.1.2", "torch_scatter"),
        "torch-sparse": fake_record("torch_sparse", "0.6.18", "torch_sparse"),
        "numpy": fake_record("numpy", "2.3.0", "numpy"),
    }
    tracked = ("torch", "torch-geometric", "pyg-nightly", "pyg-lib", "torch-sparse", "torch-scatter", "torch-cluster",
               "torch-spline-conv", "psutil", "numpy")
    packages = dict((name, {"installed": name in installed, "version": installed[name]["version"]
                            if name in installed else None, "installs": [installed[name]] if name in installed else []})
                    for name in tracked)
    return {
        "python": {"version": "3.11.7", "implementation": "CPython", "executable": python, "prefix": prefix,
                   "in_virtualenv": True, "platform": "linux", "system": "Linux", "release": "6.1.0",
                   "machine": "x86_64", "libc": {"name": "glibc", "version": "2.36"}, "pip": True, "venv_tool": None,
                   "ephemeral": None, "build_prerequisites": {
                       "setuptools": "80.9.0", "wheel": "0.45.1", "scipy": "1.16.2", "compiler": "/usr/bin/c++",
                       "python_headers": True}},
        "distributions": {"packages": packages, "module_claims": {}, "conda_prefix": False, "conda_packages": []},
        "torch_build": {"found": True, "package_dir": FAKE_SITE + "/torch", "version": "2.13.0+cpu", "cuda": None,
                        "hip": None, "debug": False, "git_version": "0123abc", "variant": "cpu"},
        "pyg_source": {"found": True, "package_dir": FAKE_SITE + "/torch_geometric",
                       "stack_level_typo": ["torch_geometric/distributed/dist_neighbor_loader.py:85"],
                       "partition_saves_defaultdict": True, "distributed_present": True},
        "cpu": {"logical_cores": 8, "affinity": {"count": 8, "cpus": "0-7"}, "physical_cores": 4,
                "physical_cores_source": "sysfs", "numa_nodes": [{"node": 0, "cpus": "0-7"}],
                "psutil_physical_cores": None},
        "environment": {"threads": {}, "launch": {}, "network_interfaces": ["eth0", "lo"], "launcher": None,
                        "hostname": "node0", "name_resolution": {
                            "hosts_order": ["files", "dns"],
                            "hostname": {"name": "node0", "source": "/etc/hosts", "addresses": ["10.0.0.5"],
                                         "loopback": False, "first_loopback": False},
                            "MASTER_ADDR": None},
                        "default_route_interface": "eth0", "unreadable_files": {"paths": [], "count": 0}},
        "container": {"shm": {"path": "/dev/shm", "total_bytes": 16 << 30, "free_bytes": 16 << 30, "fstype": "tmpfs",
                              "size_option": "16777216k"},
                      "cgroup_cpu": {"version": 2, "folder": "/sys/fs/cgroup", "quota_us": None, "period_us": None,
                                     "cores": None, "limited_at": None, "file": "cpu.max"},
                      "cgroup_memory": {"version": 2, "folder": "/sys/fs/cgroup", "limit_bytes": None,
                                        "limited_at": None, "file": "memory.max"},
                      "host_memory_bytes": 32 << 30, "cores": {"affinity": 8, "cgroup_cores": None, "usable": 8},
                      "open_files": {"soft": 65536, "hard": 65536}},
    }


def ok(data):
    return {"status": "ok", "data": data, "seconds": 0.1}


def fake_probe(static):
    """The probe child's records for the typical environment."""
    nvml = {"available": False, "library": "libnvidia-ml.so.1", "library_override": False,
            "reason": "library-not-found", "message": "libnvidia-ml.so.1: cannot open shared object file"}
    extension = {"status": "ok", "file": None, "import_seconds": 0.2, "warnings": [], "ops_namespaces": [], "ops": {},
                 "cuda_version": -1}
    results = {
        "static": ok(static), "nvml": ok(nvml),
        "torch": ok({"version": "2.13.0+cpu", "file": FAKE_SITE + "/torch/__init__.py", "cuda": None, "hip": None,
                     "debug": False, "cxx11_abi": True, "num_threads": 8, "num_interop_threads": 8, "mkl": True,
                     "openmp": True, "warnings": []}),
        "cuda": ok({"built_with": None, "compiled": False, "arch_list": [], "nccl_version": None, "cudnn_version": None,
                    "visible_devices_env": None, "releases_code_cc": None, "nvml": nvml, "context_created": False}),
        "distributed": ok({"available": True, "backends": {"gloo": True, "nccl": False, "mpi": False, "ucc": False},
                           "rpc_available": True}),
        "ext:pyg_lib": ok({"status": "not-installed"}),
        "ext:torch_scatter": ok(dict(extension, version="2.1.2", file=FAKE_SITE + "/torch_scatter/__init__.py",
                                     ops_namespaces=["torch_scatter"], ops={"torch_scatter": ["scatter_sum"]})),
        "ext:torch_sparse": ok(dict(extension, version="0.6.18", file=FAKE_SITE + "/torch_sparse/__init__.py",
                                    ops_namespaces=["torch_sparse"], ops={"torch_sparse": ["neighbor_sample"]})),
        "ext:torch_cluster": ok({"status": "not-installed"}),
        "ext:torch_spline_conv": ok({"status": "not-installed"}),
        "pyg": ok({"version": "2.8.1", "file": FAKE_SITE + "/torch_geometric/__init__.py", "import_seconds": 1.5,
                   "flags": {"WITH_PYG_LIB": False, "WITH_TORCH_SPARSE": True, "WITH_TORCH_SCATTER": True,
                             "WITH_WEIGHTED_NEIGHBOR_SAMPLE": False, "WITH_EDGE_TIME_NEIGHBOR_SAMPLE": False,
                             "WITH_PT20": True, "NO_MKL": False},
                   "neighbor_backend": "torch-sparse", "induced_backend": "torch-sparse", "warnings": []}),
        "smoke:pyg-lib": {"status": "not-run"},
        "smoke:torch-sparse": ok({"passed": True, "samples": [{"fanout": -1, "sampled_edges": 5, "problems": []},
                                                             {"fanout": 1, "sampled_edges": 2, "problems": []}]}),
        "features": ok({"pyg_lib_sampler_parameters": [], "dist_ops": {}, "pyg_lib_partition": False,
                        "pyg_lib_cuda_sampling": False, "torch_sparse_metis": {"works": False, "error": {
                            "type": "RuntimeError", "message": "Not compiled with METIS support"}}}),
        "refused_sockets": ok([]),
    }
    attempt = {"returncode": 0, "signal": None, "finished": True, "killed_for": None, "culprit": None, "seconds": 4.2,
               "blocked_modules": [], "skipped_steps": [], "descendants_ended": [], "subreaper": True}
    return {"results": results, "attempts": [attempt], "hang_limit_s": 20.0, "complete": True, "blocked_modules": [],
            "culprits": []}


def checker_findings(facts, *argv):
    """The checker's rules on `facts`, with the options its runner plans for the command line `argv` (bounds
    included), in this process."""
    import time
    from diagnostics_core import runner
    from sampling_checker import rules
    from sampling_checker.cli import SPEC
    run = runner.Run(SPEC, list(argv), time.time())
    run.options = SPEC.parser().parse_args(list(argv))
    run.plan_time()
    return rules.diagnose(facts, run.options)


def checker_facts(python=FAKE_PYTHON, static_only=False, edit_static=None):
    """The facts a checker run on the typical environment gathers (assembled by sampling_checker.assemble);
    `edit_static(static)` changes what the static stage saw before assembly."""
    from sampling_checker.assemble import assemble_facts
    static = fake_static_facts(python)
    if edit_static is not None:
        edit_static(static)
    facts = assemble_facts(static, None if static_only else fake_probe(static), python)
    facts["interpreter"] = {"chosen_by": "running", "probed": python, "running": python, "running_ephemeral": None,
                            "active_environment": None, "probed_prefix": static["python"]["prefix"],
                            "probed_ephemeral": None, "probed_is_active": None}
    return facts
