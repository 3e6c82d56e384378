#!/usr/bin/env python3
# /// script
# requires-python = ">=3.8"
# dependencies = []
# ///
"""Diagnose PyTorch Geometric's sampling backends and scaling environment.

Prints one JSON document on stdout describing Python, torch, CUDA,
torch.distributed, PyG and PyG's optional compiled extensions (pyg-lib,
torch-sparse, torch-scatter, torch-cluster, torch-spline-conv), plus findings:
what is wrong, why it matters and the exact command that fixes it.

Read-only: it writes no file, opens no socket, creates no CUDA context,
starts no service, downloads nothing and never prompts. Everything beyond the
standard library is imported in a child interpreter with a deadline, so a
segfaulting or hanging extension still yields valid JSON naming the culprit.

The module imports only the standard library, so it runs on any CPython 3.8+,
with or without torch. Older interpreters get a clean refusal (exit 2): this
file must stay parseable by Python 2.7 so that the refusal below can run
(tests/test_first_run.py runs it under 2.7, 3.6 and 3.7).
"""

import json
import os
import re
import sys
import time

# Schema versions: MAJOR.MINOR. MAJOR changes when a key the default output
# had is removed or renamed, or a value changes type or meaning; MINOR when
# keys, enum values or finding ids are added. Readers check MAJOR only.
SCHEMA_VERSION = "2.0"
CHECKER_VERSION = "2.0.0"
DOCS = "references/troubleshooting.md"

EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
MIN_PYTHON = (3, 8)


def refuse_old_python():
    """Under Python < 3.8: one stderr line, a JSON finding, exit 2 (2.7-compatible code)."""
    version = ".".join(str(part) for part in sys.version_info[:3])
    line = ("check_sampling_backends.py: error: this is Python %s; the checker needs Python 3.8+ "
            "(run it with python3.8 or newer, e.g. python3 scripts/check_sampling_backends.py)" % version)
    sys.stderr.write(line + "\n")
    finding = {"id": "interpreter-unsupported", "severity": "error",
               "title": "the interpreter is not a CPython 3.8+ the checker can run in or probe",
               "evidence": {"interpreter": sys.executable, "python": version, "needs": ">=3.8"},
               "fix": "python3 scripts/check_sampling_backends.py  # any Python 3.8+",
               "docs": "references/troubleshooting.md#interpreter-unsupported"}
    sys.stdout.write(json.dumps({"schema_version": SCHEMA_VERSION, "ok": False, "status": "usage-error",
                                 "exit_code": EXIT_USAGE, "findings": [finding]}) + "\n")
    sys.exit(EXIT_USAGE)


if sys.version_info[:2] < MIN_PYTHON:
    refuse_old_python()

DEFAULT_TIMEOUT = 60.0
CHILD_FLAG = "--internal-child-probe"  # not a user flag: marks the child process

# Distributions whose metadata we read, by normalised name.
TRACKED_DISTRIBUTIONS = (
    "torch", "torch-geometric", "pyg-nightly", "pyg-lib", "torch-sparse",
    "torch-scatter", "torch-cluster", "torch-spline-conv", "psutil", "numpy",
)

# PyG's optional compiled extensions: import name -> distribution name.
# Order matters: torch_sparse imports torch_scatter, so torch_scatter goes
# first and a crash is blamed on the module that really crashed.
EXTENSIONS = (
    ("pyg_lib", "pyg-lib"),
    ("torch_scatter", "torch-scatter"),
    ("torch_sparse", "torch-sparse"),
    ("torch_cluster", "torch-cluster"),
    ("torch_spline_conv", "torch-spline-conv"),
)
EXTENSION_DIST = dict(EXTENSIONS)
# What to name in `pip install` for each extension (PyG's wheel index names).
PIP_NAME = {
    "pyg_lib": "pyg_lib", "torch_scatter": "torch_scatter",
    "torch_sparse": "torch_sparse", "torch_cluster": "torch_cluster",
    "torch_spline_conv": "torch_spline_conv",
}
# pyg-lib operators DistNeighborSampler calls without any guard.
DIST_SAMPLER_OPS = (
    "dist_neighbor_sample", "merge_sampler_outputs", "relabel_neighborhood",
    "hetero_relabel_neighborhood",
)

