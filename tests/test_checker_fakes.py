"""tests/support/fakes.py produces the failures of real broken extension wheels.

Each fake is imported in its own interpreter (this venv's Python, with
PYTHONPATH set to the fake's root, the way the checker's tests use them) and
the exception type, message and ``__cause__`` chain are compared with what
torch 2.13 and the real packages produce. Interpreter start-up (import torch)
dominates, so all runs start together in one module fixture.
"""

import base64
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from support import fakes

# Imports a module and prints what happened, following __cause__ like the checker.
IMPORT_PROBE = r"""
import importlib, json, sys

def chain(error):
    links = []
    while error is not None:
        links.append({"type": type(error).__name__, "message": str(error),
                      "name": getattr(error, "name", None)})
        error = error.__cause__
    return links

try:
    importlib.import_module(sys.argv[1])
except Exception as error:
    print(json.dumps({"imported": False, "chain": chain(error)}))
else:
    print(json.dumps({"imported": True}))
"""

# What a stale pyg_lib looks like once imported.
OPERATOR_PROBE = r"""
import json, torch, pyg_lib

def outcome(call):
    try:
        call()
    except Exception as error:
        return [type(error).__name__, str(error)]
    return None

rowptr, col, seed = torch.tensor([0, 1, 2]), torch.tensor([1, 0]), torch.tensor([0])
print(json.dumps({
    "cuda_version": torch.ops.pyg.cuda_version(),
    "sample": outcome(lambda: pyg_lib.sampler.neighbor_sample(rowptr, col, seed, [1])),
    "schema": outcome(lambda: torch._C._dispatch_find_schema_or_throw("pyg::neighbor_sample", "")),
}))
"""

# PyG's own reaction to the fakes (torch_geometric/typing.py).
PYG_IMPORT_PROBE = r"""
import json, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import torch_geometric.typing as T
print(json.dumps({
    "warnings": [str(w.message) for w in caught if "An issue occurred" in str(w.message)],
    "flags": {k: getattr(T, k) for k in ("WITH_PYG_LIB", "WITH_TORCH_SPARSE", "WITH_TORCH_SCATTER")},
}))
"""

PYG_SAMPLE_PROBE = r"""
import json, torch
import torch_geometric.typing as T
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader

data = Data(x=torch.zeros(4, 1), edge_index=torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]]))
loader = NeighborLoader(data, num_neighbors=[1], batch_size=2)
try:
    next(iter(loader))
    error = None
except Exception as e:
    error = [type(e).__name__, str(e)]
print(json.dumps({"WITH_PYG_LIB": T.WITH_PYG_LIB, "error": error}))
"""

METADATA_PROBE = r"""
import importlib.metadata as md, json, sys
found = {}
for name in sys.argv[1:]:
    d = md.distribution(name)
    found[name] = {
        "version": d.version,
        "wheel": d.read_text("WHEEL"),
        "installer": d.read_text("INSTALLER"),
        "top_level": d.read_text("top_level.txt"),
        "files": [[str(f), f.hash.value if f.hash else None, f.size, str(f.locate())]
                  for f in d.files],
    }
print(json.dumps(found))
"""

CUDART_CAUSE = "libcudart.so.11.0: cannot open shared object file: No such file or directory"


class Run:
    def __init__(self, process=None, timed_out=False):
        self.timed_out = timed_out
        self.returncode = None if timed_out else process.returncode
        self.stderr = "" if timed_out else process.stderr
        stdout = "" if timed_out else process.stdout.strip()
        self.result = json.loads(stdout) if stdout else None

    def __repr__(self):
        return f"Run(returncode={self.returncode}, result={self.result}, stderr={self.stderr[-1500:]!r})"


