"""Dated table data, in one place: tracked distributions and extensions, launch and thread variables,
PyG's wheel table with its sources, source-build facts, NVML constants, CUDA driver and arch tables."""


DEFAULT_TIMEOUT = 60.0


# Distributions whose metadata we read, by normalised name.
TRACKED_DISTRIBUTIONS = (
    "torch", "torch-geometric", "pyg-nightly", "pyg-lib", "torch-sparse",
    "torch-scatter", "torch-cluster", "torch-spline-conv", "psutil", "numpy",
)


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


HOSTS_FILE = "/etc/hosts"


# What PyG 2.8 loses without torch-sparse (PyG's source: sampler/neighbor_sampler.py
# skips pyg-lib for induced subgraphs; sampler/hgt_sampler.py, loader/shadow.py raise
# "requires 'torch-sparse'"; loader/graph_saint.py builds a SparseTensor, whose
# stand-in in typing.py raises). Without torch-scatter PyG falls back to torch's own
# scatter_reduce (utils/_scatter.py): slower, nothing lost.
WITHOUT_TORCH_SPARSE = ("NeighborLoader(subgraph_type='induced')", "HGTLoader", "ShaDowKHopSampler",
                        "GraphSAINT*Sampler", "SparseTensor")


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




# Container limits (diagnostics_core.container). Docker's and Kubernetes' default /dev/shm is 64 MiB
# (docker run --shm-size's default; a pod without a memory-backed emptyDir); a /dev/shm under 1 GiB, or with
# less than that free, is flagged: a loader's workers keep num_workers x prefetch_factor batches there.
DOCKER_SHM_DEFAULT = 64 << 20
SHM_SMALL_BYTES = 1 << 30
# Below this soft open-files limit, loader workers sharing many tensors by descriptor run out; the raise a
# fix asks for, where the hard limit allows it.
NOFILE_LOW = 4096
NOFILE_WANTED = 65536
