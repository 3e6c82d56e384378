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
with or without torch.
"""

import json
import os
import re
import sys
import time

SCHEMA_VERSION = "1.0"
CHECKER_VERSION = "1.0.0"
DOCS = "references/troubleshooting.md"

EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3

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
    "NODE_RANK", "GROUP_RANK", "ROLE_RANK", "TORCHELASTIC_RESTART_COUNT",
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

# PyG's wheel index (data.pyg.org) as documented on the date below: torch
# minor -> CUDA variants with pyg-lib/torch-scatter/torch-sparse wheels.
# Sources: PyG installation docs and the pyg-lib README/0.9.0 release notes.
WHEEL_TABLE_DATE = "2026-08-17"
WHEEL_INDEX = "https://data.pyg.org/whl/torch-{torch}+{variant}.html"
WHEEL_VARIANTS = {
    "2.14": ("cpu", "cu126", "cu130", "cu132"),
    "2.13": ("cpu", "cu126", "cu130", "cu132"),
    "2.12": ("cpu", "cu126", "cu130", "cu132"),
    "2.11": ("cpu", "cu126", "cu128", "cu130"),
    "2.10": ("cpu", "cu126", "cu128", "cu130"),
    "2.9": ("cpu", "cu126", "cu128", "cu130"),
    "2.8": ("cpu", "cu126", "cu128", "cu129"),
    "2.7": ("cpu", "cu118", "cu126", "cu128"),
    "2.6": ("cpu", "cu118", "cu124", "cu126"),
    "2.5": ("cpu", "cu118", "cu121", "cu124"),
    "2.4": ("cpu", "cu118", "cu121", "cu124"),
    "2.3": ("cpu", "cu118", "cu121"),
    "2.2": ("cpu", "cu118", "cu121"),
    "2.1": ("cpu", "cu118", "cu121"),
    "2.0": ("cpu", "cu117", "cu118"),
}
WHEEL_PLATFORMS = ("linux-x86_64", "linux-aarch64", "win32-amd64", "darwin-arm64", "darwin-x86_64")
SOURCE_BUILD_MINUTES = "about 7 min for torch-scatter and 16 min for torch-sparse on 2 cores"
# What to build from PyPI's sources in place of each extension's wheel.
# pyg-lib has no sdist on PyPI; torch-sparse gives PyG the same neighbour sampling.
SOURCE_BUILD_PACKAGES = {
    "pyg_lib": "torch-scatter torch-sparse", "torch_scatter": "torch-scatter",
    "torch_sparse": "torch-scatter torch-sparse", "torch_cluster": "torch-cluster",
    "torch_spline_conv": "torch-spline-conv",
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
    "no-prebuilt-wheels": ("warning", "PyG publishes no wheels for this torch/CUDA/Python/platform"),
    "neighbor-sampling-unavailable": ("error", "no working neighbour-sampling backend: NeighborLoader will fail"),
    "neighbor-smoke-failed": ("error", "a sampling backend imports but samples wrongly or raises"),
    "induced-sampling-unavailable": ("info", "induced-subgraph sampling needs torch-sparse"),
    "weighted-sampling-unavailable": ("info", "weighted neighbour sampling needs pyg-lib"),
    "temporal-sampling-unavailable": ("info", "temporal neighbour sampling needs pyg-lib"),
    "metis-unavailable": ("warning", "METIS partitioning (ClusterData, Partitioner) is unavailable"),
    "distributed-sampling-unavailable": ("info", "DistNeighborSampler's pyg-lib operators are missing"),
    "gpu-sampling-unavailable": ("info", "neighbour sampling cannot run on the GPU"),
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
    "cpu-affinity-restricted": ("info", "this process may use fewer cores than the machine has"),
    "cpu-threads-unset": ("info", "OMP_NUM_THREADS is not set"),
    "cpu-threads-invalid": ("warning", "a thread-count variable is not a positive integer"),
    "cpu-threads-oversubscribed": ("warning", "threads times local processes exceed the available cores"),
    "cpu-numa-multi-node": ("info", "the machine has several NUMA nodes"),
    "cuda-unavailable": ("warning", "torch sees no CUDA device"),
    "distributed-unavailable": ("warning", "torch.distributed or the requested backend is unavailable"),
}

USAGE = """\
%(prog)s [--require-neighbor-backend] [--require-cuda]
       [--require-distributed [BACKEND]] [--python PATH] [--timeout SECONDS]
       [--static-only] [--pretty] [--schema] [--list-findings]"""

EPILOG = """\
exit codes:
  0  probe finished; every --require-* gate passed (findings may still exist)
  1  a --require-* gate failed (see "gates" and the error findings)
  2  usage error (bad flag or value); nothing is printed on stdout
  3  internal error in the checker; the JSON says so in "findings"