THREAD_VARIABLES = (
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "OMP_PROC_BIND",
    "OMP_PLACES", "KMP_AFFINITY", "GOMP_CPU_AFFINITY",
)
# Launch variables parsed as integers; the rest are kept as strings.
LAUNCH_INT_VARIABLES = (
    "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
    "NODE_RANK", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS", "SLURM_PROCID", "SLURM_NTASKS",
    "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NNODES", "SLURM_NTASKS_PER_NODE",
    "SLURM_JOB_ID", "PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
)
# SLURM writes task counts per node as "4(x2),3": 4 tasks on each of two nodes, then 3.
SLURM_TASK_COUNT_VARIABLES = ("SLURM_NTASKS_PER_NODE",)
# (rank, size) pairs each launcher sets; a rank must be below its size.
SLURM_RANK_PAIRS = (("SLURM_PROCID", "SLURM_NTASKS"), ("SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),
                    ("SLURM_NODEID", "SLURM_NNODES"))
MPI_RANK_PAIRS = (("PMI_RANK", "PMI_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                  ("OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"))
LAUNCH_STR_VARIABLES = (
    "MASTER_ADDR", "TORCHELASTIC_RUN_ID", "SLURM_JOB_NODELIST",
    "SLURM_TASKS_PER_NODE", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME",
    "TP_SOCKET_IFNAME", "CUDA_VISIBLE_DEVICES", "NCCL_DEBUG",
    "NCCL_IB_DISABLE", "TORCH_DISTRIBUTED_DEBUG",
)
SOCKET_IFNAME_VARIABLES = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME")
HOSTS_FILE = "/etc/hosts"

# PyG's wheel index (data.pyg.org), per extension: which torch minor x CUDA
# variant has a wheel, with the public source of every row. One row is
# (distribution, torch minor, variants, source, date of the source):
# variants lists the CUDA variants with a wheel; () means a public source says
# there is none; None means no source says either way ("unknown"). The docs'
# install lines are tested against these rows (tests/test_install_truth.py).
WHEEL_TABLE_DATE = "2026-12-01"  # when the rows were last checked against their sources
WHEEL_INDEX = "https://data.pyg.org/whl/torch-{torch}+{variant}.html"
TORCH_INDEX = "https://download.pytorch.org/whl/{variant}"
_PYG_DOCS = "pyg-team/pytorch_geometric docs/source/install/installation.rst @5c6461b"
_PYG_DOCS_DATE = "2026-08-17"
_PYGLIB_README = "pyg-team/pyg-lib README.md @764e3a4"
_OLD_ROWS = (  # torch minor -> variants, as PyG's installation docs list them for all three
    ("2.8", ("cpu", "cu126", "cu128", "cu129")), ("2.7", ("cpu", "cu118", "cu126", "cu128")),
    ("2.6", ("cpu", "cu118", "cu124", "cu126")), ("2.5", ("cpu", "cu118", "cu121", "cu124")),
    ("2.4", ("cpu", "cu118", "cu121", "cu124")), ("2.3", ("cpu", "cu118", "cu121")),
    ("2.2", ("cpu", "cu118", "cu121")), ("2.1", ("cpu", "cu118", "cu121")), ("2.0", ("cpu", "cu117", "cu118")),
)
_CU132 = ("cpu", "cu126", "cu130", "cu132")
_CU130 = ("cpu", "cu126", "cu128", "cu130")
WHEEL_ROWS = (
    ("pyg-lib", "2.14", _CU132, "pyg-team/pyg-lib release notes 0.9.0 (PR #720 'Support PyTorch 2.14')", "2026-09-03"),
    ("pyg-lib", "2.13", _CU132, _PYGLIB_README + "; CHANGELOG 0.8.0 'Added PyTorch 2.13 support' (#697)", "2026-07-22"),
    ("pyg-lib", "2.12", _CU132, _PYGLIB_README, "2026-07-22"),
    ("pyg-lib", "2.11", _CU130, _PYGLIB_README, "2026-07-22"),
    ("pyg-lib", "2.10", _CU130, _PYG_DOCS, _PYG_DOCS_DATE),
    ("pyg-lib", "2.9", _CU130, _PYG_DOCS, _PYG_DOCS_DATE),
    ("torch-scatter", "2.14", (), "rusty1s/pytorch_scatter#513 (open): wheels only up to torch 2.12", "2026-09-18"),
    ("torch-scatter", "2.13", (), "rusty1s/pytorch_scatter#513; gridfm/gridfm-graphkit#95: no torch_scatter link "
     "on torch-2.13.0+cpu/+cu126", "2026-09-18"),
    ("torch-scatter", "2.12", _CU132, "rusty1s/pytorch_scatter#510 'Add PyTorch 2.12 support'; " + _PYG_DOCS,
     _PYG_DOCS_DATE),
    ("torch-scatter", "2.11", _CU130, "rusty1s/pytorch_scatter#505 'Add PyTorch 2.11 support'; " + _PYG_DOCS,
     _PYG_DOCS_DATE),
    ("torch-scatter", "2.10", _CU130, "rusty1s/pytorch_scatter#504; #506: torch-2.10.0+cpu/cu126/cu128/cu130 pages",
     "2026-04-02"),
    ("torch-scatter", "2.9", _CU130, "rusty1s/pytorch_scatter#504 'Add PyTorch 2.9/2.10 and cu130 support'; "
     + _PYG_DOCS, _PYG_DOCS_DATE),
    ("torch-sparse", "2.14", None, "unknown: no support PR after rusty1s/pytorch_sparse#411 (2.12) was found; its "
     "wheel build takes torch-scatter from data.pyg.org, which has none for 2.13+ (pytorch_scatter#513)", "2026-09-18"),
    ("torch-sparse", "2.13", None, "unknown: as for 2.14", "2026-09-18"),
    ("torch-sparse", "2.12", _CU132, "rusty1s/pytorch_sparse#411 'Add PyTorch 2.12 support'; " + _PYG_DOCS,
     _PYG_DOCS_DATE),
    ("torch-sparse", "2.11", _CU130, "rusty1s/pytorch_sparse#409 'Add PyTorch 2.11 support'; " + _PYG_DOCS,
     _PYG_DOCS_DATE),
    ("torch-sparse", "2.10", _CU130, _PYG_DOCS, _PYG_DOCS_DATE),
    ("torch-sparse", "2.9", _CU130, _PYG_DOCS, _PYG_DOCS_DATE),
) + tuple(
    (dist, minor, variants, _PYG_DOCS, _PYG_DOCS_DATE)
    for dist in ("pyg-lib", "torch-scatter", "torch-sparse") for minor, variants in _OLD_ROWS
) + tuple(
    row for dist, repo, final, notice, readme, port, port_date in (
        ("torch-cluster", "pytorch_cluster", "1.6.3", "#272", "README.md @3d1d9e3",
         "#265 'Add PyTorch 2.9/2.10 and cu130 support'; #261: Linux/macOS wheels out, Windows next day",
         "2026-03-08"),
        ("torch-spline-conv", "pytorch_spline_conv", "1.2.2", "#65", "README.md @050f58a",
         "#62 'Add PyTorch 2.9/2.10 and cu130 support' (merge date unknown); pyg-team/pytorch_geometric#10634",
         "2026-03-09"))
    for row in (
        (dist, "2.14", (), "rusty1s/%s%s (deprecated): %s is the final release, no new wheels" % (repo, notice, final),
         "2026-06-05"),
        (dist, "2.13", (), "rusty1s/%s%s (deprecated): %s is the final release, no new wheels" % (repo, notice, final),
         "2026-06-05"),
        (dist, "2.12", None, "unknown", "2026-06-05"),
        (dist, "2.11", None, "unknown", "2026-06-05"),
        (dist, "2.10", _CU130, "rusty1s/%s%s" % (repo, port), port_date),
        (dist, "2.9", _CU130, "rusty1s/%s%s" % (repo, port), port_date),
        (dist, "2.8", None, "unknown", port_date),
        (dist, "2.7", ("cpu", "cu118", "cu126", "cu128"), "rusty1s/%s %s" % (repo, readme), "2025-05-31"),
    )
)
# Platforms with wheels (pyg-lib README @764e3a4: Linux incl. aarch64 since 0.8.0 (#683),
# Windows, macOS arm64 (#558); the rusty1s READMEs: Linux, Windows, macOS). Elsewhere: unknown.
# macOS wheels are CPU-only everywhere.
WHEEL_PLATFORMS = {
    "pyg-lib": ("linux-x86_64", "linux-aarch64", "win32-amd64", "darwin-arm64"),
    "torch-scatter": ("linux-x86_64", "win32-amd64", "darwin-arm64", "darwin-x86_64"),
    "torch-sparse": ("linux-x86_64", "win32-amd64", "darwin-arm64", "darwin-x86_64"),
    "torch-cluster": ("linux-x86_64", "win32-amd64", "darwin-arm64", "darwin-x86_64"),
    "torch-spline-conv": ("linux-x86_64", "win32-amd64", "darwin-arm64", "darwin-x86_64"),
}
# The newest patch release of a torch minor to pin, where a source names one
# (pyg-team/pyg-lib#687 'Add PyTorch 2.12.1 index', 2026-06-19); otherwise X.Y.0.
TORCH_NEWEST_PATCH = {"2.12": "2.12.1"}
# The extensions PyG's NeighborLoader family can use, in install order.
SAMPLING_DISTS = ("pyg-lib", "torch-scatter", "torch-sparse")
# PyPI has only sdists of these (the newest releases); pyg-lib has none at all.
# Build order matters: torch_sparse imports torch_scatter.
SOURCE_BUILDS = (("torch-scatter", "2.1.2"), ("torch-sparse", "0.6.18"),
                 ("torch-cluster", "1.6.3"), ("torch-spline-conv", "1.2.2"))
SOURCE_BUILD_FLAGS = "--force-reinstall --no-deps --no-cache-dir --no-build-isolation"
# Minutes to build each sdist, measured from .ci/run's build log (`time`, 2 cores, MAX_JOBS=2,
# torch 2.13 CPU, 2026-12-01: 4 min 59 s and 15 min 28 s wall, on a machine shared with other
# builds). torch-cluster and torch-spline-conv were not measured.
SOURCE_BUILD_MINUTES = {"torch-scatter": 5, "torch-sparse": 15}
SOURCE_BUILD_NEEDS = ("a C++ compiler (g++), the Python headers (python3-dev), setuptools and torch in this "
                      "environment, scipy for torch-sparse; CPU kernels only unless a GPU is visible or "
                      "FORCE_CUDA=1 with nvcc on PATH; no METIS")
# What PyG 2.8 loses without torch-sparse (PyG's source: sampler/neighbor_sampler.py
# skips pyg-lib for induced subgraphs; sampler/hgt_sampler.py, loader/shadow.py raise
# "requires 'torch-sparse'"; loader/graph_saint.py builds a SparseTensor, whose
# stand-in in typing.py raises). Without torch-scatter PyG falls back to torch's own
# scatter_reduce (utils/_scatter.py): slower, nothing lost.
WITHOUT_TORCH_SPARSE = ("NeighborLoader(subgraph_type='induced')", "HGTLoader", "ShaDowKHopSampler",
                        "GraphSAINT*Sampler", "SparseTensor")
# What to build from PyPI's sources in place of each extension's wheel.
# pyg-lib has no sdist on PyPI; torch-sparse gives PyG the same neighbour sampling.
SOURCE_BUILD_PACKAGES = {
    "pyg_lib": ("torch-scatter", "torch-sparse"), "torch_scatter": ("torch-scatter",),
    "torch_sparse": ("torch-scatter", "torch-sparse"), "torch_cluster": ("torch-cluster",),
    "torch_spline_conv": ("torch-spline-conv",),
}

# Every finding the checker can emit: id -> (default severity, title).
# Each id has a section in references/troubleshooting.md whose anchor is the id.
FINDINGS = {
    "torch-not-installed": ("warning", "torch is not installed in the probed interpreter"),
    "torch-import-failed": ("error", "import torch fails"),
    "pyg-not-installed": ("warning", "torch_geometric is not installed"),
    "pyg-import-failed": ("error", "import torch_geometric fails"),
    "pyg-shadowed": ("error", "the imported torch_geometric is not the installed distribution"),
    "python-unsupported-by-pyg": ("warning", "this Python is older than the installed PyG supports"),
    "probe-deadline": ("warning", "the probe hit its deadline; some facts are missing"),
    "checker-internal-error": ("error", "the checker itself failed"),
    "usage-error": ("error", "the command line asks for something the checker cannot do"),
    "interpreter-unsupported": ("error", "the interpreter is not a CPython 3.8+ the checker can run in or probe"),
    "interpreter-not-active": ("warning", "the probed interpreter is not the environment you work in"),
    "interpreter-ephemeral": ("warning", "the probed interpreter is a throwaway uv/pipx environment"),
    "ext-undefined-symbol": ("error", "extension built for another torch (undefined symbol)"),
    "ext-cuda-mismatch": ("error", "extension compiled with a different CUDA than torch"),
    "ext-cuda-runtime-missing": ("error", "a CUDA library the extension needs cannot be loaded"),
    "ext-glibc-too-old": ("error", "the system C/C++ runtime is older than the extension needs"),
    "ext-missing-dependency": ("error", "extension imports a package that is missing"),
    "ext-operator-missing": ("error", "an operator the extension should register is missing"),
    "ext-import-crashed": ("error", "importing the extension kills the interpreter"),
    "ext-import-hung": ("error", "importing the extension never finishes"),
    "ext-import-error": ("error", "importing the extension fails"),
    "wheel-torch-mismatch": ("error", "extension wheel was built for another torch version"),
    "wheel-cuda-mismatch": ("error", "extension wheel was built for another CUDA variant"),
    "wheel-cuda-on-cpu-torch": ("error", "CUDA build of an extension beside a CPU-only torch"),
    "wheel-platform-mismatch": ("error", "extension wheel does not fit this platform or C library"),
    "ext-source-build": ("info", "extension is a local source build"),
    "no-prebuilt-wheels": ("warning", "PyG publishes no pyg-lib wheel for this torch/CUDA/Python/platform"),
    "ext-stale-local-build": ("error", "a locally built extension no longer loads; a plain reinstall reuses it"),
    "neighbor-sampling-unavailable": ("error", "no working neighbour-sampling backend: NeighborLoader will fail"),
    "neighbor-smoke-failed": ("error", "a sampling backend imports but samples wrongly or raises"),
    "induced-sampling-unavailable": ("info", "induced-subgraph sampling needs torch-sparse"),
    "weighted-sampling-unavailable": ("info", "weighted neighbour sampling needs pyg-lib"),
    "temporal-sampling-unavailable": ("info", "temporal neighbour sampling needs pyg-lib"),
    "metis-unavailable": ("warning", "METIS partitioning (ClusterData, Partitioner) is unavailable"),
    "distributed-sampling-unavailable": ("info", "DistNeighborSampler's pyg-lib operators are missing"),
    "gpu-sampling-needs-cugraph": ("info", "PyG samples neighbours on the CPU; GPU sampling needs cuGraph-PyG"),
    "legacy-extension-ignored": ("warning", "an extension PyG no longer uses is installed"),
    "duplicate-distribution": ("error", "two installations provide the same package"),
    "conda-pip-mixed": ("warning", "conda and pip both manage the PyG stack"),
    "pyg-dist-loader-typeerror": ("info", "this PyG's distributed loaders raise TypeError at construction"),
    "pyg-distributed-deprecated": ("info", "torch_geometric.distributed is deprecated"),
    "pyg-from-partition-edge-feats": ("info", "LocalFeatureStore.from_partition fails on partitions with edge features"),
    "launch-env-invalid": ("error", "a distributed launch variable is not a valid value"),
    "launch-rank-out-of-range": ("error", "a rank is outside its world size"),
    "launch-slurm-rank-out-of-range": ("error", "a SLURM task, local or node id is outside its count"),
    "launch-mpi-rank-out-of-range": ("error", "an MPI (PMI or Open MPI) rank is outside its size"),
    "launch-local-rank-no-device": ("error", "LOCAL_RANK points past the visible GPUs"),
    "launch-master-incomplete": ("error", "MASTER_ADDR and MASTER_PORT must be set together"),
    "launch-torchrun-slurm-mismatch": ("warning", "torchrun-style and SLURM variables disagree"),
    "launch-backend-unavailable": ("error", "the requested torch.distributed backend is not built in"),
    "launch-socket-ifname-missing": ("error", "a socket-interface variable names no interface on this host"),
    "launch-master-addr-loopback": ("error", "MASTER_ADDR resolves to a loopback address on a node of a multi-node job"),
    "launch-hostname-loopback": ("warning", "this host's name resolves to a loopback address: gloo would advertise it"),
    "launch-world-size-mismatch": ("error", "WORLD_SIZE differs from nodes times processes per node"),
    "cpu-affinity-restricted": ("info", "this process may use fewer cores than the machine has"),
    "cpu-threads-unset": ("info", "OMP_NUM_THREADS is not set"),
    "cpu-threads-invalid": ("warning", "a thread-count variable is not a positive integer"),
    "cpu-threads-oversubscribed": ("warning", "threads times local processes exceed the available cores"),
    "cpu-numa-multi-node": ("info", "the machine has several NUMA nodes"),
    "cuda-unavailable": ("warning", "torch sees no CUDA device"),
    "nvml-init-failed": ("warning", "NVML (the driver's management library) fails to initialise"),
    "cuda-driver-too-old": ("error", "the NVIDIA driver is older than torch's CUDA runtime"),
    "cuda-arch-not-compiled": ("error", "torch has no kernels for this GPU's compute capability"),
    "cuda-torch-cpu-only": ("warning", "a CPU-only torch on a host with NVIDIA GPUs"),
    "cuda-visible-devices-hides-all": ("error", "CUDA_VISIBLE_DEVICES hides every GPU"),
    "cuda-visible-devices-unknown-device": ("warning", "CUDA_VISIBLE_DEVICES names a GPU that does not exist"),
    "distributed-unavailable": ("warning", "torch.distributed or the requested backend is unavailable"),
}

USAGE = """\
%(prog)s [--require-neighbor-backend] [--require-cuda]
       [--require-distributed [BACKEND]] [--python PATH] [--timeout SECONDS]
       [--static-only] [--format {json,markdown}] [--no-redact] [--full]
       [--pretty] [--schema] [--list-findings]"""

EPILOG = """\
ok and exit codes (the same in check_store_contract.py and check_partition.py):
  "ok" is true when there is no finding of severity error, no failed gate and
  no internal error. This checker applies a gate only when asked (--require-*);
  "gates" lists the ones applied. So "ok": false with exit 0 means: something
  is wrong (see the error findings) but no gate you asked for failed.
  0  ran; every gate applied passed (status ok, warning, error or incomplete)
  1  a --require-* gate failed (status gate-failed; see "gates" and the findings)
  2  usage error: bad flag, --static-only with a gate, an interpreter that is
     not CPython 3.8+; one line on stderr, and a JSON document whose finding
     (usage-error, interpreter-unsupported) says what to run instead
  3  internal error in the checker; the JSON says so in "findings"
  --static-only imports nothing, so its status is never "ok": it is
  "incomplete" (or "error" when metadata alone shows an error).

which interpreter is probed:
  --python PATH when given. Otherwise the active environment ($VIRTUAL_ENV,
  else $CONDA_PREFIX; under `uv run`, which points VIRTUAL_ENV at its own
  throwaway env, the first other venv on PATH) when this interpreter is such a
  throwaway uv/pipx env or a base Python outside any environment; otherwise
  this interpreter. A probed interpreter that is not the active environment
  gets the finding interpreter-not-active (and a line on stderr).

output:
  One JSON document on stdout (compact: --full adds install records, operator
  lists, every PyG flag and child stderr), or with --format markdown a report
  to paste into an issue, user/home/host/node names redacted by default
  (pasted reports are public and cannot be unsent; --no-redact keeps them).
  A short summary goes to stderr at the end of every run.

what it guarantees:
  Exactly one document on stdout; progress and warnings on stderr.
  Read-only: no file or directory written, no socket opened, no CUDA context
  created (CUDA facts come from NVML), no service started, nothing downloaded,
  no prompt. Imports happen in a child interpreter bounded by --timeout.

environment:
  SCALABLE_DISTRIBUTED_NVML=/path/libnvidia-ml.so.1
      load NVML from this file instead of the driver's libnvidia-ml.so.1 as the
      dynamic loader finds it (LD_LIBRARY_PATH, then the ldconfig cache)
  CUDA_VISIBLE_DEVICES  read as CUDA reads it and checked against NVML's GPUs

examples:
  python3 scripts/check_sampling_backends.py --pretty
  python3 scripts/check_sampling_backends.py --require-neighbor-backend
  python3 scripts/check_sampling_backends.py --python ~/venvs/pyg/bin/python
  python3 scripts/check_sampling_backends.py --format markdown
  python3 scripts/check_sampling_backends.py --static-only
  python3 scripts/check_sampling_backends.py | jq '.findings[] | {id, fix}'
"""


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------

def normalise_name(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_version(text):
    """'2.13.0+cpu' -> (2, 13, 0); unparsable parts become 0."""
    numbers = []
    for part in re.split(r"[.+]", text or "")[:3]:
        match = re.match(r"\d+", part)
        numbers.append(int(match.group()) if match else 0)
    while len(numbers) < 3:
        numbers.append(0)
    return tuple(numbers)


def parse_local_tag(version):
    """PyG wheel local tag '0.6.18+pt213cu126' -> {'torch': '2.13', 'variant': 'cu126'}."""
    if not version or "+" not in version:
        return None
    local = version.split("+", 1)[1]
    match = re.match(r"^pt(\d)(\d+)(cpu|cu\d+|rocm[\d.]+)$", local)
    if not match:
        return {"raw": local, "torch": None, "variant": None}
    return {"raw": local, "torch": match.group(1) + "." + match.group(2), "variant": match.group(3)}


def cuda_variant(cuda_version):
    """torch.version.cuda '12.6' -> 'cu126'; None -> 'cpu'."""
    if not cuda_version:
        return "cpu"
    return "cu" + cuda_version.replace(".", "")


def compress_cpu_list(cpus):
    """[0, 1, 2, 5] -> '0-2,5' (the notation of taskset and sysfs)."""
    ranges = []
    for cpu in sorted(cpus):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(str(a) if a == b else "%d-%d" % (a, b) for a, b in ranges)


def expand_cpu_list(text):
    """'0-2,5' -> [0, 1, 2, 5]."""
    cpus = []
    for part in text.strip().split(","):
        if not part:
            continue
        if "-" in part:
            low, high = part.split("-", 1)
            cpus.extend(range(int(low), int(high) + 1))
        else:
            cpus.append(int(part))
    return cpus


def read_text(path, limit=1 << 20):
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as handle:
            return handle.read(limit)
    except OSError:
        return None


def signal_name(returncode):
    if returncode is None or returncode >= 0:
        return None
    import signal
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return "signal %d" % -returncode


# ---------------------------------------------------------------------------
# Running code we do not control: a child in its own session, bounded in wall
# time, whose every descendant is found and ended. Shared by all three tools
# (the contract checkers import this module as `core`).
# ---------------------------------------------------------------------------

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
EXIT_GRACE_S = 0.5  # how long output is still read after the direct child exited
RECORD_LIMIT = 1 << 24  # bytes per record line; longer lines are split and dropped


def become_subreaper():
    """Make orphaned descendants (double fork, setsid) re-parent to this process.

    Linux only; elsewhere, or when prctl is refused, returns False and ending
    descendants falls back to killing the child's process group.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def process_table():
    """{pid: (ppid, state, command)} from /proc, or None where there is no /proc."""
    if not os.path.isdir("/proc/self"):
        return None
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as handle:
                stat = handle.read().decode("utf-8", "replace")
        except OSError:
            continue  # it exited meanwhile
        command = stat[stat.find("(") + 1:stat.rfind(")")]
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) >= 2:
            table[int(name)] = (int(fields[1]), fields[0], command)
    return table


def descendants_of(root, table):
    """Every pid below `root` in the parent tree of `table`."""
    children = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, stack = [], list(children.get(root, []))
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, []))
    return found


def reap_orphans():
    """Collect the exit status of re-parented descendants (they would stay zombies)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except (ChildProcessError, OSError, AttributeError):
            return
        if pid == 0:
            return


def end_descendants(exclude=(), rounds=50):
    """SIGKILL every live descendant of this process; return what was found.

    Repeats until a walk finds none, because a descendant may fork while the
    walk runs. `exclude` names pids not to report (the direct child).
    """
    import signal
    ended, seen = [], set()
    for _ in range(rounds):
        table = process_table()
        if table is None:
            return ended
        live = [pid for pid in descendants_of(os.getpid(), table) if table[pid][1] != "Z"]
        for pid in live:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                continue
            if pid not in seen and pid not in exclude:
                seen.add(pid)
                ended.append({"pid": pid, "command": sanitise_text(table[pid][2], 64)})
        reap_orphans()
        if not live:
            break
        time.sleep(0.01)
    return ended


class SandboxResult(object):
    """How a sandboxed child ended."""

    def __init__(self):
        self.returncode = None
        self.killed_for = None  # a reason given by `watch`, or "deadline"
        self.stderr_tail = ""
        self.descendants_ended = []  # processes left behind by the child, ended by us
        self.subreaper = False
        self.seconds = None

    def signal(self):
        return signal_name(self.returncode)


def run_sandboxed(command, env, deadline, on_record, watch=None, stderr_limit=8192):
    """Run `command`; each JSON record line it prints goes to on_record(stamp, record).

    Records carry the sender's pid (see ChildReporter); lines from any other
    process (a fork of the child) or that are not JSON objects are dropped.

    The child gets its own session; this process becomes a child subreaper.
    It ends when the child has exited (plus EXIT_GRACE_S for output still in
    flight: a grandchild holding the pipe open is never waited for), when
    watch(now) returns a reason, or at `deadline` (wall time, time.time()).
    Then the child's process group and every descendant are killed and reaped.
    """
    import subprocess
    import threading
    try:
        import queue
    except ImportError:  # pragma: no cover
        import Queue as queue
    result = SandboxResult()
    result.subreaper = become_subreaper()
    started = time.time()
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env, start_new_session=True)
    lines = queue.Queue()
    stderr_chunks = []

    def deliver(stamp, line):
        try:
            record = json.loads(line.decode("utf-8", "replace"))
        except ValueError:
            return
        if isinstance(record, dict) and record.pop("pid", None) == process.pid:
            on_record(stamp, record)

    def read_lines():
        for line in iter(lambda: process.stdout.readline(RECORD_LIMIT), b""):
            lines.put((time.time(), line))
        lines.put((time.time(), None))

    def read_stderr():
        for chunk in iter(lambda: process.stderr.read1(4096) if hasattr(process.stderr, "read1")
                          else process.stderr.read(4096), b""):
            stderr_chunks.append(chunk)
            if len(stderr_chunks) > 64:
                del stderr_chunks[:32]

    # Reader threads, not the main loop, block on the pipes: the loop below
    # only waits on a queue with a timeout, so nothing can hold it past the deadline.
    for target in (read_lines, read_stderr):
        thread = threading.Thread(target=target)
        thread.daemon = True
        thread.start()
    restore = terminate_as_exit()
    try:
        watch_child(process, deadline, lines, deliver, watch, result)
    finally:  # also when this process is told to stop (SIGTERM, Ctrl-C): nothing may outlive it
        kill_process_group(process)
        try:
            result.returncode = process.wait(timeout=5.0)  # SIGKILLed: only an exit in progress remains
        except subprocess.TimeoutExpired:
            process.kill()
            result.returncode = process.wait()
        result.descendants_ended = end_descendants(exclude=(process.pid,))
        restore()
    while True:  # records that arrived before the end still count
        try:
            stamp, line = lines.get_nowait()
        except queue.Empty:
            break
        if line is not None:
            deliver(stamp, line)
    tail = b"".join(stderr_chunks)[-stderr_limit:]
    result.stderr_tail = sanitise_text(tail.decode("utf-8", "replace"), stderr_limit)
    result.seconds = round(time.time() - started, 3)
    return result


def watch_child(process, deadline, lines, deliver, watch, result):
    """Deliver records until the child is done, watch() objects, or the deadline passes."""
    try:
        import queue
    except ImportError:  # pragma: no cover
        import Queue as queue
    exited_at = None
    while True:
        now = time.time()
        if now >= deadline:
            result.killed_for = "deadline"
            return
        reason = watch(now) if watch else None
        if reason:
            result.killed_for = reason
            return
        if exited_at is None and process.poll() is not None:
            exited_at = now
        if exited_at is not None and now - exited_at > EXIT_GRACE_S:
            return  # the child is gone; whoever still holds the pipe is not waited for
        try:
            stamp, line = lines.get(timeout=min(0.05, max(deadline - now, 0.001)))
        except queue.Empty:
            continue
        if line is None:
            return
        deliver(stamp, line)


def terminate_as_exit():
    """While a child runs, SIGTERM raises SystemExit so the cleanup still runs; -> undo function."""
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def stop(signum, frame):
        raise SystemExit(128 + signum)
    previous = signal.signal(signal.SIGTERM, stop)
    return lambda: signal.signal(signal.SIGTERM, previous)


class ChildReporter(object):
    """The child's side: JSON records, one a line, on a private copy of stdout.

    After this, fd 1 points at stderr, so anything the code under test prints
    cannot corrupt the record stream.
    """

    def __init__(self):
        self.fd = os.dup(1)
        os.dup2(2, 1)
        self.pid = os.getpid()

    def send(self, record):
        record = dict(record, pid=self.pid)
        data = (json.dumps(record, default=safe_str) + "\n").encode("utf-8")
        while data:
            data = data[os.write(self.fd, data):]


class CallReporter(ChildReporter):
    """Child side for tools that call user code: each bounded call is announced, facts are
    published as they are gathered, so a crash or a hard hang still leaves them with the parent."""

    def begin(self, what, timeout_s):
        self.send({"event": "call", "what": what, "timeout_s": timeout_s})

    def end(self):
        self.send({"event": "returned"})

    def publish(self, key, value):
        self.send({"event": "facts", "key": key, "value": value})

    def append(self, key, value):
        self.send({"event": "append", "key": key, "value": value})

    def done(self, **extra):
        self.send(dict(extra, event="done"))


CALL_GRACE_S = 2.0  # a call still running this long past its bound is ended by killing the child


def run_call_child(command, env, deadline=float("inf")):
    """Parent side of CallReporter: run the child in the sandbox and collect what it published.

    A call that outlives its announced bound by CALL_GRACE_S (blocked in C
    with the GIL held, so the child's own thread-based bound cannot fire) is
    ended by killing the child. -> (facts, done record or None, the call
    running at the end or None, SandboxResult).
    """
    facts, calls, state = {}, [], {"done": None}  # calls: the announced calls still running, outermost first

    def on_record(stamp, record):
        event = record.get("event")
        if event == "call":
            calls.append({"what": record.get("what"), "timeout_s": float(record.get("timeout_s") or 0),
                          "started": stamp})
        elif event == "returned":
            if calls:
                calls.pop()
        elif event == "facts":
            facts[record.get("key")] = record.get("value")
        elif event == "append":
            facts.setdefault(record.get("key"), []).append(record.get("value"))
        elif event == "done":
            state["done"] = record

    def watch(now):
        for call in calls:
            if now - call["started"] > call["timeout_s"] + CALL_GRACE_S:
                state["overrun"] = call
                return "call-timeout"
        return None

    result = run_sandboxed(command, env, deadline, on_record, watch)
    running = state.get("overrun") or (calls[-1] if calls else None)
    if running is not None:
        running = {"what": running["what"], "timeout_s": running["timeout_s"]}
    return facts, state["done"], running, result


def call_child_summary(outcome):
    """The "child" section of the contract checkers: how their sandboxed child ended."""
    return {"returncode": outcome.returncode, "signal": outcome.signal(), "seconds": outcome.seconds,
            "descendants_ended": outcome.descendants_ended, "subreaper": outcome.subreaper}


def call_child_cut_short(outcome, running, stuck):
    """A call child that published no "done": -> (timed_out, crash), exactly one of them not None.

    `stuck` names what failed to return control ("call", "load").
    """
    if outcome.killed_for == "call-timeout":
        return {"call": running["what"], "timeout_s": running["timeout_s"],
                "ended_by": "killing the child process (the %s did not return control)" % stuck}, None
    return None, {"call": (running or {}).get("what"), "signal": outcome.signal(),
                  "returncode": outcome.returncode, "stderr_tail": outcome.stderr_tail[-2000:]}


def kill_process_group(process):
    import signal
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (OSError, AttributeError):
        try:
            process.kill()
        except OSError:
            pass


def child_environment(base=None):
    """Environment for a child that imports torch: nothing written, no CUDA context."""
    env = dict(os.environ if base is None else base)
    env["PYTHONDONTWRITEBYTECODE"] = "1"      # no __pycache__ written anywhere
    env["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"  # CUDA availability from NVML, no context
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"
    # torch._dynamo creates <temp dir>/torchinductor_<user> at import time, and
    # finding the temp dir (tempfile.gettempdir) creates and deletes a probe
    # file in it. Pointing the cache at an existing directory avoids both.
    if "TORCHINDUCTOR_CACHE_DIR" not in env:
        env["TORCHINDUCTOR_CACHE_DIR"] = existing_temp_dir(env)
    return env


def existing_temp_dir(env):
    """The first existing directory of tempfile's candidates, without probing by writing."""
    candidates = [env.get(name) for name in ("TMPDIR", "TEMP", "TMP")]
    candidates += ["/tmp", "/var/tmp", "/usr/tmp", os.getcwd()]
    for candidate in candidates:
        if candidate and os.path.isdir(candidate):
            return os.path.abspath(candidate)
    return os.getcwd()


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def missing_torch_stack():
    """torch / torch_geometric not importable here, found without importing them (the torch-side tools' gate)."""
    import importlib.util
    return [name for name in ("torch", "torch_geometric") if importlib.util.find_spec(name) is None]


def quiet_child_process():
    """First thing a child does: no bytecode written, no temp-dir probe file, and (Linux) die
    with the tool even if the tool itself is SIGKILLed."""
    import signal
    import tempfile
    sys.dont_write_bytecode = True
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    # gettempdir() would create and delete a test file in each candidate.
    tempfile.tempdir = existing_temp_dir(os.environ)


# ---------------------------------------------------------------------------
# Text that goes into JSON: valid UTF-8, no lone surrogates, bounded length
# ---------------------------------------------------------------------------

TEXT_LIMIT = 4000  # characters per string; longer ones keep head and tail
TRUNCATION_MARKER = "...[%d characters cut]..."
_SURROGATE = re.compile(u"[\ud800-\udfff]")


def sanitise_text(text, limit=TEXT_LIMIT):
    """A string safe for any strict JSON parser, at most about `limit` characters."""
    if not isinstance(text, str):
        text = str(text)
    # Undecodable bytes arrive as lone surrogates (surrogateescape); strict
    # parsers reject them, so they become U+FFFD.
    text = _SURROGATE.sub(u"\ufffd", text)
    if len(text) > limit:
        cut = len(text) - limit
        head = limit * 2 // 3
        text = text[:head] + TRUNCATION_MARKER % cut + text[len(text) - (limit - head):]
    return text


def safe_str(value):
    """str(value) that cannot raise (a hostile __str__ may)."""
    try:
        text = str(value)
        return text if isinstance(text, str) else repr(text)
    except Exception as error:  # noqa: BLE001 - anything user code raises
        return "<unprintable %s: str() raised %s>" % (type(value).__name__, type(error).__name__)


def sanitise(value, limit=TEXT_LIMIT):
    """Every string (keys too) of a JSON-bound value made safe; NaN/inf become strings."""
    if isinstance(value, str):
        return sanitise_text(value, limit)
    if isinstance(value, dict):
        return dict((sanitise_text(safe_str(k), limit), sanitise(v, limit)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [sanitise(v, limit) for v in value]
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return str(value)  # strict parsers reject NaN and Infinity
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return sanitise_text(safe_str(value), limit)


def dumps(document, pretty=False):
    """The one way the tools turn a document into JSON text (write it as UTF-8 bytes)."""
    separators = None if pretty else (",", ":")  # compact means no padding spaces either
    return json.dumps(sanitise(document), indent=2 if pretty else None, separators=separators,
                      ensure_ascii=False, allow_nan=False)


def write_json(document, pretty=False, fd=1):
    """Print one JSON document as strict UTF-8 on `fd`, whatever the locale."""
    data = (dumps(document, pretty) + "\n").encode("utf-8")
    while data:
        data = data[os.write(fd, data):]


# ---------------------------------------------------------------------------
# Static stage: facts read without importing torch or any extension
# ---------------------------------------------------------------------------

def get_python_facts():
    import platform
    libc_name, libc_version = None, None
    try:
        # e.g. 'glibc 2.36'; instant, unlike platform.libc_ver()
        libc_name, libc_version = os.confstr("CS_GNU_LIBC_VERSION").split(" ", 1)
    except (AttributeError, ValueError, OSError):
        pass
    return {
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "prefix": sys.prefix,
        "in_virtualenv": sys.prefix != getattr(sys, "base_prefix", sys.prefix),
        "platform": sys.platform,
        "system": platform.system(),
        "release": platform.release(),
        "machine": platform.machine(),
        "libc": {"name": libc_name, "version": libc_version},
        "pip": has_pip(),
        "venv_tool": venv_tool(sys.prefix),
        "ephemeral": ephemeral_kind(sys.prefix),
    }


def has_pip():
    """Whether `python -m pip` can work here, found without importing pip (that takes ~200 ms)."""
    import importlib.util
    try:
        return importlib.util.find_spec("pip") is not None
    except (ImportError, ValueError):
        return False


def venv_tool(prefix):
    """'uv' or 'virtualenv' when pyvenv.cfg names the tool that made this venv, else None."""
    config = read_text(os.path.join(prefix, "pyvenv.cfg"), 8192) or ""
    for line in config.splitlines():
        key = line.split("=", 1)[0].strip().lower()
        if key in ("uv", "virtualenv"):
            return key
    return None


def ephemeral_kind(prefix):
    """'uv' or 'pipx' when `prefix` is a throwaway environment such a tool made for one run.

    `uv run script.py` with a PEP 723 header builds its own environment in uv's
    cache (and points VIRTUAL_ENV at it); uvx, `uv run --with` and `pipx run`
    do the same. None of them is where the user's torch lives.
    """
    real = os.path.realpath(prefix)
    parts = real.replace("\\", "/").split("/")
    uv_cache = os.environ.get("UV_CACHE_DIR")
    if uv_cache and real.startswith(os.path.realpath(uv_cache) + os.sep):
        return "uv"
    if "uv" in parts and any(p in parts for p in ("environments-v2", "archive-v0", "builds-v0", "tools")):
        return "uv"
    if "pipx" in parts and (".cache" in parts or "venvs" in parts):
        return "pipx"
    return None


def find_dist_info_dirs():
    """Yield (normalised name, dist-info path) for every distribution on sys.path.

    Scanning directory names is much faster than importlib.metadata's full
    walk and sees duplicates that importlib.metadata.distribution() hides.
    """
    seen_entries = set()
    for entry in sys.path:
        entry = os.path.realpath(entry or os.getcwd())
        if entry in seen_entries or not os.path.isdir(entry):
            continue
        seen_entries.add(entry)
        try:
            names = os.listdir(entry)
        except OSError:
            continue
        for name in names:
            if name.endswith((".dist-info", ".egg-info")):
                yield normalise_name(name.split("-", 1)[0]), os.path.join(entry, name)


def read_metadata_field(text, field):
    for line in (text or "").splitlines():
        if not line.strip():
            break  # headers end at the first blank line
        if line.lower().startswith(field.lower() + ":"):
            return line.split(":", 1)[1].strip()
    return None


def get_distribution_record(path):
    is_egg = path.endswith(".egg-info")
    metadata = read_text(os.path.join(path, "PKG-INFO" if is_egg else "METADATA"), 65536)
    if metadata is None and is_egg and os.path.isfile(path):
        metadata = read_text(path, 65536)
    version = read_metadata_field(metadata, "Version")
    wheel = read_text(os.path.join(path, "WHEEL"), 4096) or ""
    tags = [line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:")]
    installer = (read_text(os.path.join(path, "INSTALLER"), 256) or "").strip() or None
    top_level = (read_text(os.path.join(path, "top_level.txt"), 4096) or "").split()
    if not top_level:
        top_level = top_level_from_record(path)
    direct_url = read_text(os.path.join(path, "direct_url.json"), 4096)
    return {
        "name": read_metadata_field(metadata, "Name"),
        "version": version,
        "local_tag": parse_local_tag(version),
        "wheel_tags": tags,
        "installer": installer,
        "location": os.path.dirname(path),
        "metadata_dir": path,
        "top_level": top_level,
        "requires_python": read_metadata_field(metadata, "Requires-Python"),
        "editable_or_url": bool(direct_url),
    }


def top_level_from_record(path):
    modules = set()
    for line in (read_text(os.path.join(path, "RECORD"), 1 << 20) or "").splitlines():
        first = line.split(",", 1)[0].split("/", 1)[0]
        if first and not first.endswith((".dist-info", ".data")) and first != "..":
            modules.add(first[:-3] if first.endswith(".py") else first)
    return sorted(m for m in modules if m.isidentifier())


def get_conda_records():
    """Conda's own record of the packages it installed in this prefix."""
    conda_meta = os.path.join(sys.prefix, "conda-meta")
    if not os.path.isdir(conda_meta):
        return None
    records = []
    for name in sorted(os.listdir(conda_meta)):
        if name.endswith(".json"):
            records.append(name[:-5])
    return records


def pip_cache_dir():
    """pip's cache folder as pip would choose it (its config files aside), or None when disabled."""
    if os.environ.get("PIP_NO_CACHE_DIR", "").lower() in ("1", "true", "yes", "on"):
        return None
    if os.environ.get("PIP_CACHE_DIR"):
        return os.path.expanduser(os.environ["PIP_CACHE_DIR"])
    if sys.platform == "win32":
        return os.path.join(os.environ.get("LOCALAPPDATA", os.path.expanduser("~")), "pip", "Cache")
    if sys.platform == "darwin":
        return os.path.expanduser("~/Library/Caches/pip")
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pip")


def compiled_record_lines(record_text):
    return sorted(line for line in (record_text or "").splitlines()
                  if line.split(",", 1)[0].endswith((".so", ".pyd", ".dylib", ".dll")))


def find_cached_wheels(record, cache_dir, max_entries=20000):
    """Wheels of this exact name and version in pip's wheel cache, and whether the installed
    compiled files are byte-identical to one (same RECORD hashes): pip reinstalls such a wheel
    instead of building again, whatever torch it was built against."""
    prefix = "%s-%s-" % (re.sub(r"[-_.]+", "_", record["name"] or ""), record["version"])
    installed = compiled_record_lines(read_text(os.path.join(record["metadata_dir"], "RECORD"), 1 << 20))
    found, pending, seen = [], [os.path.join(cache_dir, "wheels")], 0
    while pending and seen < max_entries:
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError:
            continue
        seen += len(entries)
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
            elif entry.name.startswith(prefix) and entry.name.endswith(".whl"):
                found.append({"path": entry.path, "same_binary": bool(installed) and installed == cached_record_lines(
                    entry.path, record)})
    return found


def cached_record_lines(wheel_path, record):
    import zipfile
    try:
        with zipfile.ZipFile(wheel_path) as wheel:
            name = os.path.basename(record["metadata_dir"]) + "/RECORD"
            return compiled_record_lines(wheel.read(name).decode("utf-8", "replace"))
    except (OSError, KeyError, zipfile.BadZipFile):
        return None


def get_distribution_facts():
    found = {name: [] for name in TRACKED_DISTRIBUTIONS}
    for name, path in find_dist_info_dirs():
        if name in found:
            found[name].append(get_distribution_record(path))
    cache_dir = pip_cache_dir()
    for name in EXTENSION_DIST.values():
        for record in found[name]:
            # A local build (no +ptXY tag) is what pip's wheel cache can silently reinstall.
            if cache_dir and record["local_tag"] is None and record["installer"] == "pip" and record["version"]:
                record["pip_cache"] = find_cached_wheels(record, cache_dir)
    installed = {}
    for name in TRACKED_DISTRIBUTIONS:
        records = found[name]
        installed[name] = {
            "installed": bool(records),
            "version": records[0]["version"] if records else None,
            "installs": records,
        }
    # Modules claimed by more than one tracked distribution.
    claims = {}
    for name, facts in installed.items():
        for record in facts["installs"]:
            for module in record["top_level"]:
                claims.setdefault(module, set()).add(name)
    conda = get_conda_records()
    return {
        "packages": installed,
        "module_claims": {m: sorted(d) for m, d in sorted(claims.items()) if len(d) > 1},
        "conda_prefix": conda is not None,
        "conda_packages": [r for r in (conda or []) if re.match(
            r"^(pytorch|torch|pyg|pytorch-(sparse|scatter|cluster|spline-conv)|pyg-lib|libpyg)-", r)],
    }


def find_package_dir(module):
    """Directory of an importable top-level package, located without importing it."""
    import importlib.util
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def get_torch_build_facts():
    """torch's build facts from torch/version.py, parsed, never imported."""
    import ast
    package_dir = find_package_dir("torch")
    if package_dir is None:
        return {"found": False}
    source = read_text(os.path.join(package_dir, "version.py"))
    facts = {"found": True, "package_dir": package_dir}
    if source is None:
        facts["error"] = "torch/version.py is missing"
        return facts
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        facts["error"] = "torch/version.py does not parse: %s" % error
        return facts
    for node in tree.body:
        target, value = None, None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant):
            if target.id in ("__version__", "cuda", "hip", "rocm", "xpu", "debug", "git_version"):
                facts["version" if target.id == "__version__" else target.id] = value.value
    facts["variant"] = "rocm" if facts.get("hip") else cuda_variant(facts.get("cuda"))
    return facts


def get_pyg_source_facts():
    """Known PyG defects read from PyG's source text, without importing it."""
    package_dir = find_package_dir("torch_geometric")
    if package_dir is None:
        return {"found": False}
    facts = {"found": True, "package_dir": package_dir, "stack_level_typo": []}
    for relative in ("distributed/dist_neighbor_loader.py",
                     "distributed/dist_link_neighbor_loader.py",
                     "distributed/dist_neighbor_sampler.py"):
        source = read_text(os.path.join(package_dir, relative)) or ""
        for number, line in enumerate(source.splitlines(), 1):
            if re.search(r"\bstack_level\s*=", line):
                facts["stack_level_typo"].append("torch_geometric/%s:%d" % (relative, number))
    partition = read_text(os.path.join(package_dir, "distributed", "partition.py")) or ""
    facts["partition_saves_defaultdict"] = "defaultdict" in partition
    facts["distributed_present"] = os.path.isdir(os.path.join(package_dir, "distributed"))
    return facts


def read_sysfs_cpu_topology():
    """Physical cores and NUMA nodes from Linux sysfs (None elsewhere)."""
    base = "/sys/devices/system"
    numa = []
    node_dir = os.path.join(base, "node")
    if os.path.isdir(node_dir):
        for name in sorted(os.listdir(node_dir)):
            if re.match(r"^node\d+$", name):
                cpulist = read_text(os.path.join(node_dir, name, "cpulist"), 4096)
                if cpulist is not None:
                    numa.append({"node": int(name[4:]), "cpus": cpulist.strip()})
    cores = set()
    cpu_dir = os.path.join(base, "cpu")
    if os.path.isdir(cpu_dir):
        for name in os.listdir(cpu_dir):
            if re.match(r"^cpu\d+$", name):
                topology = os.path.join(cpu_dir, name, "topology")
                core = read_text(os.path.join(topology, "core_id"), 64)
                package = read_text(os.path.join(topology, "physical_package_id"), 64)
                if core is not None and package is not None:
                    cores.add((package.strip(), core.strip()))
    return {"numa_nodes": numa or None, "physical_cores": len(cores) or None}


def get_cpu_facts():
    facts = {"logical_cores": os.cpu_count()}
    if hasattr(os, "sched_getaffinity"):
        allowed = sorted(os.sched_getaffinity(0))
        facts["affinity"] = {"count": len(allowed), "cpus": compress_cpu_list(allowed)}
    else:
        facts["affinity"] = None
    topology = read_sysfs_cpu_topology()
    facts["physical_cores"] = topology["physical_cores"]
    facts["physical_cores_source"] = "sysfs" if topology["physical_cores"] else None
    facts["numa_nodes"] = topology["numa_nodes"]
    facts["psutil_physical_cores"] = None
    try:
        import psutil  # optional; PyG's enable_cpu_affinity needs it anyway
        facts["psutil_physical_cores"] = psutil.cpu_count(logical=False)
        if facts["physical_cores"] is None:
            facts["physical_cores"] = facts["psutil_physical_cores"]
            facts["physical_cores_source"] = "psutil"
    except Exception:  # psutil absent or broken: sysfs is enough
        pass
    return facts


def parse_int_variable(raw):
    try:
        return int(raw.strip()), None
    except ValueError:
        return None, "not an integer"


def parse_slurm_task_counts(raw):
    """SLURM's '4(x2),3' -> [4, 4, 3] (one count per node), or None when malformed."""
    counts = []
    for part in raw.strip().split(","):
        match = re.match(r"^(\d+)(?:\(x(\d+)\))?$", part.strip())
        if not match:
            return None
        counts.extend([int(match.group(1))] * int(match.group(2) or 1))
    return counts or None


def parse_slurm_task_count(raw, node_id):
    """The task count of this node (SLURM_NODEID picks it when counts differ per node)."""
    counts = parse_slurm_task_counts(raw)
    if counts is None:
        return None, "not a SLURM task count like 4 or 4(x2)"
    if node_id is not None and 0 <= node_id < len(counts):
        return counts[node_id], None
    return max(counts), None


def get_environment_facts():
    threads = {}
    for name in THREAD_VARIABLES:
        if name in os.environ:
            threads[name] = os.environ[name]
    launch = {}
    node_id = parse_int_variable(os.environ.get("SLURM_NODEID", ""))[0]
    for name in LAUNCH_INT_VARIABLES:
        if name in os.environ:
            if name in SLURM_TASK_COUNT_VARIABLES:
                value, error = parse_slurm_task_count(os.environ[name], node_id)
            else:
                value, error = parse_int_variable(os.environ[name])
            launch[name] = {"raw": os.environ[name], "value": value, "error": error}
    for name in LAUNCH_STR_VARIABLES:
        if name in os.environ:
            launch[name] = {"raw": os.environ[name], "value": os.environ[name], "error": None}
    interfaces = None
    if os.path.isdir("/sys/class/net"):
        interfaces = sorted(os.listdir("/sys/class/net"))
    hostname = os.uname()[1] if hasattr(os, "uname") else None
    return {
        "threads": threads,
        "launch": launch,
        "network_interfaces": interfaces,
        "launcher": detect_launcher(),
        "hostname": hostname,
        "name_resolution": get_name_resolution_facts(hostname, os.environ.get("MASTER_ADDR")),
    }


def read_hosts_file(path=HOSTS_FILE):
    """/etc/hosts as {lower-case name: [addresses in file order]}; None if unreadable."""
    text = read_text(path)
    if text is None:
        return None
    names = {}
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split()
        for name in fields[1:]:
            names.setdefault(name.lower(), []).append(fields[0])
    return names


def nsswitch_hosts_order():
    """The 'hosts:' sources of /etc/nsswitch.conf, e.g. ['files', 'dns']; None if unread."""
    text = read_text("/etc/nsswitch.conf")
    for line in (text or "").splitlines():
        if line.strip().startswith("hosts:"):
            return [word for word in line.split(":", 1)[1].split() if not word.startswith("[")]
    return None


def is_loopback_address(text):
    import ipaddress
    try:
        return ipaddress.ip_address(text.split("%", 1)[0]).is_loopback
    except ValueError:
        return None


def resolve_without_dns(name, hosts):
    """What a name stands for without asking DNS: a literal address, or its /etc/hosts lines.

    getaddrinfo may still differ (DNS, nss-myhostname, a hosts order other
    than 'files' first), so the evidence says where the answer came from.
    `loopback`: every address is loopback (a store client tries them in
    order); `first_loopback`: the first one is (gloo binds to the first it can).
    """
    if name is None:
        return None
    name = name.strip()
    literal = is_loopback_address(name.strip("[]"))
    if literal is not None:
        return {"name": name, "source": "literal", "addresses": [name.strip("[]")], "loopback": literal,
                "first_loopback": literal}
    addresses = (hosts or {}).get(name.lower(), [])
    if addresses:
        flags = [is_loopback_address(address) is True for address in addresses]
        return {"name": name, "source": HOSTS_FILE, "addresses": addresses, "loopback": all(flags),
                "first_loopback": flags[0]}
    # glibc answers "localhost" itself when /etc/hosts lacks it.
    known = True if name.lower() == "localhost" else None
    return {"name": name, "source": "not-in-hosts-file" if hosts is not None else "hosts-file-unreadable",
            "addresses": [], "loopback": known, "first_loopback": known}


def get_name_resolution_facts(hostname, master_addr):
    hosts = read_hosts_file()
    return {
        "hosts_order": nsswitch_hosts_order(),
        "hostname": resolve_without_dns(hostname, hosts),
        "MASTER_ADDR": resolve_without_dns(master_addr, hosts),
    }


def detect_launcher():
    if "TORCHELASTIC_RUN_ID" in os.environ or "GROUP_RANK" in os.environ:
        return "torchrun"
    if "SLURM_PROCID" in os.environ:
        return "slurm"
    if "OMPI_COMM_WORLD_RANK" in os.environ or "PMI_RANK" in os.environ:
        return "mpi"
    if "RANK" in os.environ or "WORLD_SIZE" in os.environ:
        return "env"
    return None


def gather_static_facts():
    return {
        "python": get_python_facts(),
        "distributions": get_distribution_facts(),
        "torch_build": get_torch_build_facts(),
        "pyg_source": get_pyg_source_facts(),
        "cpu": get_cpu_facts(),
        "environment": get_environment_facts(),
    }


# ---------------------------------------------------------------------------
# Which interpreter to probe. Rule (also in --help): --python wins; otherwise
# the active environment ($VIRTUAL_ENV, else $CONDA_PREFIX; when uv/pipx
# replaced VIRTUAL_ENV with its own throwaway env, the first other venv on
# PATH) is probed instead of the running interpreter when the running one is
# such a throwaway env or a base Python outside any environment. A running
# interpreter that is itself a real venv/conda env is probed as asked.
# ---------------------------------------------------------------------------

# Runs under any Python, 2.7 included, and answers one record in run_sandboxed's format.
INTERPRETER_QUESTION = (
    "import json, os, platform, sys\n"
    "pip = None\n"
    "try:\n"
    "    import importlib.util\n"
    "    pip = importlib.util.find_spec('pip') is not None\n"
    "except Exception:\n"
    "    pass\n"
    "sys.stdout.write(json.dumps({'pid': os.getpid(), 'interpreter': {'version': list(sys.version_info[:3]), "
    "'implementation': platform.python_implementation(), 'executable': sys.executable, "
    "'prefix': sys.prefix, 'pip': pip}}) + '\\n')\n")


def looks_like_python(path):
    """Only files named like an interpreter are ever run: `bash -c CODE` would run CODE as shell."""
    names = (os.path.basename(path), os.path.basename(os.path.realpath(path)))
    return any(re.match(r"^(python|pypy)[\w.\-]*(\.exe)?$", name, re.I) for name in names)


def ask_interpreter(path, timeout):
    """What `path` is: {"is_python", "version", "implementation", "prefix", "pip"} or a reason it is not Python.

    The question runs in the sandbox like the probe: a site-packages hook of
    that interpreter may hang, crash or leave processes behind.
    """
    if not looks_like_python(path):
        return {"is_python": False, "reason": "its name is not python*/pypy*, so it was not run"}
    limit = min(timeout, 30.0)
    answers = []
    try:
        ended = run_sandboxed([path, "-c", INTERPRETER_QUESTION], child_environment(), time.time() + limit,
                              lambda stamp, record: answers.append(record.get("interpreter")))
    except OSError as error:
        return {"is_python": False, "reason": "it cannot be run: %s" % error}
    answer = next((a for a in answers if isinstance(a, dict) and isinstance(a.get("version"), list)), None)
    if answer is not None:
        answer["is_python"] = True
        answer["version"] = ".".join(str(part) for part in answer["version"])
        return answer
    if ended.killed_for == "deadline":
        return {"is_python": False, "reason": "it did not answer a one-line Python program within %ds" % limit}
    tail = ended.stderr_tail.strip()[-300:]
    return {"is_python": False, "reason": "it printed no answer to a one-line Python program (exit status %s)%s"
            % (ended.returncode, ": " + tail if tail else "")}


def environment_python(prefix):
    for relative in ("bin/python", "bin/python3", "Scripts/python.exe", "python.exe"):
        candidate = os.path.join(prefix, relative)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def same_path(a, b):
    return bool(a and b) and os.path.realpath(a) == os.path.realpath(b)


def active_environment(running_ephemeral):
    """The environment the user works in, as the shell says: {"source", "prefix", "python"} or None."""
    candidates = [(name, os.environ[name]) for name in ("VIRTUAL_ENV", "CONDA_PREFIX")
                  if os.environ.get(name) and not ephemeral_kind(os.environ[name])]
    if not candidates and running_ephemeral:
        # uv points VIRTUAL_ENV at its own env but leaves the activated venv's bin on PATH.
        for entry in os.environ.get("PATH", "").split(os.pathsep):
            prefix = os.path.dirname(entry.rstrip("/\\"))
            if entry and os.path.isfile(os.path.join(prefix, "pyvenv.cfg")) and not ephemeral_kind(prefix) \
                    and not same_path(prefix, sys.prefix):
                candidates.append(("PATH", prefix))
                break
    for source, prefix in candidates:
        return {"source": source, "prefix": prefix, "python": environment_python(prefix)}
    return None


def is_environment(prefix, base_prefix):
    """A venv or a conda env, as opposed to a base/system Python."""
    return not same_path(prefix, base_prefix) or os.path.isdir(os.path.join(prefix, "conda-meta"))


def choose_interpreter(requested):
    """-> (python to probe, facts about the choice). `requested` is --python or None."""
    running_ephemeral = ephemeral_kind(sys.prefix)
    active = active_environment(running_ephemeral)
    running_is_active = bool(active) and same_path(active["prefix"], sys.prefix)
    choice = {"chosen_by": "running", "probed": sys.executable, "running": sys.executable,
              "running_ephemeral": running_ephemeral, "active_environment": active}
    if requested is not None:
        choice.update(chosen_by="--python", probed=requested)
    elif active and not running_is_active and active["python"] and (
            running_ephemeral or not is_environment(sys.prefix, getattr(sys, "base_prefix", sys.prefix))):
        choice.update(chosen_by="active-environment", probed=active["python"])
    return choice["probed"], choice


def finish_interpreter_facts(choice, answer):
    """Add what the probed interpreter said about itself (None when it is the running one)."""
    prefix = (answer or {}).get("prefix") or (sys.prefix if choice["probed"] == sys.executable else None)
    active = choice["active_environment"]
    choice["probed_prefix"] = prefix
    choice["probed_ephemeral"] = ephemeral_kind(prefix) if prefix else None
    choice["probed_is_active"] = same_path(active["prefix"], prefix) if active and prefix else None
    return choice


# ---------------------------------------------------------------------------
# Import stage: runs inside the child interpreter, one step at a time.
# Each step reports "begin" before it starts and "result" when done, so the
# parent knows which step was running if the child dies or hangs.
# ---------------------------------------------------------------------------

def describe_exception(error):
    """The error and, where it has causes, the whole chain: torch wraps the real dlopen error in __cause__."""
    chain, seen = [], set()
    while error is not None and id(error) not in seen and len(chain) < 10:
        seen.add(id(error))
        chain.append({"type": type(error).__name__, "message": sanitise_text(safe_str(error), 2000)})
        error = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
    described = {"type": chain[0]["type"], "message": chain[0]["message"]}
    if len(chain) > 1:  # a chain of one would only repeat type and message
        described["chain"] = chain
    return described


def captured_warnings(caught):
    return [{"category": safe_str(getattr(w.category, "__name__", w.category)),
             "message": sanitise_text(safe_str(w.message), 2000)} for w in caught[:50]]


# NVML return codes (nvml.h) -> their NVML_ERROR_* names.
NVML_ERRORS = {
    1: "UNINITIALIZED", 2: "INVALID_ARGUMENT", 3: "NOT_SUPPORTED", 4: "NO_PERMISSION",
    5: "ALREADY_INITIALIZED", 6: "NOT_FOUND", 7: "INSUFFICIENT_SIZE", 8: "INSUFFICIENT_POWER",
    9: "DRIVER_NOT_LOADED", 10: "TIMEOUT", 11: "IRQ_ISSUE", 12: "LIBRARY_NOT_FOUND",
    13: "FUNCTION_NOT_FOUND", 14: "CORRUPTED_INFOROM", 15: "GPU_IS_LOST", 16: "RESET_REQUIRED",
    17: "OPERATING_SYSTEM", 18: "LIB_RM_VERSION_MISMATCH", 19: "IN_USE", 20: "MEMORY", 21: "NO_DATA",
    999: "UNKNOWN",
}
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_BUFFER = 96  # NVML_DEVICE_NAME_V2_BUFFER_SIZE, NVML_DEVICE_UUID_V2_BUFFER_SIZE
# Where NVML is loaded from: the driver's soname, found by the dynamic loader
# (LD_LIBRARY_PATH, ldconfig cache), unless this variable names a file.
NVML_LIBRARY = "libnvidia-ml.so.1"
NVML_LIBRARY_VARIABLE = "SCALABLE_DISTRIBUTED_NVML"


def probe_nvml():
    """GPU facts from NVML through ctypes: no CUDA call, no context, no GPU memory."""
    import ctypes
    library = os.environ.get(NVML_LIBRARY_VARIABLE) or NVML_LIBRARY
    facts = {"available": False, "library": library, "library_override": NVML_LIBRARY_VARIABLE in os.environ}
    try:
        nvml = ctypes.CDLL(library)
    except OSError as error:
        facts.update(reason="library-not-found", message=str(error)[:500])
        return facts
    error_string = getattr(nvml, "nvmlErrorString", None)
    if error_string is not None:
        error_string.restype = ctypes.c_char_p

    def describe(code):
        message = error_string(code) if error_string is not None else None
        return {"code": code, "name": "NVML_ERROR_" + NVML_ERRORS.get(code, "UNKNOWN"),
                "message": message.decode("utf-8", "replace")[:200] if message else None}

    def call(name, *arguments):
        function = getattr(nvml, name, None)
        return NVML_ERROR_FUNCTION_NOT_FOUND if function is None else function(*arguments)

    code = call("nvmlInit_v2")
    if code != 0:
        facts.update(reason="init-failed", error=describe(code))
        return facts
    try:
        facts["available"] = True
        text = ctypes.create_string_buffer(NVML_BUFFER)
        facts["driver_version"] = text.value.decode("utf-8", "replace") if call(
            "nvmlSystemGetDriverVersion", text, NVML_BUFFER) == 0 else None
        # The newest CUDA version this driver supports, as 1000 * major + 10 * minor.
        version = ctypes.c_int()
        facts["cuda_driver_version"] = None
        for name in ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"):
            if call(name, ctypes.byref(version)) == 0:
                facts["cuda_driver_version"] = "%d.%d" % (version.value // 1000, version.value % 1000 // 10)
                break
        count = ctypes.c_uint()
        facts["devices"] = []
        code = call("nvmlDeviceGetCount_v2", ctypes.byref(count))
        if code != 0:
            facts["count_error"] = describe(code)
            return facts
        for index in range(min(count.value, 64)):
            facts["devices"].append(nvml_device(nvml, call, describe, index))
        return facts
    finally:
        call("nvmlShutdown")


def nvml_device(nvml, call, describe, index):
    """Name, UUID, compute capability, memory and MIG state of one NVML device."""
    import ctypes
    device = {"index": index}
    handle = ctypes.c_void_p()
    code = call("nvmlDeviceGetHandleByIndex_v2", index, ctypes.byref(handle))
    if code != 0:
        device["error"] = describe(code)
        return device
    text = ctypes.create_string_buffer(NVML_BUFFER)
    if call("nvmlDeviceGetName", handle, text, NVML_BUFFER) == 0:
        device["name"] = text.value.decode("utf-8", "replace")
    if call("nvmlDeviceGetUUID", handle, text, NVML_BUFFER) == 0:
        device["uuid"] = text.value.decode("utf-8", "replace")
    major, minor = ctypes.c_int(), ctypes.c_int()
    if call("nvmlDeviceGetCudaComputeCapability", handle, ctypes.byref(major), ctypes.byref(minor)) == 0:
        device["capability"] = "%d.%d" % (major.value, minor.value)
    class Memory(ctypes.Structure):  # nvmlMemory_t
        _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]
    memory = Memory()
    if call("nvmlDeviceGetMemoryInfo", handle, ctypes.byref(memory)) == 0:
        device["memory_total_bytes"] = int(memory.total)
    current, pending = ctypes.c_uint(), ctypes.c_uint()
    code = call("nvmlDeviceGetMigMode", handle, ctypes.byref(current), ctypes.byref(pending))
    device["mig_mode"] = None  # the GPU has no MIG (NVML_ERROR_NOT_SUPPORTED)
    if code == 0:
        device["mig_mode"] = {"current": current.value, "pending": pending.value}
    elif code != NVML_ERROR_NOT_SUPPORTED:
        device["mig_mode"] = {"error": describe(code)}
    if code == 0 and current.value == 1:
        device["mig_devices"] = []
        slots = ctypes.c_uint()
        if call("nvmlDeviceGetMaxMigDeviceCount", handle, ctypes.byref(slots)) == 0:
            for slot in range(min(slots.value, 16)):
                mig = ctypes.c_void_p()
                if call("nvmlDeviceGetMigDeviceHandleByIndex", handle, slot, ctypes.byref(mig)) != 0:
                    continue  # an empty slot is NVML_ERROR_NOT_FOUND
                if call("nvmlDeviceGetUUID", mig, text, NVML_BUFFER) == 0:
                    device["mig_devices"].append({"slot": slot, "uuid": text.value.decode("utf-8", "replace")})
    return device


def probe_torch():
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import torch
    facts = {
        "version": torch.__version__,
        "file": torch.__file__,
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "debug": bool(torch.version.debug),
        "cxx11_abi": bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", False)),
        "num_threads": torch.get_num_threads(),
        "num_interop_threads": torch.get_num_interop_threads(),
        "mkl": torch.backends.mkl.is_available(),
        "openmp": torch.backends.openmp.is_available(),
        "warnings": captured_warnings(caught),
    }
    return facts


def probe_cuda(nvml):
    """What torch's CUDA build brings, read without any CUDA call.

    torch.cuda.is_available() and device_count() are not called: when NVML
    cannot answer they fall back to cudaGetDeviceCount, which runs cuInit.
    Availability is derived from NVML and these facts in the parent.
    """
    import torch
    compiled = bool(torch.version.cuda) and hasattr(torch._C, "_cuda_getDeviceCount")
    facts = {
        "built_with": torch.version.cuda,
        "compiled": compiled,
        "arch_list": [],
        "nccl_version": None,
        "cudnn_version": None,
        "visible_devices_env": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "releases_code_cc": torch_release_archs(),
        "nvml": nvml,
    }
    if compiled:
        # The compile-time list; torch.cuda.get_arch_list() returns [] unless is_available().
        facts["arch_list"] = torch._C._cuda_getArchFlags().split()
        try:
            import torch.cuda.nccl
            facts["nccl_version"] = list(torch.cuda.nccl.version())
        except Exception as error:  # a build without NCCL
            facts["nccl_error"] = describe_exception(error)
        try:
            # Not torch.backends.cudnn.version(): its first call checks every
            # device's capability, which creates a CUDA context.
            from torch._C import _cudnn
            facts["cudnn_version"] = int(_cudnn.getVersionInt())
        except Exception as error:  # a build without cuDNN
            facts["cudnn_error"] = describe_exception(error)
    facts["context_created"] = bool(torch.cuda.is_initialized())
    return facts


def torch_release_archs():
    """torch's own table of the compute capabilities each CUDA build of this release has."""
    import platform
    import torch.cuda
    table = getattr(torch.cuda, "PYTORCH_RELEASES_CODE_CC", None)
    if not isinstance(table, dict):
        return None
    machine = "aarch64" if platform.machine().lower() in ("aarch64", "arm64") else "x86_64"
    return {cuda: sorted(by_machine.get(machine, ())) for cuda, by_machine in table.items()}


def probe_distributed():
    import torch.distributed as dist
    facts = {"available": dist.is_available(), "backends": {}, "rpc_available": False}
    if facts["available"]:
        for backend in ("gloo", "nccl", "mpi", "ucc"):
            check = getattr(dist, "is_%s_available" % backend, None)
            facts["backends"][backend] = bool(check()) if check else False
        try:
            import torch.distributed.rpc as rpc
            facts["rpc_available"] = bool(rpc.is_available())
        except Exception as error:  # rpc is optional in some builds
            facts["rpc_error"] = describe_exception(error)
    return facts


def registered_namespaces():
    import torch
    return set(name.split("::", 1)[0] for name in torch._C._dispatch_get_all_op_names() if "::" in name)


def operators_in(namespace):
    import torch
    prefix = namespace + "::"
    return sorted(set(name[len(prefix):].split(".", 1)[0]
                      for name in torch._C._dispatch_get_all_op_names() if name.startswith(prefix)))


def probe_extension(module):
    import importlib
    import importlib.util
    import warnings
    if sys.modules.get(module, False) is None:
        return {"status": "blocked"}
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return {"status": "not-installed"}
    before = registered_namespaces()
    started = time.time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            imported = importlib.import_module(module)
        except BaseException as error:
            if isinstance(error, (KeyboardInterrupt, SystemExit)) and not isinstance(error, SystemExit):
                raise
            facts = {"status": "import-error", "error": describe_exception(error)}
            imported = None
    if imported is not None:
        facts = {"status": "ok", "version": getattr(imported, "__version__", None)}
    facts["file"] = getattr(spec, "origin", None)
    facts["import_seconds"] = round(time.time() - started, 3)
    facts["warnings"] = captured_warnings(caught)
    new_namespaces = sorted(registered_namespaces() - before)
    facts["ops_namespaces"] = new_namespaces
    facts["ops"] = {ns: operators_in(ns) for ns in new_namespaces}
    namespace = "pyg" if module == "pyg_lib" else module
    facts["cuda_version"] = compiled_cuda_version(namespace)
    return facts


def compiled_cuda_version(namespace):
    """The extension's own cuda_version() op: -1 for CPU builds, e.g. 12060 for CUDA 12.6."""
    import torch
    try:
        return int(getattr(torch.ops, namespace).cuda_version())
    except Exception:
        return None


def probe_pyg():
    import warnings
    import torch
    started = time.time()
    show_config = torch.__config__.show
    if torch.version.cuda:
        # torch_geometric/typing.py computes NO_MKL from 'USE_MKL=OFF' in
        # torch.__config__.show(); on a CUDA build show() calls
        # cudaGetDeviceCount, which initialises the driver (cuInit). The MKL
        # build flag gives PyG the same answer without any CUDA call.
        torch.__config__.show = lambda: "USE_MKL=%s" % ("ON" if torch.backends.mkl.is_available() else "OFF")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import torch_geometric
            import torch_geometric.typing as typing
    finally:
        torch.__config__.show = show_config
    flags = {}
    for name in sorted(dir(typing)):
        if name.startswith(("WITH_", "NO_")):
            value = getattr(typing, name)
            if isinstance(value, bool):
                flags[name] = value
    if flags.get("WITH_PYG_LIB"):
        backend = "pyg-lib"
    elif flags.get("WITH_TORCH_SPARSE"):
        backend = "torch-sparse"
    else:
        backend = None
    return {
        "version": torch_geometric.__version__,
        "file": torch_geometric.__file__,
        "import_seconds": round(time.time() - started, 3),
        "flags": flags,
        "neighbor_backend": backend,
        "induced_backend": "torch-sparse" if flags.get("WITH_TORCH_SPARSE") else None,
        "warnings": captured_warnings(caught),
    }


# A tiny directed graph in CSC form (edges grouped by destination), the form
# PyG hands to both backends: edge k goes SMOKE_SOURCES[k] -> its destination.
SMOKE_EDGES = ((1, 0), (4, 0), (0, 1), (2, 1), (3, 1), (0, 2), (5, 2), (4, 3))
SMOKE_NUM_NODES = 6
SMOKE_SEEDS = (1, 0)


def smoke_graph():
    import torch
    sources = [s for s, _ in SMOKE_EDGES]
    colptr = [0] * (SMOKE_NUM_NODES + 1)
    for _, destination in SMOKE_EDGES:
        colptr[destination + 1] += 1
    for index in range(SMOKE_NUM_NODES):
        colptr[index + 1] += colptr[index]
    return torch.tensor(colptr), torch.tensor(sources), torch.tensor(SMOKE_SEEDS)


def check_sample(node, row, col, edge, fanout):
    """Return a list of problems with one hop of sampled edges (empty when correct)."""
    node, row, col = node.tolist(), row.tolist(), col.tolist()
    edge = edge.tolist() if edge is not None else None
    problems = []
    if node[:len(SMOKE_SEEDS)] != list(SMOKE_SEEDS):
        problems.append("seed nodes not first in the output: %s" % node)
    if len(set(node)) != len(node):
        problems.append("duplicate nodes in the output: %s" % node)
    if len(row) != len(col):
        problems.append("row and col differ in length")
        return problems
    sampled = [(node[r], node[c]) for r, c in zip(row, col)]
    expected = {seed: set(s for s, d in SMOKE_EDGES if d == seed) for seed in SMOKE_SEEDS}
    for source, destination in sampled:
        if destination not in expected or source not in expected[destination]:
            problems.append("edge %d->%d does not exist or is not into a seed" % (source, destination))
    for seed in SMOKE_SEEDS:
        got = [s for s, d in sampled if d == seed]
        want = len(expected[seed]) if fanout < 0 else min(fanout, len(expected[seed]))
        if len(got) != want:
            problems.append("seed %d: %d neighbours sampled, expected %d" % (seed, len(got), want))
    if edge is not None and len(edge) == len(sampled):
        for edge_id, pair in zip(edge, sampled):
            if not 0 <= edge_id < len(SMOKE_EDGES) or SMOKE_EDGES[edge_id] != pair:
                problems.append("edge id %s does not match edge %s" % (edge_id, pair))
    return problems


def smoke_backend(backend):
    """One-hop samples (all neighbours, then one) through a backend, checked for correctness."""
    import torch
    colptr, row_index, seeds = smoke_graph()
    results = []
    for fanout in (-1, 1):
        if backend == "pyg-lib":
            import pyg_lib
            out = pyg_lib.sampler.neighbor_sample(colptr, row_index, seeds, [fanout], csc=True)
            row, col, node, edge = out[:4]
        else:
            import torch_sparse  # noqa: F401  (registers the operators)
            node, row, col, edge = torch.ops.torch_sparse.neighbor_sample(
                colptr, row_index, seeds, [fanout], False, True)
        problems = check_sample(node, row, col, edge, fanout)
        results.append({"fanout": fanout, "sampled_edges": len(row.tolist()), "problems": problems})
    return {"passed": all(not r["problems"] for r in results), "samples": results}


def has_operator(qualified_name):
    import torch
    try:
        torch._C._dispatch_find_schema_or_throw(qualified_name, "")
        return True
    except RuntimeError:
        return False


def has_cuda_kernel(qualified_name):
    import torch
    try:
        return bool(torch._C._dispatch_has_kernel_for_dispatch_key(qualified_name, "CUDA"))
    except RuntimeError:
        return False


def probe_features(extensions):
    """What each sampling feature can use; METIS is tried for real on a tiny graph."""
    import inspect
    facts = {}
    pyg_lib_ok = extensions.get("pyg_lib", {}).get("status") == "ok"
    sparse_ok = extensions.get("torch_sparse", {}).get("status") == "ok"
    signature = ()
    if pyg_lib_ok:
        import pyg_lib
        try:
            signature = tuple(inspect.signature(pyg_lib.sampler.neighbor_sample).parameters)
        except (AttributeError, TypeError, ValueError):
            signature = ()
    facts["pyg_lib_sampler_parameters"] = list(signature)
    facts["dist_ops"] = {op: has_operator("pyg::" + op) for op in DIST_SAMPLER_OPS} if pyg_lib_ok else {}
    facts["pyg_lib_partition"] = bool(pyg_lib_ok and hasattr(sys.modules.get("pyg_lib"), "partition"))
    facts["pyg_lib_cuda_sampling"] = bool(pyg_lib_ok and has_cuda_kernel("pyg::neighbor_sample"))
    facts["torch_sparse_metis"] = probe_torch_sparse_metis() if sparse_ok else None
    return facts


def probe_torch_sparse_metis():
    """Partition a 6-node ring with torch-sparse; source builds raise 'Not compiled with METIS support'."""
    import torch
    ring = [(i, (i + 1) % 6) for i in range(6)]
    pairs = sorted(ring + [(b, a) for a, b in ring])
    rowptr = [0] * 7
    for source, _ in pairs:
        rowptr[source + 1] += 1
    for index in range(6):
        rowptr[index + 1] += rowptr[index]
    col = torch.tensor([b for _, b in pairs])
    try:
        parts = torch.ops.torch_sparse.partition(torch.tensor(rowptr), col, None, 2, False)
    except (AttributeError, RuntimeError) as error:
        return {"works": False, "error": describe_exception(error)}
    return {"works": int(parts.numel()) == 6, "parts": parts.tolist()}


def refuse_sockets(active=lambda: True):
    """Make every Python-level socket creation fail in the child while active(), and note who tried.

    `import torch_geometric` imports requests, and urllib3 binds a socket on
    ::1 at import time to test for IPv6; libraries treat the refusal as
    "no IPv6". The returned list fills as attempts happen.
    """
    attempts = []

    def audit(event, args):
        if event == "socket.__new__" and active():
            frame = sys._getframe(1)
            while frame is not None and frame.f_code.co_filename.endswith("socket.py"):
                frame = frame.f_back
            origin = frame.f_code.co_filename if frame is not None else "?"
            attempts.append({"event": event, "origin": origin[-120:]})
            raise PermissionError("check_sampling_backends is read-only: no sockets")

    sys.addaudithook(audit)
    return attempts


def child_steps(config):
    steps = ["static", "nvml", "torch", "cuda", "distributed"]
    steps += ["ext:" + module for module, _ in EXTENSIONS]
    steps += ["pyg", "smoke:pyg-lib", "smoke:torch-sparse", "features"]
    return [s for s in steps if s not in config.get("skip", {})]


def run_child_step(step, results):
    if step == "static":
        return gather_static_facts()
    if step == "nvml":
        return probe_nvml()
    if step == "torch":
        return probe_torch()
    if step == "cuda":
        return probe_cuda((results.get("nvml") or {}).get("data"))
    if step == "distributed":
        return probe_distributed()
    if step.startswith("ext:"):
        return probe_extension(step[4:])
    if step == "pyg":
        return probe_pyg()
    if step.startswith("smoke:"):
        return smoke_backend(step[6:])
    if step == "features":
        return probe_features({k[4:]: v.get("data") or {} for k, v in results.items() if k.startswith("ext:")})
    raise ValueError("unknown step %s" % step)


def step_applies(step, results):
    """Skip steps whose prerequisites failed, so one failure is reported once."""
    torch_ok = results.get("torch", {}).get("status") == "ok"
    if step in ("static", "nvml"):
        return True
    if step == "torch":
        return results.get("static", {}).get("data", {}).get("torch_build", {}).get("found", True)
    if not torch_ok:
        return False
    if step.startswith("smoke:"):
        module = "pyg_lib" if step == "smoke:pyg-lib" else "torch_sparse"
        return results.get("ext:" + module, {}).get("data", {}).get("status") == "ok"
    return True


def child_main(config_text):
    """Entry point of the child interpreter: probe step by step, report as JSON lines."""
    import faulthandler
    config = json.loads(config_text)
    quiet_child_process()
    reporter = ChildReporter()
    faulthandler.enable()  # a segfault prints the Python stack to stderr
    for module in config.get("block", []):
        sys.modules[module] = None  # makes `import module` raise ImportError
    refused_sockets = refuse_sockets()
    results = {}
    for step in child_steps(config):
        if not step_applies(step, results):
            results[step] = {"status": "not-run"}
            reporter.send({"event": "result", "step": step, "status": "not-run"})
            continue
        reporter.send({"event": "begin", "step": step})
        started = time.time()
        try:
            data = run_child_step(step, results)
            record = {"status": "ok", "data": data}
        except BaseException as error:
            if isinstance(error, KeyboardInterrupt):
                raise
            record = {"status": "error", "error": describe_exception(error)}
        record["seconds"] = round(time.time() - started, 3)
        results[step] = record
        reporter.send(dict(record, event="result", step=step))
    reporter.send({"event": "result", "step": "refused_sockets", "status": "ok", "data": refused_sockets})
    reporter.send({"event": "done"})
    return 0


# ---------------------------------------------------------------------------
# Parent: run the child with a deadline; on a crash or hang, name the culprit
# and run again without it, until every step has an answer or time runs out.
# ---------------------------------------------------------------------------

class ChildAttempt(object):
    """One run of the child: its records, how it ended and the step it was in."""

    def __init__(self):
        self.results = {}
        self.current = None
        self.current_started = None
        self.done = False
        self.returncode = None
        self.killed_for = None  # "hung" or "deadline"
        self.stderr_tail = ""


def run_child_attempt(python, config, deadline, hang_limit, hang_steps):
    attempt = ChildAttempt()
    command = [python, "-B", os.path.abspath(__file__), CHILD_FLAG, json.dumps(config)]

    def on_record(stamp, record):
        event = record.pop("event", None)
        if event == "begin":
            attempt.current, attempt.current_started = record.get("step"), stamp
        elif event == "result":
            attempt.results[record.pop("step", None)] = record
            attempt.current, attempt.current_started = None, None
        elif event == "done":
            attempt.done = True

    def watch(now):
        if (attempt.current in hang_steps and attempt.current_started is not None
                and now - attempt.current_started > hang_limit):
            return "hung"
        return None

    outcome = run_sandboxed(command, child_environment(), deadline, on_record, watch)
    attempt.returncode = outcome.returncode
    attempt.killed_for = outcome.killed_for
    attempt.stderr_tail = outcome.stderr_tail[-2000:]
    attempt.descendants_ended = outcome.descendants_ended
    attempt.subreaper = outcome.subreaper
    return attempt


def run_import_probe(python, timeout, started):
    """Run the child (again, without culprits) until all steps are answered or time is up."""
    deadline = started + timeout
    # An extension import or smoke sample normally takes well under a second
    # once torch is loaded; one still busy after this long is declared hung,
    # leaving time to probe the rest without it.
    hang_limit = max(2.0, min(20.0, timeout * 0.4))
    hang_steps = set(["ext:" + m for m, _ in EXTENSIONS]
                     + ["smoke:pyg-lib", "smoke:torch-sparse", "features", "nvml", "cuda", "distributed"])
    config = {"skip": {}, "block": []}
    results, attempts, culprits = {}, [], {}
    while True:
        if deadline - time.time() < 0.5:
            break
        attempt_started = time.time()
        attempt = run_child_attempt(python, config, deadline, hang_limit, hang_steps)
        results.update(attempt.results)
        summary = {
            "returncode": attempt.returncode,
            "signal": signal_name(attempt.returncode),
            "finished": attempt.done,
            "killed_for": attempt.killed_for,
            "culprit": attempt.current,
            "seconds": round(time.time() - attempt_started, 3),
            "blocked_modules": list(config["block"]),
            "skipped_steps": sorted(config["skip"]),
            # processes the child left behind (daemons, forks), ended by the checker
            "descendants_ended": attempt.descendants_ended,
            "subreaper": attempt.subreaper,
        }
        attempts.append(summary)
        if attempt.done or attempt.current is None:
            if not attempt.done:
                summary["stderr_tail"] = attempt.stderr_tail
            break
        culprit = attempt.current
        outcome = attempt.killed_for or "crashed"
        culprits[culprit] = {
            "status": outcome,
            "returncode": attempt.returncode,
            "signal": None if attempt.killed_for else signal_name(attempt.returncode),
            "seconds": round(time.time() - attempt_started, 3),
            "stderr_tail": attempt.stderr_tail,
        }
        if outcome == "deadline" or culprit in ("static", "torch", "pyg"):
            break  # nothing useful can run without these, or no time is left
        if culprit.startswith("ext:"):
            config["block"].append(culprit[4:])
        config["skip"][culprit] = outcome
    for step, record in culprits.items():
        results[step] = record
    return {
        "results": results,
        "attempts": attempts,
        "hang_limit_s": hang_limit,
        "complete": bool(attempts) and attempts[-1]["finished"],
        "blocked_modules": list(config["block"]),
        "culprits": sorted(culprits),
    }


# ---------------------------------------------------------------------------
# Assembling facts from the probe records
# ---------------------------------------------------------------------------

def step_data(results, step):
    record = results.get(step) or {}
    return record.get("data") if record.get("status") == "ok" else None


def step_outcome(results, step):
    """Plain description of how a step ended: status plus error/signal facts."""
    record = results.get(step)
    if record is None:
        return {"status": "not-run"}
    if record.get("status") == "ok":
        return {"status": "ok"}
    outcome = {"status": record.get("status")}
    for key in ("error", "signal", "returncode", "stderr_tail", "seconds"):
        if record.get(key) is not None:
            outcome[key] = record[key]
    return outcome


def assemble_facts(static, probe, python, options):
    results = probe["results"] if probe else {}
    facts = dict(static)
    facts["probe"] = None
    if probe is not None:
        facts["probe"] = {
            "interpreter": python,
            "complete": probe["complete"],
            "hang_limit_s": probe["hang_limit_s"],
            "blocked_modules": probe["blocked_modules"],
            "refused_sockets": step_data(results, "refused_sockets") or [],
            "culprits": probe["culprits"],
            "attempts": probe["attempts"],
        }
    torch_data = step_data(results, "torch")
    facts["torch"] = dict(torch_data, status="ok") if torch_data else step_outcome(results, "torch")
    if probe is None:
        facts["torch"] = {"status": "not-probed"}
    facts["cuda"] = step_data(results, "cuda") or dict(step_outcome(results, "cuda"), nvml=step_data(results, "nvml"))
    facts["cuda"].update(cuda_usability(facts["cuda"]))
    facts["distributed"] = step_data(results, "distributed") or step_outcome(results, "distributed")
    pyg = step_data(results, "pyg")
    facts["pyg"] = dict(pyg, status="ok") if pyg else step_outcome(results, "pyg")
    extensions = {}
    for module, dist in EXTENSIONS:
        step = "ext:" + module
        data = step_data(results, step)
        entry = dict(data) if data else step_outcome(results, step)
        if entry.get("status") == "deadline":
            entry["status"] = "hung"
            entry["deadline"] = True
        elif entry.get("status") == "error":  # the probe itself failed, not the import
            entry["status"] = "probe-error"
        entry["distribution"] = dist
        extensions[module] = entry
    facts["extensions"] = extensions
    smoke = {}
    for backend in ("pyg-lib", "torch-sparse"):
        step = "smoke:" + backend
        data = step_data(results, step)
        if data is not None:
            smoke[backend] = data
        else:
            outcome = step_outcome(results, step)
            outcome["passed"] = False
            smoke[backend] = outcome
    # A failed features step must show, not read as "nothing available".
    features = step_data(results, "features") or (step_outcome(results, "features") if probe else {})
    facts["sampling"] = {
        "neighbor_backend": (pyg or {}).get("neighbor_backend"),
        "smoke": smoke,
        "features": feature_matrix(facts, smoke, features),
        "probe": features,
    }
    if probe is None:
        mark_not_probed(facts)
    facts["install"] = install_facts(facts, python)
    return facts


# The oldest driver branch of each CUDA major: from it on, minor-version
# compatibility lets any CUDA x.y build run (NVIDIA CUDA Compatibility guide, table 1).
CUDA_MAJOR_MIN_DRIVER = {11: "450.80.02", 12: "525", 13: "580"}
# Jetson/embedded compute capabilities: code built for them runs only on them
# and they run only their own code (torch.cuda.DEVICE_REQUIREMENT says the same).
EXACT_ONLY_CAPABILITIES = (53, 62, 72, 87, 101, 110)
# For a torch without PYTORCH_RELEASES_CODE_CC: PyTorch's CUDA support matrix
# (RELEASE.md, releases 2.11 to 2.14, Linux x86_64) by CUDA version of the build.
TORCH_CUDA_BUILD_ARCHS = {"12.6": [50, 60, 70, 75, 80, 86, 90], "13.0": [75, 80, 86, 90, 100, 120]}
# NVML init errors after which CUDA cannot work either.
NVML_FATAL_ERRORS = ("NVML_ERROR_DRIVER_NOT_LOADED", "NVML_ERROR_LIB_RM_VERSION_MISMATCH")


def capability_number(text):
    """'9.0' -> 90, '12.1' -> 121 (the numbering of sm_XY)."""
    major, _, minor = (text or "").partition(".")
    return int(major) * 10 + int(minor or 0) if major.isdigit() and (minor or "0").isdigit() else None


def code_runs_on(code, ptx, device):
    """Whether code compiled for sm_<code> (or PTX compute_<code>) runs on a device of that capability.

    A cubin runs on later minors of its own major; PTX is JIT-compiled by the
    driver for any later capability.
    """
    if code in EXACT_ONLY_CAPABILITIES or device in EXACT_ONLY_CAPABILITIES:
        return code == device
    if ptx:
        return device >= code
    return device // 10 == code // 10 and device >= code


def arch_flags_cover(arch_list, device):
    for flag in arch_list:
        match = re.match(r"^(sm|compute)_(\d+)[af]?$", flag)
        if match and code_runs_on(int(match.group(2)), match.group(1) == "compute", device):
            return True
    return False


def match_visible_entry(entry, devices):
    """What one CUDA_VISIBLE_DEVICES entry names: (NVML index, MIG UUID or None) or (None, why not)."""
    if entry.startswith(("GPU-", "MIG-")):
        if entry.startswith("MIG-"):
            migs = [(d["index"], m["uuid"]) for d in devices for m in d.get("mig_devices") or []]
            if not migs:
                return None, "no GPU has MIG instances (MIG mode off or none created)"
            found = [(index, mig) for index, mig in migs if mig.startswith(entry)]
        else:
            found = [(d["index"], None) for d in devices if (d.get("uuid") or "").startswith(entry)]
        if len(found) == 1:
            return found[0], None
        return None, "matches no device UUID NVML lists" if not found else "ambiguous UUID prefix"
    number = re.match(r"^\+?(\d+)", entry)  # CUDA reads entries like strtoul: '1gpu' is 1
    if number:
        index = int(number.group(1))
        if index < len(devices):
            return (index, None), None
        return None, "no device %d: NVML lists %d (indices 0-%d)" % (index, len(devices), len(devices) - 1)
    if entry.startswith("-"):
        return None, "a negative index"
    return None, "neither a device index nor a GPU-/MIG- UUID" if entry else "empty"


def resolve_visible_devices(value, devices):
    """CUDA's reading of CUDA_VISIBLE_DEVICES against NVML's device list.

    CUDA stops at the first entry that names no device (later entries are
    ignored too), and torch reads a repeated device as no device at all.
    """
    if value is None or not devices:
        return {"set": value is not None, "value": value, "unmatched": [], "ignored": [],
                "visible": [{"index": d["index"], "mig": None} for d in devices]}
    visible, unmatched, ignored = [], [], []
    entries = [e.strip() for e in value.split(",")]
    for position, entry in enumerate(entries):
        named, why = match_visible_entry(entry, devices)
        if named is None:
            unmatched.append({"entry": entry, "reason": why})
            ignored = entries[position + 1:]
            break
        if any(v["index"] == named[0] and v["mig"] == named[1] for v in visible):
            unmatched.append({"entry": entry, "reason": "repeats an earlier entry: torch then sees no device"})
            visible = []
            break
        visible.append({"index": named[0], "mig": named[1], "entry": entry})
    return {"set": True, "value": value, "visible": visible, "unmatched": unmatched, "ignored": ignored}


def cuda_usability(cuda):
    """Whether torch could really use the GPUs, derived without a CUDA call.

    available: true when NVML lists devices, CUDA_VISIBLE_DEVICES leaves some,
    the driver's CUDA major is at least torch's, and torch has kernels for at
    least one visible device; null when that cannot be told without a CUDA
    call (NVML fails in a way CUDA may survive) or nothing was probed.
    """
    nvml = cuda.get("nvml") or {}
    devices = (nvml.get("devices") or []) if nvml.get("available") else []
    visibility = resolve_visible_devices(cuda.get("visible_devices_env"), devices)
    by_index = dict((d["index"], d) for d in devices)
    archs = []
    for entry in visibility["visible"]:
        capability = capability_number(by_index[entry["index"]].get("capability"))
        archs.append({"index": entry["index"], "capability": by_index[entry["index"]].get("capability"),
                      "kernels": None if capability is None else arch_flags_cover(cuda.get("arch_list") or [],
                                                                                    capability)})
    built, driver = cuda.get("built_with"), nvml.get("cuda_driver_version")
    blocked = []
    if "compiled" not in cuda:
        blocked.append("torch-not-probed")  # --static-only, or torch failed first
    elif not cuda["compiled"]:
        blocked.append("torch-not-a-cuda-build")
    if not nvml:
        blocked.append("nvml-not-probed")
    elif nvml.get("reason") == "library-not-found":
        blocked.append("no-nvidia-driver")
    elif nvml.get("reason") == "init-failed":
        blocked.append("nvml-init-failed")
    elif not devices:
        blocked.append("no-devices")
    elif not visibility["visible"]:
        blocked.append("cuda-visible-devices-hides-all")
    if built and driver and parse_version(driver)[0] < parse_version(built)[0]:
        blocked.append("cuda-driver-too-old")
    if cuda.get("compiled") and archs and not any(a["kernels"] for a in archs):
        blocked.append("cuda-arch-not-compiled")
    undecided = ["torch-not-probed", "nvml-not-probed"]
    if (nvml.get("error") or {}).get("name") not in NVML_FATAL_ERRORS:
        undecided.append("nvml-init-failed")  # CUDA may work although NVML does not
    available = None if blocked and all(b in undecided for b in blocked) else not blocked
    return {
        "available": available,
        "device_count": len(visibility["visible"]) if available else 0,
        "blocked_by": blocked,
        "visible_devices": visibility,
        "device_archs": archs,
    }


def torch_builds_covering(cuda, capabilities, within_driver=False):
    """CUDA variants ('cu126') of the probed torch release with kernels for every capability.

    Newest first, those the NVML driver runs without minor-version caveats
    first; a build of a newer CUDA major than the driver's is left out, and
    with within_driver so is any build newer than the driver's CUDA.
    """
    table = cuda.get("releases_code_cc") or TORCH_CUDA_BUILD_ARCHS
    driver = (cuda.get("nvml") or {}).get("cuda_driver_version")
    covering = [version for version, codes in table.items()
                if all(any(code_runs_on(code, False, c) for code in codes) for c in capabilities)]
    covering.sort(key=parse_version, reverse=True)
    if driver:
        have = parse_version(driver)[:2]
        older = [v for v in covering if parse_version(v)[:2] <= have]
        newer_minor = [v for v in covering if parse_version(v)[0] == have[0] and parse_version(v)[:2] > have]
        covering = older + ([] if within_driver else newer_minor)
    return [cuda_variant(version) for version in covering]

def mark_not_probed(facts):
    """--static-only imports nothing: what only the probe can know is "not-probed"/null, never false."""
    for section in ("torch", "cuda", "distributed", "pyg"):
        facts[section] = {"status": "not-probed"}
    for entry in facts["extensions"].values():
        entry["status"] = "not-probed"
    sampling = facts["sampling"]
    sampling["smoke"] = {backend: {"status": "not-probed", "passed": None} for backend in sampling["smoke"]}
    sampling["features"] = {name: None for name in sampling["features"]}


def feature_matrix(facts, smoke, features):
    pyg = facts["pyg"] if facts["pyg"].get("status") == "ok" else {}
    flags = pyg.get("flags", {})
    pyg_lib_works = bool(flags.get("WITH_PYG_LIB")) and smoke["pyg-lib"].get("passed", False)
    sparse_works = bool(flags.get("WITH_TORCH_SPARSE")) and smoke["torch-sparse"].get("passed", False)
    backend = pyg.get("neighbor_backend")
    cuda = facts.get("cuda") or {}
    metis = features.get("pyg_lib_partition") or bool((features.get("torch_sparse_metis") or {}).get("works"))
    dist_ops = features.get("dist_ops") or {}
    return {
        "neighbor": bool(backend) and smoke.get(backend, {}).get("passed", False),
        "induced": sparse_works,
        "disjoint": pyg_lib_works,
        "weighted": pyg_lib_works and bool(flags.get("WITH_WEIGHTED_NEIGHBOR_SAMPLE")),
        "temporal_node": pyg_lib_works,
        "temporal_edge": pyg_lib_works and bool(flags.get("WITH_EDGE_TIME_NEIGHBOR_SAMPLE")),
        "metis": bool(metis),
        "distributed": bool(dist_ops) and all(dist_ops.values()),
        "gpu": bool(features.get("pyg_lib_cuda_sampling")) and (cuda.get("device_count") or 0) > 0,
        "hgt_shadow": sparse_works,
    }


def platform_key(python_facts):
    system = (python_facts.get("system") or "").lower()
    machine = (python_facts.get("machine") or "").lower()
    if system == "linux":
        return "linux-" + ("aarch64" if machine in ("aarch64", "arm64") else machine)
    if system == "windows":
        return "win32-amd64"
    if system == "darwin":
        return "darwin-" + ("arm64" if machine == "arm64" else "x86_64")
    return system + "-" + machine


def wheel_row(dist, torch_minor):
    for row in WHEEL_ROWS:
        if row[0] == dist and row[1] == torch_minor:
            return row
    return None


def wheel_status(dist, torch_minor, variant, platform_name, python_version):
    """Whether PyG's index has a wheel of `dist` for this combination: True, False or None (unknown)."""
    row = wheel_row(dist, torch_minor)
    answer = {"distribution": dist, "wheel": None, "variants": None,
              "source": row[3] if row else "unknown: no row for torch %s" % torch_minor,
              "source_date": row[4] if row else None}
    if variant == "rocm":
        return dict(answer, wheel=False, reason="PyG publishes no ROCm wheels")
    if row is None or row[2] is None:
        return dict(answer, reason="no public source says whether %s has wheels for torch %s" % (dist, torch_minor))
    answer["variants"] = list(row[2])
    if variant not in row[2]:
        if not row[2]:
            return dict(answer, wheel=False, reason="no %s wheels for torch %s" % (dist, torch_minor))
        return dict(answer, wheel=False, reason="%s wheels for torch %s exist only for %s, not %s" % (
            dist, torch_minor, ", ".join(row[2]), variant))
    if dist == "pyg-lib" and python_version[:2] < (3, 10):
        return dict(answer, wheel=False, reason="pyg-lib wheels need Python >= 3.10")
    if platform_name not in WHEEL_PLATFORMS[dist]:
        return dict(answer, reason="no source lists %s wheels for %s" % (dist, platform_name))
    return dict(answer, wheel=True, reason=None)


def pip_name(dist):
    return dist.replace("-", "_")  # the names PyG's wheel index lists


def wheel_command(python, dists, index_url, reinstall=False):
    """The wheel install line; --only-binary makes a missing wheel fail fast instead of compiling."""
    flags = "--force-reinstall --no-deps --no-cache-dir " if reinstall else ""
    return "%s -m pip install %s--only-binary=:all: %s -f %s" % (
        python, flags, " ".join(pip_name(d) for d in dists), index_url)


def source_build_command(python, dists):
    """Rebuild from PyPI's sdists, in build order, ignoring pip's wheel cache (it may hold a wheel
    built against the torch installed earlier, which pip would reinstall unchanged)."""
    wanted = set(dists)
    return " && ".join("%s -m pip install %s %s==%s" % (python, SOURCE_BUILD_FLAGS, dist, version)
                       for dist, version in SOURCE_BUILDS if dist in wanted)


def source_build_time(dists):
    """One time figure for building these sdists, from the measured minutes."""
    unmeasured = [d for d in dists if d not in SOURCE_BUILD_MINUTES]
    if unmeasured:
        return "build time of %s not measured" % ", ".join(unmeasured)
    return "about %d min on 2 cores" % sum(SOURCE_BUILD_MINUTES[d] for d in dists)


def torch_install_command(release, variant, python="python", platform_name="linux-x86_64"):
    """The exact line that installs torch `release` (e.g. '2.12.1') built for `variant` (cpu, cu126, ...).

    The local tag (+cu130) is part of the pin: `torch==2.13.0` alone is already satisfied by an
    installed 2.13.0+cpu, so pip would keep the wrong build. macOS wheels have no tag and come from PyPI.
    """
    if platform_name.startswith("darwin"):
        return "%s -m pip install torch==%s" % (python, release)
    return "%s -m pip install torch==%s+%s --index-url %s" % (python, release, variant,
                                                              TORCH_INDEX.format(variant=variant))


def newest_torch_with_wheels(variant, platform_name, python_version):
    """The newest torch minor (and the release to pin) with wheels of every sampling extension."""
    minors = sorted({row[1] for row in WHEEL_ROWS}, key=parse_version, reverse=True)
    for minor in minors:
        if all(wheel_status(d, minor, variant, platform_name, python_version)["wheel"] for d in SAMPLING_DISTS):
            return minor, TORCH_NEWEST_PATCH.get(minor, minor + ".0")
    return None, None


def install_facts(facts, python):
    build = facts.get("torch_build") or {}
    torch_version = (facts.get("torch") or {}).get("version") or build.get("version")
    if not torch_version:
        return {"index_url": None, "command": None, "wheels_available": None,
                "support_table_date": WHEEL_TABLE_DATE}
    major, minor, _ = parse_version(torch_version)
    torch_minor = "%d.%d" % (major, minor)
    cuda = (facts.get("torch") or {}).get("cuda") if facts.get("torch", {}).get("status") == "ok" else build.get("cuda")
    hip = build.get("hip")
    variant = "rocm" if hip else cuda_variant(cuda)
    python_facts = facts.get("python") or {}
    platform_name = platform_key(python_facts)
    if platform_name.startswith("darwin"):
        variant = "cpu"  # PyG's macOS wheels are CPU-only
    python_version = parse_version(python_facts.get("version"))
    index_url = WHEEL_INDEX.format(torch="%s.0" % torch_minor, variant=variant)
    packages = {dist: wheel_status(dist, torch_minor, variant, platform_name, python_version)
                for dist in WHEEL_PLATFORMS}
    with_wheels = [d for d in SAMPLING_DISTS if packages[d]["wheel"]]
    missing = [d for d in SAMPLING_DISTS if packages[d]["wheel"] is False]
    py = quote(python)
    pin_minor, pin_release = newest_torch_with_wheels(variant, platform_name, python_version)
    pin = None
    if pin_minor and variant != "rocm" and pin_minor != torch_minor:
        pin = {"torch_minor": pin_minor, "release": pin_release,
               "command": "%s && %s" % (
                   torch_install_command(pin_release, variant, py, platform_name),
                   # --force-reinstall: an installed local build of the same version would satisfy pip.
                   wheel_command(py, SAMPLING_DISTS, WHEEL_INDEX.format(torch=pin_minor + ".0", variant=variant),
                                 reinstall=True))}
    return {
        "torch_minor": torch_minor,
        "variant": variant,
        "platform": platform_name,
        "index_url": index_url,
        # Only the extensions the table says have a wheel here: one missing wheel would fail the whole line.
        "command": wheel_command(py, with_wheels, index_url) if with_wheels else None,
        # What that line prints where data.pyg.org cannot be reached: these wheels are on no other index.
        "error_without_index": "ERROR: No matching distribution found for %s" % pip_name(with_wheels[0])
        if with_wheels else None,
        "packages": packages,
        # True: every sampling extension has a wheel; False: one has none; None: unknown.
        "wheels_available": False if missing else (len(with_wheels) == len(SAMPLING_DISTS) or None),
        "no_wheel_reasons": [packages[d]["reason"] for d in SAMPLING_DISTS if packages[d]["wheel"] is not True],
        "support_table_date": WHEEL_TABLE_DATE,
        "torch_pin": pin,
        "source_build_command": source_build_command(py, ("torch-scatter", "torch-sparse")),
        "source_build_needs": SOURCE_BUILD_NEEDS,
        "source_build_time": source_build_time(("torch-scatter", "torch-sparse")),
    }


def quote(text):
    import shlex
    return shlex.quote(text)


# ---------------------------------------------------------------------------
# Diagnosis rules: each is a function from facts to a list of findings.
# ---------------------------------------------------------------------------

def finding(finding_id, evidence, fix=None, severity=None, title=None):
    default_severity, default_title = FINDINGS[finding_id]
    return {
        "id": finding_id,
        "severity": severity or default_severity,
        "title": title or default_title,
        "evidence": evidence,
        "fix": fix,
        "docs": "%s#%s" % (DOCS, finding_id),
    }


def pip_fix(facts, packages, reinstall=False):
    """The install line for this torch build, naming only extensions that have a wheel here;
    for the others, the way out (a source build, or a torch that has the wheels)."""
    install = facts["install"]
    if not install.get("index_url"):
        return None
    py = interpreter(facts)
    dists = [name.replace("_", "-") for name in packages]
    others = [d for d in dists if d not in install["packages"]]  # not PyG extensions: plain PyPI packages
    dists = [d for d in dists if d not in others]
    wheels = [d for d in dists if install["packages"][d]["wheel"]]
    lacking = [d for d in dists if d not in wheels]
    parts = ["%s -m pip install %s" % (py, " ".join(others))] if others else []
    if wheels:
        parts.append(wheel_command(py, wheels, install["index_url"], reinstall))
    notes = []
    legacy = [d for d in lacking if d in ("torch-cluster", "torch-spline-conv")]
    if legacy:
        parts.append("%s -m pip uninstall -y %s" % (py, " ".join(legacy)))
        notes.append("%s: no wheel for torch %s+%s and PyG 2.8 ignores them (pyg-lib >= 0.6 has their ops)" % (
            ", ".join(legacy), install["torch_minor"], install["variant"]))
    buildable = [d for d in lacking if d in ("torch-scatter", "torch-sparse")]
    if buildable:
        if "torch-sparse" in buildable and facts["extensions"].get("torch_scatter", {}).get("status") != "ok":
            buildable.append("torch-scatter")  # torch_sparse imports it
        parts.append(source_build_command(py, buildable))
        notes.append("%s: no wheel for torch %s+%s, so build from PyPI's source (%s; needs %s)" % (
            ", ".join(d for d in lacking if d in buildable), install["torch_minor"], install["variant"],
            source_build_time(set(buildable)), SOURCE_BUILD_NEEDS))
    if "pyg-lib" in lacking:
        pin = install.get("torch_pin")
        notes.append("pyg-lib: %s%s" % (install["packages"]["pyg-lib"]["reason"],
                                         "; or use torch %s, which has all wheels: %s" % (
                                             pin["release"], pin["command"]) if pin else ""))
        if not buildable:
            parts.append(source_build_command(py, SOURCE_BUILD_PACKAGES["pyg_lib"]))
            notes.append("that build: %s; needs %s" % (source_build_time(SOURCE_BUILD_PACKAGES["pyg_lib"]),
                                                        SOURCE_BUILD_NEEDS))
            notes.append("torch-sparse (built above) samples neighbours instead; pyg-lib has no sdist on PyPI")
    return " && ".join(parts) + ("  # " + "; ".join(notes) if notes else "")


def interpreter(facts):
    return quote(interpreter_path(facts))


def interpreter_path(facts):
    """The probed interpreter (--python), also in static-only runs."""
    return ((facts.get("probe") or {}).get("interpreter") or (facts.get("python") or {}).get("executable")
            or sys.executable)


# Step outcomes that mean the import itself failed. "deadline" and "not-run"
# mean the probe ran out of time first; probe-deadline reports those.
FAILED_STEP_STATUSES = ("error", "crashed", "hung")


def torch_reinstall_command(facts):
    """Reinstall the same torch build: a local tag (+cpu, +cu126) names PyTorch's own index."""
    build = facts["torch_build"]
    version = (build.get("version") or "").split("+")[0]
    command = "%s -m pip install --force-reinstall torch==%s" % (interpreter(facts), version)
    variant = build.get("variant")
    if "+" in (build.get("version") or "") and variant and variant != "rocm":
        command += " --index-url https://download.pytorch.org/whl/%s" % variant
    return command


# A torch release PyG's wheel table (WHEEL_ROWS: pyg-lib has wheels for it) covers and the tests run
# on; the install fix pins it so pip does not pick a newer torch PyG has no
# wheels for yet.
TORCH_PIN = "2.13.0"
TORCH_PIN_NEEDS_PYTHON = (3, 10)


def gpu_seen(facts):
    """True/False from NVML when the probe asked it, None when nothing asked (static-only)."""
    nvml = (facts.get("cuda") or {}).get("nvml")
    if not nvml:
        return None
    return bool(nvml.get("available") and nvml.get("devices"))


def torch_and_pyg_install_command(facts):
    """Install torch (pinned) and PyG; the CPU-only build unless a GPU was seen."""
    python = interpreter(facts)
    platform_name = platform_key(facts["python"])
    lasting = "~/.venvs/pyg/bin/python"
    lasting_install = "%s && %s -m pip install torch_geometric" % (
        torch_install_command(TORCH_PIN, "cpu", lasting, platform_name), lasting)
    if facts["python"].get("ephemeral"):
        # Installing into a throwaway env helps no later run (interpreter-ephemeral says why).
        return ("not into this throwaway %s env: make a lasting one: python3 -m venv ~/.venvs/pyg && %s"
                % (facts["python"]["ephemeral"], lasting_install))
    if parse_version(facts["python"]["version"])[:2] < TORCH_PIN_NEEDS_PYTHON:
        return ("torch %s and PyG 2.8 need Python %d.%d+; make a venv with a newer Python: "
                "python3.11 -m venv ~/.venvs/pyg && %s"
                % ((TORCH_PIN,) + TORCH_PIN_NEEDS_PYTHON + (lasting_install,)))
    seen = gpu_seen(facts)
    if seen:  # PyPI's default Linux build is a CUDA one
        command = "%s -m pip install torch==%s" % (python, TORCH_PIN)
    else:
        command = torch_install_command(TORCH_PIN, "cpu", python, platform_key(facts["python"]))
    command += " && %s -m pip install torch_geometric" % python
    if seen is None:
        command += "  # CPU-only torch: nothing asked for GPUs here; drop +cpu and --index-url for the CUDA build"
    elif not seen:
        command += "  # CPU-only torch: no GPU seen (NVML); drop +cpu and --index-url for the CUDA build"
    return command


def checker_command(*flags):
    return " ".join(("python3 scripts/check_sampling_backends.py",) + flags)


def rule_interpreter_choice(facts, options):
    """Say so when the probed interpreter is not where the user works."""
    choice = facts.get("interpreter") or {}
    active = choice.get("active_environment")
    if choice.get("probed_is_active") is False:
        evidence = {"probed": choice["probed"], "chosen_by": choice["chosen_by"],
                    "active_environment": active["prefix"], "from": active["source"],
                    "running": choice["running"]}
        if active.get("python"):
            fix = checker_command("--python", quote(active["python"]))
        else:
            fix = "%s has no bin/python: activate the environment you train in, then run: %s" % (
                quote(active["prefix"]), checker_command())
        # An explicit --python is a choice the user made; otherwise it is a surprise.
        severity = "info" if choice["chosen_by"] == "--python" else None
        return [finding("interpreter-not-active", evidence, fix=fix, severity=severity)]
    if choice.get("probed_ephemeral") and not active:
        return [finding("interpreter-ephemeral", {
            "probed": choice["probed"], "tool": choice["probed_ephemeral"], "prefix": choice["probed_prefix"],
            "why": "a %s run made this environment for the script alone; your torch is elsewhere"
                   % choice["probed_ephemeral"]},
            fix="activate the environment you train in (e.g. source ~/.venvs/pyg/bin/activate), then run: %s"
                % checker_command())]
    return []


def adapt_pip_fixes(facts, findings):
    """Never print `X -m pip` for an X without pip: uv-made venvs get `uv pip`, others ensurepip first."""
    python = facts.get("python") or {}
    if python.get("pip") is not False:
        return findings
    interpreter_text = interpreter(facts)
    pip_prefix = "%s -m pip " % interpreter_text
    for item in findings:
        fix = item.get("fix")
        if not fix or pip_prefix not in fix:
            continue
        if "uv" in (python.get("venv_tool"), python.get("ephemeral")):
            item["fix"] = re.sub(re.escape(pip_prefix) + r"(install|uninstall) ",
                                 lambda match: "uv pip %s --python %s " % (match.group(1), interpreter_text), fix)
        else:
            item["fix"] = "%s -m ensurepip --upgrade && %s" % (interpreter_text, fix)
    return findings


def rule_torch_and_pyg_presence(facts, options):
    found = []
    packages = facts["distributions"]["packages"]
    torch = facts["torch"]
    if not facts["torch_build"].get("found"):
        found.append(finding("torch-not-installed", {
            "interpreter": interpreter_path(facts),
            "python": facts["python"]["version"], "gpu_seen": gpu_seen(facts)},
            fix=torch_and_pyg_install_command(facts)))
        return found
    if torch.get("status") in FAILED_STEP_STATUSES:
        found.append(finding("torch-import-failed", {"outcome": torch}, fix=torch_reinstall_command(facts)))
    pyg_installed = packages["torch-geometric"]["installed"] or packages["pyg-nightly"]["installed"]
    if not pyg_installed and not facts["pyg_source"].get("found"):
        found.append(finding("pyg-not-installed", {"interpreter": interpreter(facts)},
                             fix="%s -m pip install torch_geometric" % interpreter(facts)))
    elif facts["pyg"].get("status") in FAILED_STEP_STATUSES and torch.get("status") == "ok":
        found.append(finding("pyg-import-failed", {"outcome": facts["pyg"]},
                             fix="%s -m pip install --force-reinstall --no-deps torch_geometric" % interpreter(facts)))
    return found


def pyg_installs(facts):
    packages = facts["distributions"]["packages"]
    return packages["torch-geometric"]["installs"] + packages["pyg-nightly"]["installs"]


def inside(path, directory):
    path, directory = os.path.realpath(path), os.path.realpath(directory)
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def pyg_shadowing(facts):
    """How the imported torch_geometric differs from the installed distribution(s), or None."""
    pyg = facts["pyg"]
    installs = pyg_installs(facts)
    if pyg.get("status") != "ok" or not pyg.get("file") or not installs:
        return None  # not imported, or a source checkout with nothing installed: nothing to compare
    package_dir = os.path.dirname(pyg["file"])
    owners = [r for r in installs if inside(package_dir, os.path.join(r["location"], "torch_geometric"))]
    editable = [r for r in installs if r.get("editable_or_url") and r["version"] == pyg["version"]]
    if owners and any(r["version"] == pyg["version"] for r in owners):
        return None
    if not owners and editable:
        return None  # an editable install lives outside site-packages by design
    return {"imported_version": pyg["version"], "imported_from": package_dir,
            "shadowing_path": os.path.dirname(package_dir),
            "installed": [{"version": r["version"], "location": r["location"]} for r in installs]}


def pyg_version(facts):
    """The PyG version other findings quote: what is imported, else the first installed record."""
    if facts["pyg"].get("status") == "ok" and facts["pyg"].get("version"):
        return facts["pyg"]["version"]
    packages = facts["distributions"]["packages"]
    return packages["torch-geometric"]["version"] or packages["pyg-nightly"]["version"]


def rule_pyg_shadowed(facts, options):
    shadow = pyg_shadowing(facts)
    if shadow is None:
        return []
    path = shadow["shadowing_path"]
    pythonpath = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    listed = [entry for entry in pythonpath if os.path.realpath(entry or ".") == os.path.realpath(path)]
    if listed:
        shadow["origin"] = "PYTHONPATH"
        rest = [entry for entry in pythonpath if entry not in listed]
        fix = "export PYTHONPATH=%s" % quote(os.pathsep.join(rest)) if rest else "unset PYTHONPATH"
    else:
        shadow["origin"] = "sys.path (a .pth file, the user site or the interpreter's own paths)"
        fix = ("%s -c \"import sys; print(sys.path)\"  # shows where %s comes from; remove that entry, or move "
               "the stray copy away: mv %s %s.stray (unrun)" % (
                   interpreter(facts), path, quote(shadow["imported_from"]), quote(shadow["imported_from"])))
    shadow["note"] = ("sampling and feature findings are withheld: they describe the stray copy, "
                      "not the installed PyG")
    return [finding("pyg-shadowed", shadow, fix=fix)]


def rule_python_supported_by_pyg(facts, options):
    for name in ("torch-geometric", "pyg-nightly"):
        for record in facts["distributions"]["packages"][name]["installs"]:
            requirement = record.get("requires_python") or ""
            match = re.match(r"^\s*>=\s*([\d.]+)", requirement)
            if match and parse_version(facts["python"]["version"])[:2] < parse_version(match.group(1))[:2]:
                return [finding("python-unsupported-by-pyg", {
                    "python": facts["python"]["version"], "pyg_version": record["version"],
                    "requires_python": requirement},
                    fix="use Python %s or newer for this PyG (e.g. a new venv: python3.11 -m venv .venv)"
                    % match.group(1))]
    return []


def rule_probe_deadline(facts, options):
    probe = facts.get("probe")
    if probe is None or probe["complete"]:
        return []
    unfinished = [a for a in probe["attempts"] if a["killed_for"] == "deadline"]
    if not unfinished:
        return []  # incomplete because of a crash or hang, which their own findings name
    return [finding("probe-deadline", {
        "timeout_s": options.timeout, "step_running": unfinished[-1]["culprit"],
        "attempts": len(probe["attempts"])},
        fix="run again with a longer deadline: python scripts/check_sampling_backends.py --timeout %d"
        % int(options.timeout * 2))]


IMPORT_FAILURE_PATTERNS = (
    ("ext-undefined-symbol", re.compile(r"undefined symbol|Symbol not found|specified procedure could not be found")),
    ("ext-cuda-mismatch", re.compile(r"compiled with different CUDA versions")),
    ("ext-cuda-runtime-missing", re.compile(
        r"lib(cudart|cublas|cusparse|cusolver|curand|nvrtc|nvJitLink|cudnn|c10_cuda|torch_cuda)[\w.\-]*:"
        r" cannot open shared object file")),
    ("ext-glibc-too-old", re.compile(r"`?(GLIBC|GLIBCXX|CXXABI)_[\d.]+'? not found")),
    ("ext-operator-missing", re.compile(r"_OpNamespace'? '?\w+'? object has no attribute|No such operator")),
    ("ext-missing-dependency", re.compile(r"No module named|import of \w+ halted")),
)


def chain_messages(error):
    """Every message of a described exception chain (see describe_exception), outermost first."""
    return [link["message"] for link in error.get("chain", [])] or [error.get("message", "")]


def classify_import_error(module, error):
    """Map an exception chain to a finding id by its most specific message."""
    messages = chain_messages(error)
    for finding_id, pattern in IMPORT_FAILURE_PATTERNS:
        for message in messages:
            match = pattern.search(message)
            if not match:
                continue
            if finding_id == "ext-missing-dependency":
                missing = re.search(r"No module named '([\w.]+)'|import of (\w+) halted", message)
                name = (missing.group(1) or missing.group(2)) if missing else ""
                if name.split(".")[0] == module:
                    continue  # the extension's own submodule: a broken install, not a dependency
                return finding_id, message, name.split(".")[0]
            return finding_id, message, None
    return "ext-import-error", messages[0], None


def failing_library_owner(module, error):
    """Another extension whose library file the error names, or None.

    torch-sparse's typing.py runs `import pyg_lib` catching only ImportError,
    so a pyg-lib that fails to load (OSError) breaks `import torch_sparse`
    too; the fix is then pyg-lib's, not torch-sparse's.
    """
    for message in chain_messages(error):
        for other, _ in EXTENSIONS:
            if other != module and re.search(r"[/\\]%s[/\\][^\s:]*\.(so|dylib|pyd|dll)\b" % other, message):
                return other
    return None


def rule_extension_imports(facts, options):
    found = []
    for module, entry in facts["extensions"].items():
        status = entry.get("status")
        package = PIP_NAME[module]
        dist = EXTENSION_DIST[module]
        if status == "import-error":
            finding_id, message, dependency = classify_import_error(module, entry["error"])
            evidence = {"module": module, "distribution": dist,
                        "version": facts["distributions"]["packages"][dist]["version"],
                        "error": entry["error"], "matched": message}
            owner = failing_library_owner(module, entry["error"])
            if owner is not None:
                # Blame the library that failed; fixing it fixes this import too.
                evidence["caused_by"] = owner
                package = PIP_NAME[owner]
            if finding_id == "ext-missing-dependency":
                evidence["missing"] = dependency
                fix = pip_fix(facts, [PIP_NAME.get(dependency, dependency)])
            elif finding_id == "ext-glibc-too-old":
                fix = ("run on an OS image with a newer glibc/libstdc++ (see the version named in the error), "
                       "or build it here from source (%s; needs %s): %s"
                       % (source_build_time(SOURCE_BUILD_PACKAGES[owner or module]), SOURCE_BUILD_NEEDS,
                          source_build_command(interpreter(facts), SOURCE_BUILD_PACKAGES[owner or module])))
            else:
                fix = pip_fix(facts, [package], reinstall=True)
            found.append(finding(finding_id, evidence, fix=fix))
        elif status in ("crashed", "hung") and not entry.get("deadline"):
            finding_id = "ext-import-crashed" if status == "crashed" else "ext-import-hung"
            evidence = {"module": module, "distribution": dist,
                        "version": facts["distributions"]["packages"][dist]["version"],
                        "signal": entry.get("signal"), "returncode": entry.get("returncode"),
                        "seconds": entry.get("seconds"),
                        "stderr_tail": (entry.get("stderr_tail") or "")[-800:],
                        "note": "torch_geometric imports %s too, so `import torch_geometric` fails the same way; "
                                "the other facts were probed with it blocked" % module}
            fix = pip_fix(facts, [package], reinstall=True)
            removal = "%s -m pip uninstall -y %s" % (interpreter(facts), dist)
            if fix is None or not fix.startswith(removal):
                fix = "%s  # or remove it: %s" % (fix, removal)
            found.append(finding(finding_id, evidence, fix=fix))
    return found


def rule_wheel_tags(facts, options):
    """Predict import failures from wheel metadata alone, before anything is imported."""
    found = []
    build = facts["torch_build"]
    if not build.get("found") or not build.get("version"):
        return found
    major, minor, _ = parse_version(build["version"])
    torch_minor = "%d.%d" % (major, minor)
    torch_variant = build.get("variant")
    libc = facts["python"]["libc"]
    for module, dist in EXTENSIONS:
        for record in facts["distributions"]["packages"][dist]["installs"]:
            tag = record["local_tag"]
            evidence = {"distribution": dist, "version": record["version"], "location": record["location"],
                        "torch": build["version"], "torch_cuda": build.get("cuda")}
            if tag is None:
                if record.get("installer") != "conda":
                    found.append(finding("ext-source-build", dict(evidence, wheel_tags=record["wheel_tags"]),
                                         fix="check its CUDA and METIS support in this JSON "
                                             "(extensions.%s.cuda_version, sampling.features.metis)" % module))
            elif tag.get("torch") and tag["torch"] != torch_minor:
                found.append(finding("wheel-torch-mismatch", dict(evidence, built_for_torch=tag["torch"]),
                                     fix=pip_fix(facts, [PIP_NAME[module]], reinstall=True)))
            elif tag.get("variant"):
                wheel_variant = tag["variant"]
                if wheel_variant.startswith("cu") and torch_variant == "cpu":
                    found.append(finding("wheel-cuda-on-cpu-torch", dict(evidence, wheel_variant=wheel_variant),
                                         fix=pip_fix(facts, [PIP_NAME[module]], reinstall=True)))
                elif wheel_variant != torch_variant and torch_variant != "rocm":
                    cpu_wheel = wheel_variant == "cpu"
                    found.append(finding(
                        "wheel-cuda-mismatch", dict(evidence, wheel_variant=wheel_variant, torch_variant=torch_variant),
                        fix=pip_fix(facts, [PIP_NAME[module]], reinstall=True),
                        severity="warning" if cpu_wheel else None,
                        title="CPU-only extension wheel beside a CUDA torch: no GPU kernels" if cpu_wheel else None))
            problem = wheel_platform_problem(record["wheel_tags"], facts["python"], libc)
            if problem:
                found.append(finding("wheel-platform-mismatch", dict(evidence, wheel_tags=record["wheel_tags"],
                                                                     problem=problem),
                                     fix=pip_fix(facts, [PIP_NAME[module]], reinstall=True)))
    return found


def wheel_platform_problem(tags, python_facts, libc):
    """Why none of a wheel's tags can run here, or None when one can (or tags are unknown)."""
    if not tags:
        return None
    machine = (python_facts.get("machine") or "").lower()
    problems = []
    for tag in tags:
        platform_tag = tag.split("-")[-1]
        if platform_tag == "any":
            return None
        match = re.match(r"^(many|musl)linux_(\d+)_(\d+)_(\w+)$", platform_tag)
        legacy = re.match(r"^manylinux(1|2010|2014)_(\w+)$", platform_tag)
        if legacy:
            glibc = {"1": (2, 5), "2010": (2, 12), "2014": (2, 17)}[legacy.group(1)]
            match_kind, arch = "many", legacy.group(2)
        elif match:
            glibc = (int(match.group(2)), int(match.group(3)))
            match_kind, arch = match.group(1), match.group(4)
        elif platform_tag.startswith("linux_"):
            arch, match_kind, glibc = platform_tag[len("linux_"):], "local", None
        else:
            if python_facts.get("system") == "Linux":
                problems.append("platform tag %s is not for Linux" % platform_tag)
                continue
            return None
        if python_facts.get("system") != "Linux":
            problems.append("Linux wheel (%s) on %s" % (platform_tag, python_facts.get("system")))
            continue
        if arch != machine:
            problems.append("built for %s, this machine is %s" % (arch, machine))
            continue
        if match_kind == "musl" and libc.get("name") == "glibc":
            problems.append("musllinux wheel on a glibc system")
            continue
        if glibc and libc.get("name") == "glibc" and libc.get("version"):
            have = parse_version(libc["version"])[:2]
            if have < glibc:
                problems.append("needs glibc >= %d.%d, this system has %s" % (glibc + (libc["version"],)))
                continue
        return None
    return "; ".join(problems) or None


def rule_no_prebuilt_wheels(facts, options):
    """A sampling extension PyG's index has no wheel for, and that does not already work here."""
    install = facts["install"]
    if not install.get("packages") or pyg_shadowing(facts):  # a stray PyG copy first: pyg-shadowed says so
        return []
    extensions = facts.get("extensions") or {}
    lacking = [d for d in SAMPLING_DISTS if install["packages"][d]["wheel"] is False
               and extensions.get(pip_name(d), {}).get("status") != "ok"]
    if not lacking:
        return []
    py = interpreter(facts)
    options_text = []
    if install["packages"]["pyg-lib"]["wheel"]:
        options_text.append("pyg-lib alone (neighbour sampling works; without torch-sparse PyG loses %s): %s" % (
            ", ".join(WITHOUT_TORCH_SPARSE), wheel_command(py, ["pyg-lib"], install["index_url"])))
    pin = install.get("torch_pin")
    if pin:
        options_text.append("torch %s, the newest release with wheels of all three for %s (torch-sparse needs "
                            "scipy): %s" % (pin["release"], install["variant"], pin["command"]))
    options_text.append("build torch-scatter and torch-sparse from source (%s; needs %s): %s" % (
        install["source_build_time"], SOURCE_BUILD_NEEDS, install["source_build_command"]))
    return [finding("no-prebuilt-wheels", {
        "torch_minor": install["torch_minor"], "variant": install["variant"], "platform": install["platform"],
        "python": facts["python"]["version"], "missing": lacking,
        "reasons": [install["packages"][d]["reason"] for d in lacking],
        "sources": {d: "%s (%s)" % (install["packages"][d]["source"], install["packages"][d]["source_date"])
                    for d in lacking},
        "support_table_date": install["support_table_date"]},
        fix="pick one: " + " | ".join("(%d) %s" % (n + 1, text) for n, text in enumerate(options_text)),
        severity="warning" if "pyg-lib" in lacking else "info",
        title=None if "pyg-lib" in lacking else "PyG publishes no torch-scatter/torch-sparse wheels for this torch")]


def rule_stale_local_build(facts, options):
    """A locally built extension that no longer loads: the rebuild must bypass pip's wheel cache."""
    found, stale = [], []
    for module, dist in EXTENSIONS:
        entry = facts["extensions"].get(module, {})
        if entry.get("status") != "import-error" or failing_library_owner(module, entry["error"]):
            continue
        if classify_import_error(module, entry["error"])[0] != "ext-undefined-symbol":
            continue
        records = [r for r in facts["distributions"]["packages"][dist]["installs"]
                   if r["local_tag"] is None and r.get("installer") != "conda"]
        if records:
            stale.append((module, dist, records[0]))
    for module, dist, record in stale:
        cached = record.get("pip_cache") or []
        same = [c["path"] for c in cached if c.get("same_binary")]
        # torch-scatter and torch-sparse go together, in build order; pip_fix names a wheel where one exists.
        rebuild = [d for _, d, _ in stale if d in ("torch-scatter", "torch-sparse")] if dist in (
            "torch-scatter", "torch-sparse") else [dist]
        fix = pip_fix(facts, [pip_name(d) for d in rebuild], reinstall=True)
        found.append(finding("ext-stale-local-build", {
            "module": module, "distribution": dist, "version": record["version"],
            "wheel_tags": record["wheel_tags"], "torch": facts["torch_build"].get("version"),
            "pip_cache_wheels": [c["path"] for c in cached],
            "installed_binary_is_cached_wheel": same[0] if same else None,
            "trap": "pip keys its wheel cache by the sdist's URL and the Python version, not by the torch it was "
                    "built against: "
                    "`pip install --force-reinstall` reinstalls the cached wheel built against the old torch "
                    "and the import still fails; only --no-cache-dir rebuilds"},
            fix=fix))
    return found


def extension_reason(facts, module):
    entry = facts["extensions"].get(module, {})
    status = entry.get("status")
    if status == "import-error":
        return "%s: %s" % (status, entry["error"]["message"][:300])
    return status


def rule_neighbor_sampling(facts, options):
    if facts["torch"].get("status") != "ok":
        return []
    pyg = facts["pyg"]
    smoke = facts["sampling"]["smoke"]
    found = []
    for backend, result in smoke.items():
        module = "pyg_lib" if backend == "pyg-lib" else "torch_sparse"
        if facts["extensions"][module].get("status") != "ok" or result.get("status") in ("not-run", "deadline"):
            continue  # never sampled: the probe ran out of time first (probe-deadline says so)
        if not result.get("passed"):
            evidence = {"backend": backend, "result": result}
            finding_id = "neighbor-smoke-failed"
            error = result.get("error")
            if error and classify_import_error(module, error)[0] == "ext-operator-missing":
                finding_id = "ext-operator-missing"
                evidence["module"] = module
            found.append(finding(finding_id, evidence,
                                 fix=pip_fix(facts, [PIP_NAME[module]], reinstall=True)))
    if pyg.get("status") != "ok" or pyg_shadowing(facts):
        return found  # a stray copy's verdict would send the user to install pyg-lib for nothing
    backend = pyg.get("neighbor_backend")
    if backend is None:
        found.append(finding("neighbor-sampling-unavailable", {
            "predicted_error": "ImportError: 'NeighborSampler' requires either 'pyg-lib' or 'torch-sparse'",
            "raised_at": "the first next(iter(loader)), not at NeighborLoader construction",
            "pyg_lib": extension_reason(facts, "pyg_lib"),
            "torch_sparse": extension_reason(facts, "torch_sparse"),
            "WITH_PYG_LIB": pyg["flags"].get("WITH_PYG_LIB"),
            "WITH_TORCH_SPARSE": pyg["flags"].get("WITH_TORCH_SPARSE")},
            fix=pip_fix(facts, ["pyg_lib"])))
    return found


def rule_feature_verdicts(facts, options):
    """Features beyond plain neighbour sampling, named with what unlocks them."""
    if facts["pyg"].get("status") != "ok" or pyg_shadowing(facts):
        return []  # see rule_neighbor_sampling
    features = facts["sampling"]["features"]
    found = []
    pyg_lib_fix = pip_fix(facts, ["pyg_lib"])
    if features["neighbor"]:
        if not features["induced"]:
            found.append(finding("induced-sampling-unavailable", {
                "neighbor_backend": facts["sampling"]["neighbor_backend"],
                "torch_sparse": extension_reason(facts, "torch_sparse"),
                "affects": "NeighborLoader(subgraph_type='induced'), HGTLoader, ShaDowKHopSampler"},
                fix=pip_fix(facts, ["torch_scatter", "torch_sparse"])))
        if not features["weighted"]:
            found.append(finding("weighted-sampling-unavailable", {
                "affects": "NeighborLoader(weight_attr=...)", "needs": "pyg-lib >= 0.3.0",
                "pyg_lib": extension_reason(facts, "pyg_lib")}, fix=pyg_lib_fix))
        if not features["temporal_edge"]:
            found.append(finding("temporal-sampling-unavailable", {
                "affects": "NeighborLoader(time_attr=...) on node time (needs pyg-lib) and edge time "
                           "(needs a pyg-lib whose neighbor_sample takes edge_time)",
                "node_level": features["temporal_node"], "edge_level": features["temporal_edge"],
                "pyg_lib": extension_reason(facts, "pyg_lib")}, fix=pyg_lib_fix))
    if not features["metis"]:
        metis = facts["sampling"]["probe"].get("torch_sparse_metis")
        found.append(finding("metis-unavailable", {
            "affects": "ClusterData, ClusterLoader, torch_geometric.distributed.Partitioner",
            "pyg_lib_partition": facts["sampling"]["probe"].get("pyg_lib_partition", False),
            "torch_sparse_metis": metis,
            "predicted_error": "ImportError: 'ClusterData' requires either 'pyg-lib' or 'torch-sparse'"},
            fix=pyg_lib_fix))
    if not features["distributed"]:
        found.append(finding("distributed-sampling-unavailable", {
            "needs": "pyg-lib >= 0.4.0 with operators %s" % ", ".join(DIST_SAMPLER_OPS),
            "present": facts["sampling"]["probe"].get("dist_ops") or {},
            "symptom": "AttributeError: '_OpNamespace' 'pyg' object has no attribute 'dist_neighbor_sample' "
                       "(sync mode) or a silent hang (async_sampling=True)"},
            fix=pyg_lib_fix))
    cuda = facts.get("cuda") or {}
    gpus = len(((cuda.get("visible_devices") or {}).get("visible")) or [])
    if gpus and not features["gpu"]:
        # cuGraph-PyG's wheels exist per CUDA major; follow torch's, else the driver's.
        major = parse_version(cuda.get("built_with") or (cuda.get("nvml") or {}).get("cuda_driver_version"))[0]
        package = "cugraph-pyg-cu%d" % (major if major in (12, 13) else 13)
        found.append(finding("gpu-sampling-needs-cugraph", {
            "visible_gpus": gpus, "torch_cuda": cuda.get("built_with"),
            "sampling_device": "cpu",
            "pyg_lib_cuda_kernels": facts["sampling"]["probe"].get("pyg_lib_cuda_sampling"),
            "note": "NeighborLoader's NeighborSampler samples on the CPU (pyg-lib or torch-sparse); batches are "
                    "moved to the GPU afterwards (batch.to('cuda')). Sampling on the GPU means cuGraph-PyG's "
                    "loaders and stores instead of PyG's."},
            fix="%s -m pip install %s  # unrun; only if CPU sampling is the bottleneck: cuGraph-PyG's own "
                "NeighborLoader samples on the GPU" % (interpreter(facts), package)))
    return found


def rule_legacy_extensions(facts, options):
    found = []
    for dist in ("torch-cluster", "torch-spline-conv"):
        package = facts["distributions"]["packages"][dist]
        if package["installed"]:
            found.append(finding("legacy-extension-ignored", {
                "distribution": dist, "version": package["version"],
                "pyg_version": pyg_version(facts),
                "replacement": "pyg-lib: PyG 2.8's typing.py and install docs say >= 0.6.0, the torch-cluster "
                               "deprecation notice says >= 0.7.0 (sources disagree)"},
                fix="%s -m pip uninstall -y %s  # then install pyg_lib: %s" % (
                    interpreter(facts), dist, pip_fix(facts, ["pyg_lib"]))))
    return found


def rule_duplicate_distributions(facts, options):
    found = []
    distributions = facts["distributions"]
    for name, package in distributions["packages"].items():
        locations = sorted(set(r["location"] for r in package["installs"]))
        if len(package["installs"]) > 1:
            found.append(finding("duplicate-distribution", {
                "distribution": name, "versions": [r["version"] for r in package["installs"]],
                "locations": locations},
                fix="%s -m pip uninstall -y %s  # repeat until none is left, then reinstall one copy" % (
                    interpreter(facts), name)))
    for module, claimants in distributions["module_claims"].items():
        found.append(finding("duplicate-distribution", {"module": module, "distributions": claimants},
                             fix="%s -m pip uninstall -y %s" % (interpreter(facts), " ".join(
                                 c for c in claimants if c != "torch-geometric") or claimants[-1])))
    return found


def rule_conda_pip_mixed(facts, options):
    distributions = facts["distributions"]
    if not distributions["conda_prefix"]:
        return []
    pip_owned = [name for name, package in distributions["packages"].items()
                 if name in ("torch", "torch-geometric", "pyg-lib", "torch-sparse", "torch-scatter")
                 and any(r.get("installer") == "pip" for r in package["installs"])]
    conda_owned = distributions["conda_packages"]
    if pip_owned and conda_owned:
        return [finding("conda-pip-mixed", {"pip": pip_owned, "conda": conda_owned},
                        fix="pick one installer for torch and the PyG stack; e.g. in a fresh env: "
                            "conda create -n pyg python=3.11 && conda activate pyg && pip install torch "
                            "torch_geometric")]
    return []


def rule_pyg_defects(facts, options):
    source = facts["pyg_source"]
    if not source.get("found"):
        return []
    found = []
    version = pyg_version(facts)
    if source["stack_level_typo"]:
        found.append(finding("pyg-dist-loader-typeerror", {
            "pyg_version": version, "locations": source["stack_level_typo"],
            "error": "TypeError: 'stack_level' is an invalid keyword argument for warn()"},
            fix="do not use DistNeighborLoader/DistLinkNeighborLoader on this PyG; train with one "
                "NeighborLoader per DDP rank instead: python scripts/ddp_neighbor_training.py --help"))
    if source.get("distributed_present") and version and parse_version(version)[:2] >= (2, 7):
        found.append(finding("pyg-distributed-deprecated", {"pyg_version": version},
                             fix="python scripts/ddp_neighbor_training.py --help  # DDP + NeighborLoader; "
                                 "multi-node GPU at scale: cuGraph-PyG"))
    torch_version = facts["torch_build"].get("version")
    if (source.get("partition_saves_defaultdict") and torch_version
            and parse_version(torch_version)[:2] >= (2, 6)):
        found.append(finding("pyg-from-partition-edge-feats", {
            "pyg_version": version, "torch": torch_version,
            "error": "UnpicklingError: ... Can only SETITEMS for dict, collections.OrderedDict, "
                     "collections.Counter, but got <class 'collections.defaultdict'>"},
            fix="python scripts/check_partition.py PARTITION_ROOT  # names the unloadable parts and the rewrite"))
    return found


def launch_value(launch, name):
    entry = launch.get(name)
    return entry["value"] if entry and entry["error"] is None else None


def rule_launch_environment(facts, options):
    launch = facts["environment"]["launch"]
    found = []
    invalid = {}
    for name, entry in launch.items():
        if entry["error"]:
            invalid[name] = entry["raw"]
        elif name in LAUNCH_INT_VARIABLES:
            value = entry["value"]
            if name == "MASTER_PORT" and not 1 <= value <= 65535:
                invalid[name] = entry["raw"]
            elif name in ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "SLURM_NTASKS", "SLURM_NNODES",
                          "SLURM_NTASKS_PER_NODE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE",
                          "OMPI_COMM_WORLD_LOCAL_SIZE") and value < 1:
                invalid[name] = entry["raw"]
            elif value < 0:
                invalid[name] = entry["raw"]
    if invalid:
        found.append(finding("launch-env-invalid", {"invalid": invalid},
                             fix="unset or correct them, e.g.: unset %s" % " ".join(sorted(invalid))))
    rank, world = launch_value(launch, "RANK"), launch_value(launch, "WORLD_SIZE")
    local_rank, local_world = launch_value(launch, "LOCAL_RANK"), launch_value(launch, "LOCAL_WORLD_SIZE")
    out_of_range = {}
    if rank is not None and world is not None and world >= 1 and rank >= world:
        out_of_range["RANK"] = {"RANK": rank, "WORLD_SIZE": world}
    if local_rank is not None and local_world is not None and local_world >= 1 and local_rank >= local_world:
        out_of_range["LOCAL_RANK"] = {"LOCAL_RANK": local_rank, "LOCAL_WORLD_SIZE": local_world}
    if out_of_range:
        found.append(finding("launch-rank-out-of-range", out_of_range,
                             fix="let the launcher set ranks: torchrun --nnodes N --nproc_per_node P script.py"))
    found.extend(rule_launcher_rank_ranges(facts, options))
    device_count = (facts.get("cuda") or {}).get("device_count") or 0
    if local_rank is not None and device_count > 0 and local_rank >= device_count:
        found.append(finding("launch-local-rank-no-device", {
            "LOCAL_RANK": local_rank, "visible_devices": device_count,
            "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")},
            fix="start at most %d processes per node (torchrun --nproc_per_node %d) or widen "
                "CUDA_VISIBLE_DEVICES" % (device_count, device_count)))
    if ("MASTER_ADDR" in launch) != ("MASTER_PORT" in launch):
        missing = "MASTER_PORT" if "MASTER_ADDR" in launch else "MASTER_ADDR"
        found.append(finding("launch-master-incomplete", {
            "MASTER_ADDR": (launch.get("MASTER_ADDR") or {}).get("raw"),
            "MASTER_PORT": (launch.get("MASTER_PORT") or {}).get("raw"), "missing": missing},
            fix="export %s=%s" % (missing, "29500" if missing == "MASTER_PORT" else "<hostname of rank 0>")))
    disagreements = {}
    for torch_name, slurm_name in (("RANK", "SLURM_PROCID"), ("WORLD_SIZE", "SLURM_NTASKS"),
                                   ("LOCAL_RANK", "SLURM_LOCALID")):
        a, b = launch_value(launch, torch_name), launch_value(launch, slurm_name)
        if a is not None and b is not None and a != b:
            disagreements[torch_name] = {torch_name: a, slurm_name: b}
    # torchrun inside an allocation legitimately re-numbers ranks; only plain
    # srun launches should agree.
    if disagreements and facts["environment"]["launcher"] != "torchrun":
        found.append(finding("launch-torchrun-slurm-mismatch", disagreements,
                             fix="derive one from the other in the job script, e.g. "
                                 "export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID"))
    found.extend(rule_backend_requested(facts, options))
    interfaces = facts["environment"]["network_interfaces"]
    if interfaces is not None:
        missing_ifnames = {}
        for name in SOCKET_IFNAME_VARIABLES:
            if name in launch:
                absent = absent_interfaces(name, launch[name]["raw"], interfaces)
                if absent:
                    missing_ifnames[name] = {"value": launch[name]["raw"], "absent": absent}
        if missing_ifnames:
            found.append(finding("launch-socket-ifname-missing", dict(missing_ifnames, interfaces=interfaces),
                                 fix="set them to an interface listed in evidence.interfaces "
                                     "(the one that routes to MASTER_ADDR: ip route get $MASTER_ADDR)"))
    found.extend(rule_multi_node_names(facts))
    found.extend(rule_world_size_layout(facts))
    return found


def absent_interfaces(variable, raw, interfaces):
    """Names in a *_SOCKET_IFNAME value that match no interface in `interfaces`.

    gloo and TensorPipe take exact names (comma-separated); NCCL takes name
    prefixes unless the value starts with '=' (exact), and '^' makes it an
    exclusion list, which cannot name a missing interface.
    """
    if raw.startswith("^"):
        return []
    exact = variable != "NCCL_SOCKET_IFNAME" or raw.startswith("=")
    wanted = [i.strip() for i in raw.lstrip("=").split(",") if i.strip()]
    if exact:
        return [i for i in wanted if i not in interfaces]
    return [i for i in wanted if not any(n.startswith(i) for n in interfaces)]


def multi_node_evidence(launch):
    """The launch variables that say this job spans several nodes ({} when none do)."""
    said = {}
    for name in ("GROUP_WORLD_SIZE", "SLURM_NNODES"):
        value = launch_value(launch, name)
        if value is not None and value > 1:
            said[name] = value
    for name in ("NODE_RANK", "GROUP_RANK", "SLURM_NODEID"):
        value = launch_value(launch, name)
        if value is not None and value > 0:
            said[name] = value
    world, local_world = launch_value(launch, "WORLD_SIZE"), launch_value(launch, "LOCAL_WORLD_SIZE")
    if world is not None and local_world is not None and world > local_world >= 1:
        said["WORLD_SIZE"], said["LOCAL_WORLD_SIZE"] = world, local_world
    return said


def node_rank(launch):
    for name in ("GROUP_RANK", "NODE_RANK", "SLURM_NODEID"):
        value = launch_value(launch, name)
        if value is not None:
            return value
    return None


def rule_multi_node_names(facts):
    """Names that resolve to loopback break a multi-node job; only /etc/hosts and literals are read."""
    environment = facts["environment"]
    launch = environment["launch"]
    said = multi_node_evidence(launch)
    resolution = environment.get("name_resolution") or {}
    if not said:
        return []
    found = []
    master = resolution.get("MASTER_ADDR")
    # On node 0 a loopback MASTER_ADDR still reaches the store it serves; on
    # any other node it points at the node itself.
    if master and master["loopback"] and node_rank(launch) != 0:
        found.append(finding("launch-master-addr-loopback", {
            "MASTER_ADDR": master["name"], "resolved": master, "node_rank": node_rank(launch),
            "multi_node_because": said, "hostname": environment.get("hostname"),
            "hosts_order": resolution.get("hosts_order"),
            "not_checked": "DNS (no query is sent); only literal addresses and %s are read" % HOSTS_FILE},
            fix="export MASTER_ADDR=<address of node 0 as this node reaches it, e.g. from: getent ahostsv4 "
                "<node 0 hostname>>; or drop the loopback line for that name from %s on this node" % HOSTS_FILE))
    own = resolution.get("hostname")
    if own and own["first_loopback"] and "GLOO_SOCKET_IFNAME" not in launch:
        found.append(finding("launch-hostname-loopback", {
            "hostname": own["name"], "resolved": own, "multi_node_because": said,
            "GLOO_SOCKET_IFNAME": None, "interfaces": environment.get("network_interfaces"),
            "why": "without GLOO_SOCKET_IFNAME gloo binds to the address of this host's name and sends it "
                   "to the peers, which then connect to their own loopback",
            "not_checked": "DNS (no query is sent); only %s is read" % HOSTS_FILE},
            fix="export GLOO_SOCKET_IFNAME=<the interface that routes to MASTER_ADDR: ip route get "
                "$MASTER_ADDR>; or map %s to its network address in %s" % (own["name"], HOSTS_FILE)))
    return found


def rule_world_size_layout(facts):
    """WORLD_SIZE must equal nodes x processes per node, or the rendezvous waits for ranks that never come."""
    launch = facts["environment"]["launch"]
    # torchrun computes WORLD_SIZE itself from the nodes that joined.
    if facts["environment"]["launcher"] == "torchrun":
        return []
    world, nodes = launch_value(launch, "WORLD_SIZE"), launch_value(launch, "SLURM_NNODES")
    per_node_name = next((n for n in ("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE")
                          if launch_value(launch, n) is not None), None)
    if world is None or nodes is None or per_node_name is None:
        return []
    per_node = launch_value(launch, per_node_name)
    if world == nodes * per_node:
        return []
    return [finding("launch-world-size-mismatch", {
        "WORLD_SIZE": world, "SLURM_NNODES": nodes, per_node_name: per_node, "expected": nodes * per_node,
        "consequence": "the rendezvous waits for %d processes; %d will start" % (world, nodes * per_node)},
        fix="export WORLD_SIZE=$((SLURM_NNODES * %s))  # or let torchrun count: torchrun --nnodes "
            "$SLURM_NNODES --nproc-per-node %d ..." % (per_node_name, per_node))]


def ranks_out_of_range(launch, pairs):
    """{rank variable: {rank: value, size: value}} for each pair whose rank is not below its size."""
    out_of_range = {}
    for rank_name, size_name in pairs:
        rank, size = launch_value(launch, rank_name), launch_value(launch, size_name)
        if rank is not None and size is not None and size >= 1 and rank >= size:
            out_of_range[rank_name] = {rank_name: rank, size_name: size}
            if launch[size_name]["raw"].strip() != str(size):
                out_of_range[rank_name][size_name + "_raw"] = launch[size_name]["raw"]
    return out_of_range


def rule_launcher_rank_ranges(facts, options):
    """SLURM and MPI ranks against their own counts (torchrun's RANK/LOCAL_RANK are checked above)."""
    launch = facts["environment"]["launch"]
    found = []
    slurm = ranks_out_of_range(launch, SLURM_RANK_PAIRS)
    if slurm:
        found.append(finding("launch-slurm-rank-out-of-range", slurm, fix=(
            "do not export SLURM_* by hand or carry them into another job (env | grep ^SLURM_ shows them); "
            "start the tasks with srun inside the allocation, e.g. srun --ntasks=$SLURM_NTASKS python train.py")))
    mpi = ranks_out_of_range(launch, MPI_RANK_PAIRS)
    if mpi:
        found.append(finding("launch-mpi-rank-out-of-range", mpi, fix=(
            "do not export PMI_*/OMPI_COMM_WORLD_* by hand or carry them over from another job; "
            "let the MPI launcher set them: mpirun -np N python train.py")))
    return found


def rule_backend_requested(facts, options):
    backend = options.require_distributed
    if not backend or backend == "any":
        return []
    distributed = facts.get("distributed") or {}
    if distributed.get("status") not in (None, "ok") and "backends" not in distributed:
        return []
    if not distributed.get("backends", {}).get(backend, False):
        available = sorted(b for b, ok in distributed.get("backends", {}).items() if ok)
        return [finding("launch-backend-unavailable", {
            "requested": backend, "available": available, "torch_cuda": facts["torch"].get("cuda")},
            fix="use init_process_group(backend='%s') here, or install a torch build with %s"
            % (available[0] if available else "gloo", backend))]
    return []


def rule_cpu(facts, options):
    cpu = facts["cpu"]
    threads = facts["environment"]["threads"]
    found = []
    logical = cpu.get("logical_cores") or 0
    allowed = (cpu.get("affinity") or {}).get("count") or logical
    if cpu.get("affinity") and allowed < logical:
        found.append(finding("cpu-affinity-restricted", {
            "allowed": cpu["affinity"], "logical_cores": logical},
            fix=None))
    invalid = {}
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        if name in threads:
            value, error = parse_int_variable(threads[name].split(",")[0])
            if error or value < 1:
                invalid[name] = threads[name]
    if invalid:
        found.append(finding("cpu-threads-invalid", {"invalid": invalid},
                             fix="export OMP_NUM_THREADS=%d" % max(1, allowed)))
    launch = facts["environment"]["launch"]
    local_procs = (launch_value(launch, "LOCAL_WORLD_SIZE") or launch_value(launch, "SLURM_NTASKS_PER_NODE") or 1)
    per_process = max(1, allowed // max(1, local_procs))
    if "OMP_NUM_THREADS" not in threads:
        found.append(finding("cpu-threads-unset", {
            "allowed_cores": allowed, "local_processes": local_procs,
            "torch_num_threads": facts["torch"].get("num_threads")},
            fix="export OMP_NUM_THREADS=%d" % per_process))
    elif "OMP_NUM_THREADS" not in invalid:
        value = parse_int_variable(threads["OMP_NUM_THREADS"].split(",")[0])[0]
        if value * local_procs > allowed:
            found.append(finding("cpu-threads-oversubscribed", {
                "OMP_NUM_THREADS": value, "local_processes": local_procs, "allowed_cores": allowed},
                fix="export OMP_NUM_THREADS=%d" % per_process))
    numa = cpu.get("numa_nodes") or []
    if len(numa) > 1:
        found.append(finding("cpu-numa-multi-node", {"numa_nodes": numa},
                             fix=None))
    return found


NVML_INIT_FIXES = {
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH":
        "sudo reboot  # unrun; the loaded kernel module is older than the upgraded user-space driver; "
        "without a reboot: sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe nvidia",
    "NVML_ERROR_DRIVER_NOT_LOADED":
        "sudo modprobe nvidia  # unrun; in a container, start it with the GPUs: docker run --gpus all ...",
    "NVML_ERROR_NO_PERMISSION":
        "ls -l /dev/nvidia*  # unrun; this user needs read/write on them (the video group, or the scheduler's "
        "GPU allocation)",
}


def rule_nvml(facts, options):
    nvml = (facts.get("cuda") or {}).get("nvml") or {}
    if nvml.get("reason") != "init-failed":
        return []
    error = nvml.get("error") or {}
    return [finding("nvml-init-failed", {
        "library": nvml.get("library"), "error": error,
        "nvidia_smi_says": "Failed to initialize NVML: %s" % error.get("message"),
        "cuda_after_this": "fails too" if error.get("name") in NVML_FATAL_ERRORS else
                           "may still work; the checker cannot tell without a CUDA call"},
        severity="error" if error.get("name") in NVML_FATAL_ERRORS else None,
        fix=NVML_INIT_FIXES.get(error.get("name"), "nvidia-smi  # unrun; shows the same NVML error with more context"))]


def gpu_summary(devices):
    return [dict((key, device.get(key)) for key in ("index", "name", "capability", "uuid")) for device in devices]


def torch_build_fix(facts, builds, comment):
    release = (facts["torch"].get("version") or "").split("+")[0]
    if not builds or not release:
        return None
    command = torch_install_command(release, builds[0], interpreter(facts), platform_key(facts["python"]))
    return "%s  # unrun; %s" % (command, comment)


def rule_gpu(facts, options):
    """GPU failures predicted from NVML and torch's build facts, before any CUDA call."""
    cuda = facts.get("cuda") or {}
    nvml = cuda.get("nvml") or {}
    devices = (nvml.get("devices") or []) if nvml.get("available") else []
    torch = facts["torch"]
    if torch.get("status") != "ok" or "visible_devices" not in cuda or not devices:
        return []
    found = []
    capabilities = sorted(set(c for c in (capability_number(d.get("capability")) for d in devices) if c))
    if not cuda.get("compiled"):
        if not torch.get("hip"):
            builds = torch_builds_covering(cuda, capabilities)
            found.append(finding("cuda-torch-cpu-only", {
                "torch": torch.get("version"), "gpus": gpu_summary(devices),
                "driver_cuda": nvml.get("cuda_driver_version"), "builds_with_kernels": builds,
                "predicted_error": "AssertionError: Torch not compiled with CUDA enabled (at the first .cuda())"},
                fix=torch_build_fix(facts, builds, "the CUDA build of the same torch release; then reinstall "
                                    "PyG's extensions for it (install.command of a new run)")))
        return found
    visibility = cuda["visible_devices"]
    if visibility["set"] and not visibility["visible"]:
        found.append(finding("cuda-visible-devices-hides-all", {
            "CUDA_VISIBLE_DEVICES": visibility["value"], "unmatched": visibility["unmatched"],
            "nvml_devices": gpu_summary(devices),
            "predicted_error": "torch.cuda.is_available() is False; .cuda() raises RuntimeError: "
                               "No CUDA GPUs are available"},
            fix="export CUDA_VISIBLE_DEVICES=%s  # or unset it; under SLURM let the allocation set it"
            % ",".join(str(d["index"]) for d in devices)))
    elif visibility["unmatched"]:
        named = []
        for entry in visibility["value"].split(","):
            if match_visible_entry(entry.strip(), devices)[0] is not None and entry.strip() not in named:
                named.append(entry.strip())
        found.append(finding("cuda-visible-devices-unknown-device", {
            "CUDA_VISIBLE_DEVICES": visibility["value"], "unmatched": visibility["unmatched"],
            "ignored_after_it": visibility["ignored"],
            "visible": [v["entry"] for v in visibility["visible"]], "nvml_devices": gpu_summary(devices)},
            fix="export CUDA_VISIBLE_DEVICES=%s" % ",".join(named)))
    built, driver = cuda.get("built_with"), nvml.get("cuda_driver_version")
    if built and driver and parse_version(driver)[:2] < parse_version(built)[:2]:
        major = parse_version(built)[0]
        other_major = parse_version(driver)[0] < major
        builds = torch_builds_covering(cuda, capabilities, within_driver=True)
        evidence = {"driver_version": nvml.get("driver_version"), "driver_cuda": driver, "torch_cuda": built,
                    "torch": torch.get("version"),
                    "minimum_driver_for_cuda_%d" % major: ">= %s" % CUDA_MAJOR_MIN_DRIVER.get(major, "?")}
        if other_major:
            found_version = parse_version(driver)[0] * 1000 + parse_version(driver)[1] * 10  # as CUDA prints it
            evidence["predicted_error"] = (
                "RuntimeError: The NVIDIA driver on your system is too old (found version %d); "
                "torch.cuda.is_available() is False" % found_version)
        else:
            evidence["compatibility"] = (
                "minor-version compatibility: a CUDA %s build runs on a CUDA %s driver for its precompiled "
                "kernels; JIT of newer PTX fails ('the provided PTX was compiled with an unsupported "
                "toolchain') and features that need a newer driver are refused" % (built, driver))
        upgrade = "or upgrade the NVIDIA driver to one whose CUDA version (nvidia-smi, top right) is >= %s" % built
        found.append(finding("cuda-driver-too-old", evidence, severity=None if other_major else "warning",
                             title=None if other_major else "the NVIDIA driver is one CUDA minor behind torch "
                                                            "(minor-version compatibility)",
                             fix=torch_build_fix(facts, builds, "a torch build this driver runs; " + upgrade)
                             or "%s (unrun)" % upgrade[3:]))
    missing = [a for a in cuda.get("device_archs") or [] if a["kernels"] is False]
    if missing:
        by_index = dict((d["index"], d) for d in devices)
        lacking = sorted(set(capability_number(a["capability"]) for a in missing))
        builds = torch_builds_covering(cuda, lacking)
        evidence = {"gpus": gpu_summary([by_index[a["index"]] for a in missing]), "arch_list": cuda.get("arch_list"),
                    "torch": torch.get("version"), "builds_with_kernels": builds,
                    "predicted_error": "torch.AcceleratorError: CUDA error: no kernel image is available for "
                                       "execution on the device",
                    "raised_at": "the first CUDA kernel (torch only warns when CUDA initialises)"}
        if (cuda.get("cudnn_version") or 0) >= 91100 and min(lacking) < 75:
            evidence["cudnn"] = ("cuDNN %d refuses SM < 7.5: RuntimeError: cuDNN version %d is not compatible "
                                 "with devices with SM < 7.5" % (cuda["cudnn_version"], cuda["cudnn_version"]))
        found.append(finding("cuda-arch-not-compiled", evidence, fix=torch_build_fix(
            facts, builds, "its kernels cover sm_%s; then reinstall PyG's extensions for it" % ", sm_".join(
                str(c) for c in lacking))))
    return found


def blocking_fix(cuda):
    """Point at the finding whose fix unblocks CUDA, when one does."""
    named = [reason for reason in cuda.get("blocked_by") or [] if reason in FINDINGS]
    return "apply the fix of the %s finding" % " and ".join(named) if named else None


def rule_gates_cuda_distributed(facts, options):
    found = []
    torch = facts["torch"]
    cuda = facts.get("cuda") or {}
    if torch.get("status") == "ok" and (cuda.get("device_count") or 0) == 0:
        if options.require_cuda or torch.get("cuda"):
            found.append(finding("cuda-unavailable", {
                "torch_cuda": torch.get("cuda"), "nvml": cuda.get("nvml"), "blocked_by": cuda.get("blocked_by"),
                "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")},
                severity="error" if options.require_cuda else "info",
                fix=None if torch.get("cuda") else "%s -m pip install torch  # the default Linux wheel is a CUDA "
                                                   "build; or pick one at https://pytorch.org/get-started"
                % interpreter(facts)))
            if torch.get("cuda"):
                found[-1]["fix"] = blocking_fix(cuda)
    distributed = facts.get("distributed") or {}
    if torch.get("status") == "ok" and not distributed.get("available", False):
        found.append(finding("distributed-unavailable", {"distributed": distributed},
                             severity="error" if options.require_distributed else "info",
                             fix="install a torch build with distributed support (the PyPI Linux wheels have it)"))
    return found


RULES = (
    rule_interpreter_choice,
    rule_torch_and_pyg_presence,
    rule_pyg_shadowed,
    rule_python_supported_by_pyg,
    rule_probe_deadline,
    rule_wheel_tags,
    rule_extension_imports,
    rule_no_prebuilt_wheels,
    rule_stale_local_build,
    rule_neighbor_sampling,
    rule_feature_verdicts,
    rule_legacy_extensions,
    rule_duplicate_distributions,
    rule_conda_pip_mixed,
    rule_pyg_defects,
    rule_launch_environment,
    rule_cpu,
    rule_nvml,
    rule_gpu,
    rule_gates_cuda_distributed,
)


def diagnose(facts, options):
    findings = []
    for rule in RULES:
        findings.extend(rule(facts, options))
    adapt_pip_fixes(facts, findings)
    order = {"error": 0, "warning": 1, "info": 2}
    findings.sort(key=lambda f: order[f["severity"]])  # stable: rule order within a severity
    return findings


def evaluate_gates(facts, options):
    gates = {}
    if options.require_neighbor_backend:
        backend = facts["sampling"]["neighbor_backend"]
        passed = bool(backend) and facts["sampling"]["smoke"].get(backend, {}).get("passed", False)
        gates["neighbor_backend"] = {"passed": passed, "backend": backend}
    if options.require_cuda:
        cuda = facts.get("cuda") or {}
        count = cuda.get("device_count") or 0
        gates["cuda"] = {"passed": cuda.get("available") is True and count > 0, "device_count": count}
    if options.require_distributed:
        distributed = facts.get("distributed") or {}
        backend = options.require_distributed
        passed = bool(distributed.get("available")) and (
            backend == "any" or bool(distributed.get("backends", {}).get(backend)))
        gates["distributed"] = {"passed": passed, "backend": backend}
    return gates

# ---------------------------------------------------------------------------
# Rendering: the JSON document (compact by default, --full for every fact),
# a Markdown report for people, and a short summary on stderr.
# ---------------------------------------------------------------------------

FACT_SECTIONS = ("interpreter", "python", "distributions", "torch_build", "pyg_source", "cpu", "environment",
                 "probe", "torch", "cuda", "distributed", "pyg", "extensions", "sampling", "install")
USAGE_FINDINGS = ("usage-error", "interpreter-unsupported")
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


def verdict(findings, gates, internal_error, static_only):
    """(ok, status, exit code): the one meaning shared by the three checkers (see --help)."""
    gate_failed = any(not g["passed"] for g in gates.values())
    has_error = any(f["severity"] == "error" for f in findings)
    ok = not has_error and not gate_failed and not internal_error
    if internal_error:
        return ok, "internal-error", EXIT_INTERNAL
    if any(f["id"] in USAGE_FINDINGS for f in findings):
        return ok, "usage-error", EXIT_USAGE
    if gate_failed:
        return ok, "gate-failed", EXIT_GATE_FAILED
    if has_error:
        return ok, "error", EXIT_OK
    if static_only:
        return ok, "incomplete", EXIT_OK  # nothing was imported: "ok" would claim what was not checked
    if any(f["severity"] == "warning" for f in findings):
        return ok, "warning", EXIT_OK
    return ok, "ok", EXIT_OK


def render(facts, findings, gates, options, started, internal_error=None):
    if internal_error is not None:
        findings = list(findings) + [finding("checker-internal-error", internal_error,
                                             fix="report it with this JSON attached")]
    static_only = bool(options and options.static_only)
    ok, status, exit_code = verdict(findings, gates, internal_error is not None, static_only)
    full = bool(options and options.full)
    document = {
        "schema_version": SCHEMA_VERSION,
        "ok": ok,
        "status": status,
        "exit_code": exit_code,
        "findings": findings,
        "gates": gates,
        "checker": {
            "version": CHECKER_VERSION,
            "argv": sys.argv[1:],
            "mode": "static-only" if static_only else "full",
            "detail": "full" if full else "compact",
            "timeout_s": options.timeout if options else DEFAULT_TIMEOUT,
            "elapsed_s": round(time.time() - started, 3),
            "read_only": True,
            "docs_path": docs_path(),
        },
    }
    sections = facts if full or not facts else compact_facts(facts)
    for section in FACT_SECTIONS:
        document[section] = sections.get(section)
    return document, exit_code


def docs_path():
    """Absolute path of troubleshooting.md beside this script, or where the wheel installed it."""
    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in (os.path.join(here, "..", DOCS),
                      os.path.join(sys.prefix, "share", "scalable-distributed", DOCS)):
        if os.path.isfile(candidate):
            return os.path.normpath(candidate)
    return None


def compact_facts(facts):
    """The default document: every section, minus the bulk few readers need (--full has it all).

    Dropped here: install records of single copies (kept when a package has
    duplicates), extension file paths, operator lists, the wheel table's
    sources (install.packages keeps wheel true/false/null), torch's CUDA build
    table, an unset CUDA_VISIBLE_DEVICES, empty CUDA arch lists, the loader's message for a missing NVML, a single clean probe attempt (counted), the torch pin and
    source build (the no-prebuilt-wheels finding carries them where they matter), torch-version PyG flags
    (WITH_PT*) and false flags, warning texts (counted), child stderr in
    attempts, who tried a socket (counted), the raw feature probe
    (sampling.probe), the stack_level locations (the finding has them), the
    a passed smoke sample's details, and interpreter facts that
    repeat others.
    """
    compact = dict(facts)
    distributions = facts.get("distributions")
    if distributions:
        packages = {}
        for name, package in distributions["packages"].items():
            entry = {"installed": package["installed"]}
            if package["installs"]:
                entry.update(version=package["version"], copies=len(package["installs"]))
            if len(package["installs"]) > 1:
                entry["installs"] = [{key: record.get(key) for key in ("version", "location", "installer")}
                                     for record in package["installs"]]
            packages[name] = entry
        compact["distributions"] = dict(distributions, packages=packages)
    for section in ("torch_build", "pyg_source"):
        if facts.get(section):
            compact[section] = {k: v for k, v in facts[section].items() if k not in ("package_dir", "git_version")}
    if compact.get("pyg_source", {}).get("stack_level_typo"):  # the locations are in the finding's evidence
        compact["pyg_source"]["stack_level_typo"] = len(compact["pyg_source"]["stack_level_typo"])
    if facts.get("sampling"):  # the raw feature probe; "features" is its verdict
        compact["sampling"] = {k: v for k, v in facts["sampling"].items() if k != "probe"}
        compact["sampling"]["smoke"] = {  # a passed sample's details say nothing more than "passed"
            backend: {k: v for k, v in result.items() if not (k == "samples" and result.get("passed"))}
            for backend, result in facts["sampling"]["smoke"].items()}
    install = facts.get("install")
    if install:  # the ways round a missing wheel are in the no-prebuilt-wheels finding's fix when they matter
        compact["install"] = {k: v for k, v in install.items() if k not in (
            "source_build_time", "source_build_command", "source_build_needs", "torch_pin", "no_wheel_reasons")}
        if install.get("packages"):  # the table rows' sources and dates: --full
            compact["install"]["packages"] = {name: row.get("wheel") for name, row in install["packages"].items()}
    cuda = facts.get("cuda")
    if cuda:  # torch's own build table, and CUDA_VISIBLE_DEVICES when it is not set: --full
        compact["cuda"] = {k: v for k, v in cuda.items() if k != "releases_code_cc" and not (
            k == "visible_devices" and not (v or {}).get("set")) and not (
            k in ("arch_list", "device_archs", "visible_devices_env") and not v)}
        nvml = cuda.get("nvml") or {}
        if nvml.get("reason") == "library-not-found":  # the loader's words add nothing to the reason
            compact["cuda"]["nvml"] = {k: v for k, v in nvml.items() if k != "message"}
    for section in ("torch", "pyg"):
        if facts.get(section):  # keep where torch and PyG were imported from: it names a shadowing copy
            compact[section] = lean_record(facts[section], drop=())
    pyg = compact.get("pyg")
    if pyg and "flags" in pyg:
        pyg["flags"] = {k: v for k, v in pyg["flags"].items() if v and not re.match(r"^WITH_PT\d+$", k)}
        pyg["flags_shown"] = "true ones, WITH_PT* left out (--full has all)"
    extensions = facts.get("extensions")
    if extensions:
        compact["extensions"] = {module: lean_record(entry, drop=("file", "ops"))
                                 for module, entry in extensions.items()}
    probe = facts.get("probe")
    if probe:
        compact["probe"] = dict(probe, attempts=[{k: v for k, v in a.items() if k != "stderr_tail"}
                                                 for a in probe["attempts"]],
                                refused_sockets=len(probe["refused_sockets"]))
        del compact["probe"]["interpreter"]  # the "interpreter" section names it
        attempts = probe["attempts"]
        if len(attempts) == 1 and attempts[0].get("finished") and attempts[0].get("returncode") == 0 \
                and not attempts[0].get("descendants_ended"):  # one clean attempt says nothing "complete" does not
            compact["probe"]["attempts"] = len(attempts)
    if facts.get("python"):
        compact["python"] = {k: v for k, v in facts["python"].items() if k not in ("release", "platform")}
    choice = facts.get("interpreter")
    if choice:
        compact["interpreter"] = {k: v for k, v in choice.items() if v is not None and k != "probed_prefix"}
    return compact


def lean_record(entry, drop=("file",)):
    """A probe record without file paths and with its warnings counted, not quoted."""
    lean = {k: v for k, v in entry.items() if k not in drop and k != "warnings"}
    if "warnings" in entry:
        lean["warning_count"] = len(entry["warnings"])
    return lean


def emit(document, pretty):
    sys.stdout.flush()
    write_json(document, pretty)


def version_rows(document):
    """(component, state) rows for people: what is installed and whether it works."""
    python = document.get("python") or {}
    torch = document.get("torch") or {}
    build = document.get("torch_build") or {}
    pyg = document.get("pyg") or {}
    cuda = document.get("cuda") or {}
    distributed = document.get("distributed") or {}
    packages = (document.get("distributions") or {}).get("packages") or {}
    libc = python.get("libc") or {}
    rows = [("Python", "%s %s, %s %s, %s %s" % (
        python.get("implementation"), python.get("version"), python.get("system"), python.get("machine"),
        libc.get("name"), libc.get("version"))), ("interpreter", python.get("executable"))]
    if torch.get("status") == "ok":
        rows.append(("torch", "%s (CUDA build: %s)" % (torch.get("version"), torch.get("cuda") or "none")))
    else:
        rows.append(("torch", "%s (%s)" % (build.get("version") or "not installed", torch.get("status"))))
    nvml = cuda.get("nvml") or {}
    if cuda.get("status") != "not-probed":
        rows.append(("CUDA devices", "%s (%s)" % (cuda.get("device_count", 0), "driver %s" % nvml.get("driver_version")
                                                  if nvml.get("available") else "no NVML: no NVIDIA driver seen")))
    if distributed.get("available") is not None:
        rows.append(("torch.distributed", ", ".join(b for b, ok in sorted(distributed.get("backends", {}).items())
                                                    if ok) or "no backend"))
    version = (packages.get("torch-geometric") or {}).get("version")
    rows.append(("PyG", "%s (%s)" % (pyg.get("version") or version or "not installed", pyg.get("status"))))
    for module, entry in sorted((document.get("extensions") or {}).items()):
        dist = entry.get("distribution")
        rows.append((dist, "%s (%s)" % ((packages.get(dist) or {}).get("version") or "-", entry.get("status"))))
    sampling = document.get("sampling") or {}
    backend = sampling.get("neighbor_backend")
    smoke = (sampling.get("smoke") or {}).get(backend) or {}
    if document["checker"]["mode"] == "full":
        rows.append(("neighbour sampling", "%s (smoke sample %s)" % (
            backend, "passed" if smoke.get("passed") else "failed") if backend else "no backend"))
    return rows


def redactions(document):
    """(text, replacement) pairs for what a public issue should not show: home, user, host, node lists."""
    import getpass
    pairs = []
    home = os.path.expanduser("~")
    if home and home not in ("/", "~"):
        pairs.append((home.rstrip("/"), "~"))
    for name in (os.environ.get("USER"), os.environ.get("LOGNAME"), safe_call(getpass.getuser)):
        if name and len(name) > 1:
            pairs.append((name, "<user>"))
    nodename = safe_call(lambda: os.uname().nodename)
    if nodename:
        pairs.append((nodename, "<host>"))
        pairs.append((nodename.split(".")[0], "<host>"))
    launch = (document.get("environment") or {}).get("launch") or {}
    for variable in ("SLURM_JOB_NODELIST", "SLURM_NODELIST", "MASTER_ADDR"):
        raw = (launch.get(variable) or {}).get("raw") or os.environ.get(variable)
        if raw:
            pairs.append((raw, "<%s>" % variable.lower()))
    # Longest first, so a home path goes before the user name inside it.
    return sorted(set(p for p in pairs if len(p[0]) > 1), key=lambda p: -len(p[0]))


def safe_call(function):
    try:
        return function()
    except Exception:  # no user/host name to hide is not an error
        return None


def redact(text, pairs):
    for secret, replacement in pairs:
        if secret in ("root",):
            text = re.sub(r"(?<![\w.-])%s(?![\w.-])" % re.escape(secret), replacement, text)
        else:
            text = text.replace(secret, replacement)
    return text


def render_markdown(document, redact_private=True):
    """A report to paste into an issue: versions table and findings with their fixes, nothing else."""
    checker = document["checker"]
    lines = ["### PyG environment (check_sampling_backends %s)" % checker["version"], "",
             "status **%s**, exit %d, %s probe in %.1f s; gates: %s" % (
                 document["status"], document["exit_code"], checker["mode"], checker["elapsed_s"],
                 ", ".join("%s %s" % (name, "passed" if g["passed"] else "FAILED")
                           for name, g in document["gates"].items()) or "none asked"), ""]
    if document.get("python") is None:
        lines.append("no facts gathered: the checker stopped before probing (see the finding)")
    else:
        lines += ["| component | version (state) |", "|---|---|"]
        for component, state in version_rows(document):
            lines.append("| %s | %s |" % (component, str(state).replace("|", "\\|")))
    findings = sorted(document["findings"], key=lambda f: SEVERITY_ORDER[f["severity"]])
    lines += ["", "#### Findings (%d)" % len(findings), ""]
    for item in findings:
        lines.append("- **%s** `%s`: %s" % (item["severity"], item["id"], item["title"]))
        if item.get("fix"):
            lines.append("  fix: `%s`" % item["fix"].replace("`", "'"))
    if not findings:
        lines.append("none")
    text = "\n".join(lines) + "\n"
    if redact_private:
        text = redact(text, redactions(document))
        text += "\n<sub>user, home, host and node names redacted (--no-redact shows them)</sub>\n"
    return text


def stderr_summary(document):
    """One screen for the person at the terminal; the JSON on stdout stays the contract."""
    python = document.get("python") or {}
    lines = ["check_sampling_backends: %s (exit %d) for %s (Python %s)" % (
        document["status"], document["exit_code"], python.get("executable") or "?", python.get("version"))]
    shown = [f for f in document["findings"] if f["severity"] in ("error", "warning")]
    for item in shown[:8]:
        lines.append("  %-7s %s: %s" % (item["severity"], item["id"], item["title"]))
        if item.get("fix"):
            fix = item["fix"] if len(item["fix"]) <= 200 else item["fix"][:197] + "..."
            lines.append("          fix: %s" % fix)
    hidden = len(document["findings"]) - len(shown[:8])
    if hidden:
        lines.append("  (+%d more, info included: see \"findings\" in the JSON)" % hidden)
    return "\n".join(lines) + "\n"


def json_schema():
    """The output contract. Sections hold plain facts; their inner keys may grow.

    A fact section is null when the checker stopped before gathering it: a
    usage error (exit 2) or an internal error (exit 3).
    """
    finding_schema = {
        "type": "object",
        "required": ["id", "severity", "title", "evidence", "fix", "docs"],
        "additionalProperties": False,
        "properties": {
            "id": {"enum": sorted(FINDINGS)},
            "severity": {"enum": ["error", "warning", "info"]},
            "title": {"type": "string", "minLength": 1},
            "evidence": {"type": "object"},
            "fix": {"type": ["string", "null"]},
            "docs": {"type": "string", "pattern": "^references/troubleshooting\\.md#[a-z0-9-]+$"},
        },
    }
    gate_schema = {"type": "object", "required": ["passed"], "properties": {"passed": {"type": "boolean"}}}
    object_or_null = {"type": ["object", "null"]}
    properties = {
        "schema_version": {"const": SCHEMA_VERSION},
        "ok": {"type": "boolean", "description": "no error finding, no failed gate, no internal error"},
        "status": {"enum": ["ok", "warning", "error", "incomplete", "gate-failed", "usage-error",
                            "internal-error"]},
        "exit_code": {"enum": [EXIT_OK, EXIT_GATE_FAILED, EXIT_USAGE, EXIT_INTERNAL]},
        "findings": {"type": "array", "items": finding_schema},
        "gates": {"type": "object", "additionalProperties": gate_schema,
                  "propertyNames": {"enum": ["neighbor_backend", "cuda", "distributed"]}},
        "checker": {"type": "object", "required": ["version", "mode", "detail", "elapsed_s", "read_only"],
                    "properties": {"detail": {"enum": ["compact", "full"]}}},
        "interpreter": {"type": ["object", "null"], "required": ["chosen_by", "probed", "running"],
                        "properties": {"chosen_by": {"enum": ["--python", "active-environment", "running"]}}},
        "python": {"type": ["object", "null"], "required": ["version", "executable", "machine", "libc"]},
        "distributions": {"type": ["object", "null"], "required": ["packages", "module_claims"]},
        "torch_build": {"type": ["object", "null"], "required": ["found"]},
        "pyg_source": {"type": ["object", "null"], "required": ["found"]},
        "cpu": {"type": ["object", "null"], "required": ["logical_cores"]},
        "environment": {"type": ["object", "null"], "required": ["threads", "launch"]},
        "probe": object_or_null,
        "torch": object_or_null,
        "cuda": object_or_null,
        "distributed": object_or_null,
        "pyg": object_or_null,
        "extensions": {"type": ["object", "null"], "additionalProperties": {
            "type": "object", "required": ["status", "distribution"],
            "properties": {"status": {"enum": [
                "ok", "not-installed", "import-error", "crashed", "hung", "blocked", "not-run",
                "probe-error", "not-probed"]}}}},
        "sampling": {"type": ["object", "null"], "properties": {
            "neighbor_backend": {"enum": ["pyg-lib", "torch-sparse", None]}}},
        "install": object_or_null,
    }
    order = ["schema_version", "ok", "status", "exit_code", "findings", "gates", "checker"] + list(FACT_SECTIONS)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "check_sampling_backends.schema.json",
        "title": "check_sampling_backends.py output",
        "description": "One JSON document printed on stdout. Keys appear in this order: " + ", ".join(order)
                       + ". schema_version is MAJOR.MINOR: MAJOR changes when a key of the default output is "
                         "removed or renamed or a value changes type or meaning, MINOR when keys, enum values "
                         "or finding ids are added. Bulky facts (every install record, operator lists, all "
                         "PyG flags, child stderr) appear only with --full.",
        "type": "object",
        "required": order,
        "additionalProperties": False,
        "properties": properties,
    }


def list_findings():
    return [{"id": fid, "severity": severity, "title": title, "docs": "%s#%s" % (DOCS, fid)}
            for fid, (severity, title) in sorted(FINDINGS.items())]


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

class UsageError(Exception):
    """A refusal: one line on stderr, a JSON document with the finding on stdout, exit 2."""

    def __init__(self, line, finding_id, evidence, fix):
        Exception.__init__(self, line)
        self.line, self.finding = line, finding(finding_id, evidence, fix=fix)


def build_parser():
    import argparse

    class OneLineErrorParser(argparse.ArgumentParser):
        def error(self, message):
            raise UsageError("%s: error: %s (see --help)" % (self.prog, message), "usage-error",
                             {"message": message, "argv": sys.argv[1:]}, fix="%s --help" % checker_command())

    parser = OneLineErrorParser(
        usage=USAGE,
        description="Probe Python, torch, CUDA, torch.distributed, PyG and its compiled extensions "
                    "(pyg-lib, torch-sparse, torch-scatter, ...) and print one JSON document with "
                    "facts and findings (each with evidence, an exact fix and a docs anchor). "
                    "Run it before debugging a PyG scaling job.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--require-neighbor-backend", action="store_true",
                        help="exit 1 unless the backend NeighborLoader would use (pyg-lib or torch-sparse) "
                             "passed a functional smoke sample, not merely imported")
    parser.add_argument("--require-cuda", action="store_true",
                        help="exit 1 unless torch could use at least one GPU: NVML lists it, CUDA_VISIBLE_DEVICES "
                             "leaves it, the driver is new enough and torch has kernels for it (no CUDA call)")
    parser.add_argument("--require-distributed", nargs="?", const="any", metavar="BACKEND",
                        choices=("any", "gloo", "nccl", "mpi", "ucc"),
                        help="exit 1 unless torch.distributed is available (and BACKEND, one of gloo, nccl, "
                             "mpi, ucc, when given)")
    parser.add_argument("--python", metavar="PATH", default=None,
                        help="interpreter to probe, e.g. another venv's bin/python (default: the active "
                             "environment's, else this one; see 'which interpreter' below)")
    parser.add_argument("--timeout", metavar="SECONDS", type=positive_seconds, default=DEFAULT_TIMEOUT,
                        help="bound on total wall time (default %(default)s); an import that makes no "
                             "progress for 40%% of it (2 to 20 s) is reported as hung")
    parser.add_argument("--static-only", action="store_true",
                        help="metadata, CPU and environment only: imports neither torch nor any extension "
                             "(milliseconds); what it cannot see is 'not-probed'/null and status is "
                             "'incomplete'; the --require-* gates need the full probe")
    parser.add_argument("--format", choices=("json", "markdown"), default="json",
                        help="json (default): the document agents read; markdown: a versions table and the "
                             "findings with their fixes, to paste into an issue (names redacted)")
    parser.add_argument("--no-redact", action="store_true",
                        help="markdown: keep user, home, host and node names (redacted by default)")
    parser.add_argument("--full", action="store_true",
                        help="every fact: all install records, operator lists, all PyG flags, child stderr "
                             "(the default compact document leaves these out)")
    parser.add_argument("--pretty", action="store_true", help="indent the JSON")
    parser.add_argument("--schema", action="store_true", help="print the JSON Schema of the output and exit 0")
    parser.add_argument("--list-findings", action="store_true",
                        help="print every finding id this checker can emit, as JSON, and exit 0")
    return parser


def positive_seconds(text):
    import argparse
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a number of seconds, got %r" % text)
    if not 1 <= value <= 3600:
        raise argparse.ArgumentTypeError("must be between 1 and 3600 seconds, got %s" % text)
    return value


def resolve_python(path, timeout):
    """--python PATH -> (absolute path, what it said about itself); UsageError unless CPython 3.8+."""
    import shutil
    resolved = path if os.sep in path else shutil.which(path)
    if not resolved or not os.path.isfile(resolved) or not os.access(resolved, os.X_OK):
        raise UsageError("check_sampling_backends.py: error: --python: %r is not an executable file" % path,
                         "usage-error", {"python": path, "message": "not an executable file"},
                         fix=checker_command("--python", "$(command -v python3)"))
    resolved = os.path.abspath(resolved)
    if resolved == sys.executable:
        return resolved, None
    answer = ask_interpreter(resolved, timeout)
    if not answer["is_python"]:
        raise UsageError("check_sampling_backends.py: error: --python %s is not a Python interpreter (%s)"
                         % (path, answer["reason"]), "interpreter-unsupported",
                         {"python": resolved, "is_python": False, "reason": answer["reason"]},
                         fix=checker_command("--python", "/path/to/venv/bin/python  # a CPython 3.8+"))
    version = parse_version(answer["version"])
    if version[:2] < MIN_PYTHON or answer.get("implementation") != "CPython":
        raise UsageError("check_sampling_backends.py: error: --python %s is %s %s; the checker probes "
                         "CPython 3.8+ (torch 2.13 and PyG 2.8 need 3.10+)"
                         % (path, answer.get("implementation"), answer["version"]), "interpreter-unsupported",
                         {"python": resolved, "is_python": True, "version": answer["version"],
                          "implementation": answer.get("implementation"), "needs": "CPython >= 3.8"},
                         fix="make a venv with a newer Python and probe it: python3.11 -m venv ~/.venvs/pyg && "
                             + checker_command("--python", "~/.venvs/pyg/bin/python"))
    return resolved, answer


def run_static_in(python, timeout):
    """Static facts of another interpreter: the child runs only the static step."""
    all_steps = child_steps({})
    skip = dict((step, "static-only") for step in all_steps if step != "static")
    started = time.time()
    attempt = run_child_attempt(python, {"skip": skip, "block": []}, started + timeout, timeout, set())
    record = attempt.results.get("static")
    if not record or record.get("status") != "ok":
        raise RuntimeError("could not read static facts from %s: %s" % (python, attempt.stderr_tail[-500:]))
    return record["data"]


def refuse_gates_without_probe(options):
    asked = []
    if options.require_neighbor_backend:
        asked.append("--require-neighbor-backend")
    if options.require_cuda:
        asked.append("--require-cuda")
    if options.require_distributed:
        asked += ["--require-distributed"] + ([] if options.require_distributed == "any"
                                              else [options.require_distributed])
    if options.static_only and asked:
        raise UsageError("check_sampling_backends.py: error: %s needs the full probe; drop --static-only"
                         % " ".join(asked), "usage-error",
                         {"flags": asked + ["--static-only"],
                          "message": "a gate is decided by importing and smoke-testing; --static-only imports "
                                     "nothing"},
                         fix=checker_command(*asked))


def output(document, options):
    if options is not None and options.format == "markdown":
        sys.stdout.write(render_markdown(document, redact_private=not options.no_redact))
        sys.stdout.flush()
    else:
        emit(document, bool(options and options.pretty))


def main(argv=None):
    started = time.time()
    options = None
    facts, findings, gates = {}, [], {}
    try:
        options = build_parser().parse_args(argv)
        if options.schema:
            emit(json_schema(), True)
            return EXIT_OK
        if options.list_findings:
            emit(list_findings(), options.pretty)
            return EXIT_OK
        refuse_gates_without_probe(options)
        requested = None
        if options.python is not None:
            requested, answer = resolve_python(options.python, options.timeout)
        python, choice = choose_interpreter(requested)
        if choice["chosen_by"] == "active-environment":
            python, answer = resolve_python(python, options.timeout)
            source = choice["active_environment"]["source"]
            sys.stderr.write("check_sampling_backends: probing %s, the active environment (%s), not %s%s; "
                             "--python chooses another\n" % (
                                 python, "its bin is on PATH" if source == "PATH" else "$" + source, sys.executable,
                                 " (a throwaway %s environment)" % choice["running_ephemeral"]
                                 if choice["running_ephemeral"] else ""))
        elif requested is None:
            answer = None
        choice = finish_interpreter_facts(choice, answer)
    except UsageError as error:
        sys.stderr.write(error.line + "\n")
        document, exit_code = render(facts, [error.finding], gates, options, started)
        output(document, options)
        return exit_code
    try:
        probe = None
        if options.static_only:
            static = gather_static_facts() if python == sys.executable else run_static_in(python, options.timeout)
        else:
            sys.stderr.write("check_sampling_backends: probing %s (deadline %ds)...\n" % (python, options.timeout))
            probe = run_import_probe(python, options.timeout, started)
            static = step_data(probe["results"], "static")
            if static is None:
                raise RuntimeError("the child interpreter gave no static facts: %s"
                                   % json.dumps(probe["attempts"])[-1500:])
        facts = assemble_facts(static, probe, python, options)
        facts["interpreter"] = choice
        if choice.get("probed_is_active") is False:
            sys.stderr.write("check_sampling_backends: note: %s is not the active environment %s "
                             "(finding interpreter-not-active)\n" % (python, choice["active_environment"]["prefix"]))
        findings = diagnose(facts, options)
        gates = evaluate_gates(facts, options)
        document, exit_code = render(facts, findings, gates, options, started)
    except Exception as error:  # still one JSON document, saying what broke
        import traceback
        document, exit_code = render(facts, findings, gates, options, started, internal_error={
            "error": describe_exception(error), "traceback": traceback.format_exc()[-3000:]})
    output(document, options)
    sys.stderr.write(stderr_summary(document))
    return exit_code


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == CHILD_FLAG:
        sys.exit(child_main(sys.argv[2]))
    sys.exit(main())
