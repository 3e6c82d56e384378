"""The checker's name, versions and finding table: what --list-findings and --explain answer from."""

from diagnostics_core.contract import Tool


# Schema versions: MAJOR.MINOR. MAJOR changes when a key the default output
# had is removed or renamed, or a value changes type or meaning; MINOR when
# keys, enum values or finding ids are added. Readers check MAJOR only.
SCHEMA_VERSION = "2.1"
CHECKER_VERSION = "2.0.0"
MIN_PYTHON = (3, 8)


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
    "no-scatter-sparse-wheels": ("info", "PyG publishes no torch-scatter/torch-sparse wheel for this torch/CUDA"),
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
    "launch-hostname-loopback": ("error", "this host's name resolves to a loopback address and no socket interface "
                                          "is named: gloo would advertise it to the other nodes"),
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
    # hostile inputs (issue 21)
    "files-unreadable": ("warning", "files the checker reads are not regular files, unreadable or blocked"),
    "static-stage-incomplete": ("error", "the static stage gave no facts within the deadline"),
    "nvml-crashed": ("error", "the NVML library crashes the process that loads or calls it"),
    "nvml-hung": ("error", "the NVML library never returns (at load or in nvmlInit)"),
    "nvml-library-invalid": ("error", "the NVML library named by SCALABLE_DISTRIBUTED_NVML cannot be loaded"),
    "nvml-devices-capped": ("warning", "NVML reports more GPUs than the checker reads; only the first are listed"),
    "open-files-limit": ("error", "the open-files limit (ulimit -n) is too low for the checker to run"),
}




TOOL = Tool("check_sampling_backends", CHECKER_VERSION, SCHEMA_VERSION, FINDINGS,
            usage_id="usage-error", internal_id="checker-internal-error")
finding = TOOL.finding
list_findings = TOOL.list_findings
checker_command = TOOL.command  # `python3 /abs/path/scripts/check_sampling_backends.py FLAGS...`