what it guarantees:
  Exactly one JSON document on stdout; progress and warnings on stderr.
  Read-only: no file or directory written, no socket opened, no CUDA context
  created (CUDA facts come from NVML), no service started, nothing downloaded,
  no prompt. Imports happen in a child interpreter bounded by --timeout.

examples:
  python scripts/check_sampling_backends.py --pretty
  python scripts/check_sampling_backends.py --require-neighbor-backend
  python scripts/check_sampling_backends.py --python ~/venvs/pyg/bin/python
  python scripts/check_sampling_backends.py --static-only
  python scripts/check_sampling_backends.py | jq '.findings[] | {id, fix}'
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
        self.descendants_ended = []
        self.subreaper = False
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
    return json.dumps(sanitise(document), indent=2 if pretty else None, ensure_ascii=False,
                      allow_nan=False)


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
    }


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


def get_distribution_facts():
    found = {name: [] for name in TRACKED_DISTRIBUTIONS}
    for name, path in find_dist_info_dirs():
        if name in found:
            found[name].append(get_distribution_record(path))
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
    return {
        "threads": threads,
        "launch": launch,
        "network_interfaces": interfaces,
        "launcher": detect_launcher(),
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
# Import stage: runs inside the child interpreter, one step at a time.
# Each step reports "begin" before it starts and "result" when done, so the
# parent knows which step was running if the child dies or hangs.
# ---------------------------------------------------------------------------

def describe_exception(error):
    """The whole chain: torch wraps the real dlopen error in __cause__."""
    chain, seen = [], set()
    while error is not None and id(error) not in seen and len(chain) < 10:
        seen.add(id(error))
        chain.append({"type": type(error).__name__, "message": sanitise_text(safe_str(error), 2000)})
        error = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
    return {"type": chain[0]["type"], "message": chain[0]["message"], "chain": chain}


def captured_warnings(caught):
    return [{"category": safe_str(getattr(w.category, "__name__", w.category)),
             "message": sanitise_text(safe_str(w.message), 2000)} for w in caught[:50]]


def probe_nvml():
    """GPU facts from NVML through ctypes: no CUDA context, no GPU memory."""
    import ctypes
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError as error:
        return {"available": False, "reason": str(error)}
    if nvml.nvmlInit_v2() != 0:
        return {"available": False, "reason": "nvmlInit_v2 failed"}
    try:
        buffer = ctypes.create_string_buffer(96)
        driver = None
        if nvml.nvmlSystemGetDriverVersion(buffer, 96) == 0:
            driver = buffer.value.decode()
        cuda_driver = ctypes.c_int()
        cuda_driver_version = None
        if nvml.nvmlSystemGetCudaDriverVersion_v2(ctypes.byref(cuda_driver)) == 0:
            cuda_driver_version = "%d.%d" % (cuda_driver.value // 1000, cuda_driver.value % 1000 // 10)
        count = ctypes.c_uint()
        devices = []
        if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) == 0:
            for index in range(count.value):
                handle = ctypes.c_void_p()
                if nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) != 0:
                    continue
                device = {"index": index}
                if nvml.nvmlDeviceGetName(handle, buffer, 96) == 0:
                    device["name"] = buffer.value.decode()
                if nvml.nvmlDeviceGetUUID(handle, buffer, 96) == 0:
                    device["uuid"] = buffer.value.decode()
                major, minor = ctypes.c_int(), ctypes.c_int()
                if nvml.nvmlDeviceGetCudaComputeCapability(handle, ctypes.byref(major), ctypes.byref(minor)) == 0:
                    device["capability"] = "%d.%d" % (major.value, minor.value)
                devices.append(device)
        return {"available": True, "driver_version": driver,
                "cuda_driver_version": cuda_driver_version, "devices": devices}
    finally:
        nvml.nvmlShutdown()


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
    import torch
    # PYTORCH_NVML_BASED_CUDA_CHECK=1 (set by the parent) makes these two
    # calls ask NVML instead of initialising the CUDA driver context.
    available = torch.cuda.is_available()
    facts = {
        "built_with": torch.version.cuda,
        "available": available,
        "device_count": torch.cuda.device_count() if available else 0,
        "arch_list": torch.cuda.get_arch_list() if available else [],
        "visible_devices_env": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "nvml": nvml,
    }
    facts["context_created"] = bool(torch.cuda.is_initialized())
    return facts


