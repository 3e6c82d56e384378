"""The child probe: imports torch, CUDA (through NVML, no context), torch.distributed, PyG and each
extension step by step in a sandboxed child interpreter; the parent re-runs it without a culprit that
crashed or hung, until every step has an answer or the deadline passes."""

import json
import os
import sys
import time

from diagnostics_core.interrupt import Interrupted
from diagnostics_core.sandbox import (ChildReporter, child_environment, quiet_child_process, refuse_sockets,
                                      run_sandboxed, signal_name)
from diagnostics_core.text import describe_exception, safe_str, sanitise_text
from diagnostics_core.wheels import EXTENSIONS
from . import CHILD_FLAG
from .static_facts import gather_static_facts_bounded
from .tables import (DIST_SAMPLER_OPS, NVML_BUFFER, NVML_ERRORS, NVML_ERROR_FUNCTION_NOT_FOUND,
                     NVML_ERROR_NOT_SUPPORTED, NVML_LIBRARY, NVML_LIBRARY_VARIABLE)


def captured_warnings(caught):
    return [{"category": safe_str(getattr(w.category, "__name__", w.category)),
             "message": sanitise_text(safe_str(w.message), 2000)} for w in caught[:50]]


NVML_DEVICE_LIMIT = 64  # devices read one by one; NVML's count beyond it is reported, not walked


def nvml_library():
    """(library as the child loads it, whether it is the documented override)."""
    override = os.environ.get(NVML_LIBRARY_VARIABLE)
    return override or NVML_LIBRARY, bool(override)


def override_problem(path):
    """Why an override path cannot be a shared object, checked before dlopen (a FIFO would block it)."""
    import stat
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        return "cannot stat it: %s" % (error.strerror or error)
    if not stat.S_ISREG(mode):
        from diagnostics_core.text import file_kind
        return "not a regular file (%s)" % file_kind(mode)
    return None


def probe_nvml(stage=lambda name: None):
    """GPU facts from NVML through ctypes: no CUDA call, no context, no GPU memory.

    stage(name) announces each part (load, init, devices) to the parent, so a
    crash or hang is attributed to the part that caused it.
    """
    import ctypes
    library, override = nvml_library()
    facts = {"available": False, "library": library, "library_override": override}
    problem = override_problem(library) if override else None
    if problem:
        facts.update(reason="library-invalid", message=problem)
        return facts
    stage("load")  # dlopen runs the library's constructors
    try:
        nvml = ctypes.CDLL(library)
    except OSError as error:
        # The override names a file that exists but does not load: not "no driver".
        facts.update(reason="library-invalid" if override else "library-not-found", message=str(error)[:500])
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

    stage("init")
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
        facts["device_count_reported"] = count.value
        if count.value > NVML_DEVICE_LIMIT:
            facts["devices_capped_at"] = NVML_DEVICE_LIMIT
        stage("devices")
        for index in range(min(count.value, NVML_DEVICE_LIMIT)):
            facts["devices"].append(nvml_device(nvml, call, describe, index))
        return facts
    finally:
        stage("shutdown")
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


def child_steps(config):
    steps = ["static", "nvml", "torch", "cuda", "distributed"]
    steps += ["ext:" + module for module, _ in EXTENSIONS]
    steps += ["pyg", "smoke:pyg-lib", "smoke:torch-sparse", "features"]
    return [s for s in steps if s not in config.get("skip", {})]


def run_child_step(step, results, config, reporter):
    if step == "static":  # the parent's bounds: reads end by static_by, the stage is waited for until static_wait
        return gather_static_facts_bounded(config["static_by"], config["static_wait"])
    if step == "nvml":
        return probe_nvml(lambda name: reporter.send({"event": "stage", "step": step, "stage": name}))
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
            data = run_child_step(step, results, config, reporter)
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


class ChildAttempt(object):
    """One run of the child: its records, how it ended and the step it was in."""

    def __init__(self):
        self.results = {}
        self.current = None
        self.current_started = None
        self.stage = None  # the part of the current step it announced last (nvml: load, init, ...)
        self.done = False
        self.started = False  # a first record arrived
        self.returncode = None
        self.killed_for = None  # "hung" or "deadline"
        self.stderr_tail = ""


def entry_script():
    """What the child runs: check_sampling_backends.py beside this package, or the zipapp holding it."""
    parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.join(parent, "check_sampling_backends.py") if os.path.isdir(parent) else parent


def run_child_attempt(python, config, deadline, hang_limit, hang_steps, on_started=None):
    attempt = ChildAttempt()
    command = [python, "-B", entry_script(), CHILD_FLAG, json.dumps(config)]

    def on_record(stamp, record):
        if on_started is not None and not attempt.started:
            attempt.started = True
            on_started()
        event = record.pop("event", None)
        if event == "begin":
            attempt.current, attempt.current_started, attempt.stage = record.get("step"), stamp, None
        elif event == "stage" and record.get("step") == attempt.current:
            attempt.stage = record.get("stage")
        elif event == "result":
            attempt.results[record.pop("step", None)] = record
            attempt.current, attempt.current_started, attempt.stage = None, None, None
        elif event == "done":
            attempt.done = True

    def watch(now):
        if (attempt.current in hang_steps and attempt.current_started is not None
                and now - attempt.current_started > hang_limit):
            return "hung"
        return None

    try:
        outcome = run_sandboxed(command, child_environment(), deadline, on_record, watch)
    except Interrupted as stop:  # the child is ended; the document says which step it was in
        if attempt.current is not None:
            stop.running = {"probe_step": attempt.current, "interpreter": python}
        raise
    attempt.returncode = outcome.returncode
    attempt.killed_for = outcome.killed_for
    attempt.stderr_tail = outcome.stderr_tail[-2000:]
    attempt.descendants_ended = outcome.descendants_ended
    attempt.subreaper = outcome.subreaper
    return attempt


def run_import_probe(python, run, on_started=None):
    """Run the child (again, without culprits) until all steps are answered or time is up; every bound is the
    run's (the checker's stage table). on_started() is called once, when a child's first record proves the
    interpreter runs the probe script (a wrapper that runs only -c programs never gets there)."""
    hang_limit = run.bounds["hang"]
    if on_started is not None:
        said, announce = [], on_started

        def on_started():  # once, whichever attempt starts first
            if not said:
                said.append(True)
                announce()
    hang_steps = set(["ext:" + m for m, _ in EXTENSIONS]
                     + ["smoke:pyg-lib", "smoke:torch-sparse", "features", "nvml", "cuda", "distributed"])
    config = {"skip": {}, "block": []}
    results, attempts, culprits = {}, [], {}
    while time.time() < run.by("probe"):
        attempt_started = time.time()
        # The static step reads the user's files: what blocks is abandoned within a step's limit.
        config["static_by"] = min(attempt_started + hang_limit, run.by("static"))
        config["static_wait"] = min(attempt_started + run.bounds["step_wait"], run.by("static_wait"))
        attempt = run_child_attempt(python, config, run.deadline, hang_limit, hang_steps, on_started)
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
        if attempt.stage:
            culprits[culprit]["stage"] = attempt.stage
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
    for key in ("error", "signal", "returncode", "stderr_tail", "seconds", "stage"):
        if record.get(key) is not None:
            outcome[key] = record[key]
    return outcome
