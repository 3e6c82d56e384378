"""Dated table data, in one place: tracked distributions and extensions, launch and thread variables,
PyG's wheel table with its sources, source-build facts, NVML constants, CUDA driver and arch tables."""


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


# A torch release PyG's wheel table (WHEEL_ROWS: pyg-lib has wheels for it) covers and the tests run
# on; the install fix pins it so pip does not pick a newer torch PyG has no
# wheels for yet.
TORCH_PIN = "2.13.0"
TORCH_PIN_NEEDS_PYTHON = (3, 10)