def probe_distributed():
    import torch
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
    started = time.time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import torch_geometric
        import torch_geometric.typing as typing
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
        return probe_cuda(results.get("nvml"))
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
    facts["install"] = install_facts(facts, python)
    return facts


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
    index_url = WHEEL_INDEX.format(torch="%s.0" % torch_minor, variant=variant)
    reasons = []
    if hip:
        reasons.append("PyG publishes no ROCm wheels")
    if torch_minor not in WHEEL_VARIANTS:
        reasons.append("no wheels listed for torch %s" % torch_minor)
    elif variant not in WHEEL_VARIANTS[torch_minor]:
        reasons.append("torch %s wheels exist only for %s, not %s"
                       % (torch_minor, ", ".join(WHEEL_VARIANTS[torch_minor]), variant))
    if platform_name not in WHEEL_PLATFORMS:
        reasons.append("no wheels for platform %s" % platform_name)
    python_version = parse_version(python_facts.get("version"))
    if python_version[:2] < (3, 10):
        reasons.append("pyg-lib wheels need Python >= 3.10")
    py = quote(python)
    return {
        "torch_minor": torch_minor,
        "variant": variant,
        "platform": platform_name,
        "index_url": index_url,
        "command": "%s -m pip install --only-binary=:all: pyg_lib torch_scatter torch_sparse -f %s" % (py, index_url),
        "wheels_available": not reasons,
        "no_wheel_reasons": reasons,
        "support_table_date": WHEEL_TABLE_DATE,
        "source_build_command": "%s -m pip install --no-build-isolation torch-scatter torch-sparse" % py,
        "source_build_time": SOURCE_BUILD_MINUTES,
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
    """The install line for this torch build, or the way out when no wheel exists."""
    install = facts["install"]
    if not install.get("index_url"):
        return None
    if not install["wheels_available"]:
        return "%s  # no prebuilt wheels (%s); build from source, %s" % (
            install["source_build_command"], "; ".join(install["no_wheel_reasons"]), SOURCE_BUILD_MINUTES)
    flags = "--force-reinstall --no-deps --no-cache-dir " if reinstall else ""
    return "%s -m pip install %s--only-binary=:all: %s -f %s" % (
        interpreter(facts),
        flags, " ".join(packages), install["index_url"])


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


def rule_torch_and_pyg_presence(facts, options):
    found = []
    packages = facts["distributions"]["packages"]
    torch = facts["torch"]
    if not facts["torch_build"].get("found"):
        found.append(finding("torch-not-installed", {
            "interpreter": interpreter_path(facts),
            "python": facts["python"]["version"]},
            fix="%s -m pip install torch torch_geometric" % interpreter(facts)))
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
                       "or build it here from source (%s): %s -m pip install --no-build-isolation %s"
                       % (SOURCE_BUILD_MINUTES, interpreter(facts), SOURCE_BUILD_PACKAGES[owner or module]))
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
            fix = "%s  # or remove it: %s -m pip uninstall -y %s" % (
                pip_fix(facts, [package], reinstall=True), interpreter(facts), dist)
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
    install = facts["install"]
    if install.get("wheels_available") is not False:
        return []
    return [finding("no-prebuilt-wheels", {
        "torch_minor": install["torch_minor"], "variant": install["variant"], "platform": install["platform"],
        "python": facts["python"]["version"], "reasons": install["no_wheel_reasons"],
        "support_table_date": install["support_table_date"]},
        fix="%s  # %s; or move to a torch/CUDA pair listed on %s (table dated %s), or try the nightly index "
            "https://data.pyg.org/whl/nightly/torch-%s.0+%s.html" % (
                install["source_build_command"], SOURCE_BUILD_MINUTES, install["index_url"],
                install["support_table_date"], install["torch_minor"], install["variant"]))]


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
    if (cuda.get("device_count") or 0) > 0 and not features["gpu"]:
        found.append(finding("gpu-sampling-unavailable", {
            "device_count": cuda.get("device_count"), "torch_cuda": facts["torch"].get("cuda"),
            "pyg_lib_cuda_kernels": facts["sampling"]["probe"].get("pyg_lib_cuda_sampling"),
            "note": "NeighborLoader samples on the CPU by default; this only matters for GPU-side sampling"},
            fix=pyg_lib_fix))
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
                wanted = [i.strip().lstrip("^=") for i in launch[name]["raw"].split(",") if i.strip()]
                absent = [i for i in wanted if not any(n == i or n.startswith(i) for n in interfaces)]
                if absent:
                    missing_ifnames[name] = {"value": launch[name]["raw"], "absent": absent}
        if missing_ifnames:
            found.append(finding("launch-socket-ifname-missing", dict(missing_ifnames, interfaces=interfaces),
                                 fix="set them to an interface listed in evidence.interfaces "
                                     "(the one that routes to MASTER_ADDR: ip route get $MASTER_ADDR)"))
    return found


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