def run_python(root, code, *args, timeout=60):
    env = {**os.environ, "PYTHONPATH": root}
    try:
        process = subprocess.run([sys.executable, "-c", code, *args], env=env,
                                 capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Run(timed_out=True)
    return Run(process)


def build_cases(base):
    """Name -> (root, probe code, probe args, timeout); every fake in its own root."""
    def root(name):
        path = os.path.join(base, name)
        os.makedirs(path)
        return path

    cases = {}
    for case, make, probe, args, timeout in (
            # undefined-symbol: torch_sparse, like rusty1s/pytorch_sparse#250
            ("undefined-symbol", fakes.fake_undefined_symbol, IMPORT_PROBE, ["torch_sparse"], 60),
            ("cuda-runtime-missing", fakes.fake_cuda_runtime_missing, IMPORT_PROBE, ["pyg_lib"], 60),
            ("c10-cuda-missing", lambda r: fakes.fake_cuda_runtime_missing(r, module="torch_scatter",
                                                                           soname="libc10_cuda.so"),
             IMPORT_PROBE, ["torch_scatter"], 60),
            ("glibc-too-old", fakes.fake_glibc_too_old, IMPORT_PROBE, ["pyg_lib"], 60),
            ("cuda-mismatch", fakes.fake_cuda_mismatch, IMPORT_PROBE, ["torch_sparse"], 60),
            ("missing-dependency", fakes.fake_missing_dependency, IMPORT_PROBE, ["torch_sparse"], 60),
            ("operator-missing", fakes.fake_operator_missing, OPERATOR_PROBE, [], 60),
            ("segfault", lambda r: fakes.fake_segfault(r, "torch_cluster"), IMPORT_PROBE, ["torch_cluster"], 60),
            ("hang", lambda r: fakes.fake_hang(r, "torch_spline_conv"), IMPORT_PROBE, ["torch_spline_conv"], 3),
            ("raises", lambda r: fakes.fake_raises(
                r, "pyg_lib", OSError, "Could not load this library: C:\\pyg_lib\\pyg.dll",
                cause=(OSError, "[WinError 127] The specified procedure could not be found")),
             IMPORT_PROBE, ["pyg_lib"], 60)):
        r = root(case.replace("-", "_"))
        make(r)
        cases[case] = (r, probe, args, timeout)

    # PyG against fakes that also carry distribution metadata.
    r = root("pyg_broken")
    fakes.fake_extension(r, "pyg_lib", "pyg_lib", "0.9.0+pt212cu126",
                         failure="undefined-symbol",
                         wheel_tag="cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64")
    fakes.fake_extension(r, "torch_sparse", "torch_sparse", "0.6.18+pt213cpu",
                         failure="missing-dependency",
                         wheel_tag="cp311-cp311-manylinux_2_99_x86_64")
    cases["pyg-import"] = (r, PYG_IMPORT_PROBE, [], 90)
    cases["metadata"] = (r, METADATA_PROBE, ["pyg_lib", "torch-sparse"], 60)
    r = root("pyg_stale")
    fakes.fake_extension(r, "pyg_lib", "pyg_lib", "0.1.0+pt213cpu", failure="operator-missing")
    cases["pyg-sample"] = (r, PYG_SAMPLE_PROBE, [], 90)
    return cases


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Name -> (root, Run) for every case, plus "container": the folder holding all roots."""
    container = str(tmp_path_factory.mktemp("fakes"))
    cases = build_cases(os.path.join(container, "roots"))
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {name: pool.submit(run_python, root, probe, *args, timeout=timeout)
                   for name, (root, probe, args, timeout) in cases.items()}
        results = {name: (cases[name][0], future.result()) for name, future in futures.items()}
    results["container"] = container
    return results


def import_chain(run):
    assert run.result is not None and not run.result["imported"], run
    return [(link["type"], link["message"]) for link in run.result["chain"]]


def test_undefined_symbol_is_a_real_dlopen_failure_wrapped_by_torch(runs):
    root, run = runs["undefined-symbol"]
    library = os.path.join(root, "torch_sparse", "_version_cpu.so")
    assert import_chain(run) == [
        ("OSError", f"Could not load this library: {library}"),
        ("OSError", f"{library}: undefined symbol: _ZN5torch3jit17parseSchemaOrNameERKSs"),
    ]


def test_cuda_runtime_missing_is_a_real_dlopen_failure(runs):
    root, run = runs["cuda-runtime-missing"]
    library = os.path.join(root, "pyg_lib", "libpyg.so")
    assert import_chain(run) == [("OSError", f"Could not load this library: {library}"),
                                 ("OSError", CUDART_CAUSE)]
    leftovers = [n for _, _, names in os.walk(root) for n in names if "cudart" in n]
    assert leftovers == []


def test_cuda_extension_beside_cpu_torch_misses_libc10_cuda(runs):
    root, run = runs["c10-cuda-missing"]
    library = os.path.join(root, "torch_scatter", "_version_cpu.so")
    assert import_chain(run) == [
        ("OSError", f"Could not load this library: {library}"),
        ("OSError", "libc10_cuda.so: cannot open shared object file: No such file or directory"),
    ]


def test_glibc_too_old_is_a_real_symbol_version_failure(runs):
    root, run = runs["glibc-too-old"]
    library = os.path.join(root, "pyg_lib", "libpyg.so")
    (outer_type, outer), (cause_type, cause) = import_chain(run)
    assert (outer_type, outer) == ("OSError", f"Could not load this library: {library}")
    assert cause_type == "OSError"
    assert re.fullmatch(r"/\S*/libm\.so\.6: version `GLIBC_2\.99' not found "
                        rf"\(required by {re.escape(library)}\)", cause), cause


def test_cuda_mismatch_has_torch_sparse_text(runs):
    _, run = runs["cuda-mismatch"]
    assert import_chain(run) == [(
        "RuntimeError",
        "Detected that PyTorch and torch_sparse were compiled with different CUDA versions. "
        "PyTorch has CUDA version 12.6 and torch_sparse has CUDA version 11.8. "
        "Please reinstall the torch_sparse that matches your PyTorch install.",
    )]


def test_missing_dependency_names_the_dependency_even_where_it_is_installed(runs):
    _, run = runs["missing-dependency"]
    assert import_chain(run) == [("ModuleNotFoundError", "No module named 'torch_scatter'")]
    assert run.result["chain"][0]["name"] == "torch_scatter"


def test_operator_missing_imports_but_torch_lacks_the_op(runs):
    _, run = runs["operator-missing"]
    assert run.result == {
        "cuda_version": -1,
        "sample": ["AttributeError", "'_OpNamespace' 'pyg' object has no attribute 'neighbor_sample'"],
        "schema": ["RuntimeError", "Could not find schema for pyg::neighbor_sample."],
    }, run


def test_segfault_kills_the_import_with_sigsegv(runs):
    _, run = runs["segfault"]
    assert run.returncode == -signal.SIGSEGV, run


def test_hang_never_finishes(runs):
    _, run = runs["hang"]
    assert run.timed_out, run


def test_raises_chains_the_given_cause(runs):
    _, run = runs["raises"]
    assert import_chain(run) == [
        ("OSError", "Could not load this library: C:\\pyg_lib\\pyg.dll"),
        ("OSError", "[WinError 127] The specified procedure could not be found"),
    ]


def test_pyg_warns_for_the_dlopen_failure_and_is_silent_for_the_missing_dependency(runs):
    root, run = runs["pyg-import"]
    library = os.path.join(root, "pyg_lib", "libpyg.so")
    assert run.result == {
        "warnings": ["An issue occurred while importing 'pyg-lib'. Disabling its usage. "
                     f"Stacktrace: Could not load this library: {library}"],
        "flags": {"WITH_PYG_LIB": False, "WITH_TORCH_SPARSE": False, "WITH_TORCH_SCATTER": False},
    }, run


def test_pyg_uses_stale_pyg_lib_and_fails_at_sample_time(runs):
    _, run = runs["pyg-sample"]
    assert run.result == {
        "WITH_PYG_LIB": True,
        "error": ["AttributeError", "'_OpNamespace' 'pyg' object has no attribute 'neighbor_sample'"],
    }, run


def test_distribution_metadata_is_what_importlib_metadata_reports(runs):
    root, run = runs["metadata"]
    pyg_lib, torch_sparse = run.result["pyg_lib"], run.result["torch-sparse"]
    assert pyg_lib["version"] == "0.9.0+pt212cu126"
    assert torch_sparse["version"] == "0.6.18+pt213cpu"
    assert re.findall(r"^Tag: (.*)$", pyg_lib["wheel"], re.M) == [
        "cp311-cp311-manylinux_2_17_x86_64", "cp311-cp311-manylinux2014_x86_64"]
    assert re.findall(r"^Tag: (.*)$", torch_sparse["wheel"], re.M) == [
        "cp311-cp311-manylinux_2_99_x86_64"]
    assert pyg_lib["installer"] == "pip\n" and pyg_lib["top_level"] == "pyg_lib\n"
    listed = {path for path, *_ in torch_sparse["files"]}
    assert {"torch_sparse/__init__.py", "torch_sparse/storage.py",
            "torch_sparse-0.6.18+pt213cpu.dist-info/RECORD"} <= listed
    for path, digest, size, located in pyg_lib["files"] + torch_sparse["files"]:
        assert located.startswith(root)
        if digest is None:
            assert path.endswith("RECORD")
            continue
        data = open(located, "rb").read()
        assert (digest, size) == (
            base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode(), len(data))


def test_fakes_write_only_inside_their_root(runs):
    # Every case was built under <container>/roots, gcc's scratch files included.
    container = runs["container"]
    assert os.listdir(container) == ["roots"]
    scratch = [folder for folder, _, _ in os.walk(container) if ".fakes-build-" in folder]
    assert scratch == []


def test_conda_install_records(tmp_path):
    prefix = str(tmp_path / "env")
    site_packages = os.path.join(prefix, "lib", "python3.11", "site-packages")
    os.makedirs(site_packages)
    fakes.fake_cuda_mismatch(site_packages)
    dist_info, meta_path = fakes.fake_conda_install(
        prefix, "torch_sparse", "0.6.18", build="py311_torch_2.5.1_cu121",
        depends=["python >=3.11,<3.12.0a0", "pytorch 2.5.*", "pytorch-scatter", "scipy"])
    fn = "pytorch-sparse-0.6.18-py311_torch_2.5.1_cu121"
    assert meta_path == os.path.join(prefix, "conda-meta", fn + ".json")
    assert os.path.exists(os.path.join(prefix, "conda-meta", "history"))
    record = json.load(open(meta_path))
    assert (record["name"], record["version"], record["build"]) == (
        "pytorch-sparse", "0.6.18", "py311_torch_2.5.1_cu121")
    assert os.path.dirname(dist_info) == site_packages
    assert record["url"] == f"https://conda.anaconda.org/pyg/linux-64/{fn}.tar.bz2"
    assert "lib/python3.11/site-packages/torch_sparse/__init__.py" in record["files"]
    assert [p["_path"] for p in record["paths_data"]["paths"]] == record["files"]
    for entry in record["paths_data"]["paths"]:
        data = open(os.path.join(prefix, entry["_path"]), "rb").read()
        assert (entry["sha256"], entry["size_in_bytes"]) == (hashlib.sha256(data).hexdigest(), len(data))
    run = run_python(site_packages, METADATA_PROBE, "torch_sparse")
    assert run.result["torch_sparse"]["installer"] == "conda\n", run
    assert run.result["torch_sparse"]["version"] == "0.6.18"


def test_raises_refuses_non_builtin_exceptions(tmp_path):
    class Custom(Exception):
        pass

    with pytest.raises(ValueError):
        fakes.fake_raises(str(tmp_path), "pyg_lib", Custom, "boom")