def rule_gates_cuda_distributed(facts, options):
    found = []
    torch = facts["torch"]
    cuda = facts.get("cuda") or {}
    if torch.get("status") == "ok" and (cuda.get("device_count") or 0) == 0:
        if options.require_cuda or torch.get("cuda"):
            found.append(finding("cuda-unavailable", {
                "torch_cuda": torch.get("cuda"), "nvml": cuda.get("nvml"),
                "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")},
                severity="error" if options.require_cuda else "info",
                fix=None if torch.get("cuda") else "%s -m pip install torch  # the default Linux wheel is a CUDA "
                                                   "build; or pick one at https://pytorch.org/get-started"
                % interpreter(facts)))
    distributed = facts.get("distributed") or {}
    if torch.get("status") == "ok" and not distributed.get("available", False):
        found.append(finding("distributed-unavailable", {"distributed": distributed},
                             severity="error" if options.require_distributed else "info",
                             fix="install a torch build with distributed support (the PyPI Linux wheels have it)"))
    return found


RULES = (
    rule_torch_and_pyg_presence,
    rule_pyg_shadowed,
    rule_python_supported_by_pyg,
    rule_probe_deadline,
    rule_wheel_tags,
    rule_extension_imports,
    rule_no_prebuilt_wheels,
    rule_neighbor_sampling,
    rule_feature_verdicts,
    rule_legacy_extensions,
    rule_duplicate_distributions,
    rule_conda_pip_mixed,
    rule_pyg_defects,
    rule_launch_environment,
    rule_cpu,
    rule_gates_cuda_distributed,
)


def diagnose(facts, options):
    findings = []
    for rule in RULES:
        findings.extend(rule(facts, options))
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
        count = (facts.get("cuda") or {}).get("device_count") or 0
        gates["cuda"] = {"passed": count > 0, "device_count": count}
    if options.require_distributed:
        distributed = facts.get("distributed") or {}
        backend = options.require_distributed
        passed = bool(distributed.get("available")) and (
            backend == "any" or bool(distributed.get("backends", {}).get(backend)))
        gates["distributed"] = {"passed": passed, "backend": backend}
    return gates


# ---------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------

FACT_SECTIONS = ("python", "distributions", "torch_build", "pyg_source", "cpu", "environment", "probe",
                 "torch", "cuda", "distributed", "pyg", "extensions", "sampling", "install")


def render(facts, findings, gates, options, started, internal_error=None):
    if internal_error is not None:
        findings = list(findings) + [finding("checker-internal-error", internal_error,
                                             fix="report it with this JSON attached")]
    gate_failed = any(not g["passed"] for g in gates.values())
    has_error = any(f["severity"] == "error" for f in findings)
    if internal_error is not None:
        status, exit_code = "internal-error", EXIT_INTERNAL
    elif gate_failed:
        status, exit_code = "gate-failed", EXIT_GATE_FAILED
    else:
        exit_code = EXIT_OK
        status = "error" if has_error else (
            "warning" if any(f["severity"] == "warning" for f in findings) else "ok")
    document = {
        "schema_version": SCHEMA_VERSION,
        "ok": not has_error and not gate_failed and internal_error is None,
        "status": status,
        "exit_code": exit_code,
        "findings": findings,
        "gates": gates,
        "checker": {
            "version": CHECKER_VERSION,
            "argv": sys.argv[1:],
            "mode": "static-only" if options.static_only else "full",
            "timeout_s": options.timeout,
            "elapsed_s": round(time.time() - started, 3),
            "read_only": True,
        },
    }
    for section in FACT_SECTIONS:
        document[section] = facts.get(section)
    return document, exit_code


def emit(document, pretty):
    sys.stdout.flush()
    write_json(document, pretty)


def json_schema():
    """The output contract. Sections hold plain facts; their inner keys may grow.

    A fact section is null only when an internal error stopped the checker
    before it was gathered.
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
        "ok": {"type": "boolean"},
        "status": {"enum": ["ok", "warning", "error", "gate-failed", "internal-error"]},
        "exit_code": {"enum": [EXIT_OK, EXIT_GATE_FAILED, EXIT_INTERNAL]},
        "findings": {"type": "array", "items": finding_schema},
        "gates": {"type": "object", "additionalProperties": gate_schema,
                  "propertyNames": {"enum": ["neighbor_backend", "cuda", "distributed"]}},
        "checker": {"type": "object", "required": ["version", "mode", "elapsed_s", "read_only"]},
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
        "description": "One JSON document printed on stdout. Keys appear in this order: " + ", ".join(order),
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

def build_parser():
    import argparse

    class OneLineErrorParser(argparse.ArgumentParser):
        def error(self, message):
            sys.stderr.write("%s: error: %s (see --help)\n" % (self.prog, message))
            sys.exit(EXIT_USAGE)

    parser = OneLineErrorParser(
        prog="check_sampling_backends.py",
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
                        help="exit 1 unless torch sees at least one CUDA device (asked through NVML)")
    parser.add_argument("--require-distributed", nargs="?", const="any", metavar="BACKEND",
                        choices=("any", "gloo", "nccl", "mpi", "ucc"),
                        help="exit 1 unless torch.distributed is available (and BACKEND, one of gloo, nccl, "
                             "mpi, ucc, when given)")
    parser.add_argument("--python", metavar="PATH", default=sys.executable,
                        help="interpreter to probe, e.g. another venv's bin/python (default: this one)")
    parser.add_argument("--timeout", metavar="SECONDS", type=positive_seconds, default=DEFAULT_TIMEOUT,
                        help="bound on total wall time (default %(default)s); an import that makes no "
                             "progress for 40%% of it (2 to 20 s) is reported as hung")
    parser.add_argument("--static-only", action="store_true",
                        help="metadata, CPU and environment only: imports neither torch nor any extension "
                             "(milliseconds)")
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


def resolve_python(parser, path):
    import shutil
    resolved = path if os.sep in path else shutil.which(path)
    if not resolved or not os.path.isfile(resolved) or not os.access(resolved, os.X_OK):
        parser.error("--python: %r is not an executable file" % path)
    return os.path.abspath(resolved) if resolved != sys.executable else resolved


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


def main(argv=None):
    started = time.time()
    parser = build_parser()
    options = parser.parse_args(argv)
    if options.schema:
        emit(json_schema(), True)
        return EXIT_OK
    if options.list_findings:
        emit(list_findings(), options.pretty)
        return EXIT_OK
    options.python = resolve_python(parser, options.python)
    facts, findings, gates = {}, [], {}
    try:
        probe = None
        if options.static_only:
            static = gather_static_facts() if options.python == sys.executable else run_static_in(
                options.python, options.timeout)
        else:
            sys.stderr.write("check_sampling_backends: probing %s (deadline %ds)...\n"
                             % (options.python, options.timeout))
            probe = run_import_probe(options.python, options.timeout, started)
            static = step_data(probe["results"], "static")
            if static is None:
                raise RuntimeError("the child interpreter gave no static facts: %s"
                                   % json.dumps(probe["attempts"])[-1500:])
        facts = assemble_facts(static, probe, options.python, options)
        findings = diagnose(facts, options)
        gates = evaluate_gates(facts, options)
        document, exit_code = render(facts, findings, gates, options, started)
    except Exception as error:  # still one JSON document, saying what broke
        import traceback
        document, exit_code = render(facts, findings, gates, options, started, internal_error={
            "error": describe_exception(error), "traceback": traceback.format_exc()[-3000:]})
    emit(document, options.pretty)
    return exit_code


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == CHILD_FLAG:
        sys.exit(child_main(sys.argv[2]))
    sys.exit(main())
