"""Static stage: facts read without importing torch or any extension (metadata, CPU, environment,
name resolution)."""

import os
import re
import sys
import time

from diagnostics_core.text import read_regular
from diagnostics_core.wheels import EXTENSION_DIST
from .parsing import (compress_cpu_list, cuda_variant, normalise_name, parse_int_variable, parse_local_tag,
                      parse_slurm_task_counts)
from .tables import (HOSTS_FILE, LAUNCH_INT_VARIABLES, LAUNCH_STR_VARIABLES, SLURM_TASK_COUNT_VARIABLES,
                     THREAD_VARIABLES, TRACKED_DISTRIBUTIONS)


UNREADABLE_LIMIT = 50  # paths listed; the count covers the rest
# A metadata read, a directory listing or a find_spec takes far less than this even on a
# network file system; one that takes longer is hung, and the rest of the stage goes on.
OPERATION_LIMIT_S = 2.0


class FileAccess(object):
    """Every touch of the user's file system in the static stage goes through here.

    Only regular files are read (a FIFO or device would block). With a
    deadline, each operation runs on a worker thread and is waited for only
    until the deadline: one that blocks there (a hung NFS or FUSE mount) is
    abandoned with its thread and its path listed, and the stage goes on with
    what it has. Everything not read is listed in `unreadable`.
    """

    def __init__(self, deadline=None):
        self.deadline = deadline
        self.unreadable = []
        self.unreadable_count = 0
        self.worker = None
        self.section = None

    def note(self, path, problem):
        self.unreadable_count += 1
        if len(self.unreadable) < UNREADABLE_LIMIT:
            self.unreadable.append({"path": path, "problem": problem})

    def run(self, path, function, default):
        """function() bounded by the deadline; `default` (and `path` listed) when it does not return."""
        if self.deadline is None:
            return function()
        remaining = self.deadline - time.time()
        if remaining <= 0:
            self.note(path, "not read: the static stage's deadline had passed")
            return default
        if self.worker is None:
            self.worker = BoundedWorker()
        answered, value = self.worker.call(function, min(remaining, OPERATION_LIMIT_S))
        if not answered:
            self.worker = None  # it is stuck in that call; a fresh one takes the next
            self.note(path, "blocked: no answer within %gs (a hung mount or import)" % min(remaining, OPERATION_LIMIT_S))
            return default
        return value

    def text(self, path, limit=1 << 20):
        text, problem = self.run(path, lambda: read_regular(path, limit), (None, None))
        if problem:
            self.note(path, problem)
        return text

    def listdir(self, path):
        """Names in a directory, [] when it is absent or unreadable (the latter listed)."""
        def names():
            try:
                return os.listdir(path) if os.path.isdir(path) else []
            except OSError as error:
                return error
        found = self.run(path, names, [])
        if isinstance(found, OSError):
            self.note(path, "cannot list: %s" % (found.strerror or found))
            return []
        return found

    def isdir(self, path):
        return self.run(path, lambda: os.path.isdir(path), False)

    def facts(self):
        return {"paths": self.unreadable, "count": self.unreadable_count}


class BoundedWorker(object):
    """A daemon thread that runs one call at a time; the caller waits only as long as it chooses."""

    def __init__(self):
        import queue
        import threading
        self.jobs = queue.Queue()
        thread = threading.Thread(target=self.loop, name="static-stage-io")
        thread.daemon = True
        thread.start()

    def loop(self):
        while True:
            function, box, done = self.jobs.get()
            try:
                box.append(function())
            except Exception as error:  # noqa: BLE001 - reported by the caller as a problem
                box.append(error)
            done.set()

    def call(self, function, timeout):
        import threading
        box, done = [], threading.Event()
        self.jobs.put((function, box, done))
        if not done.wait(timeout):
            return False, None
        if isinstance(box[0], Exception) and not isinstance(box[0], OSError):
            raise box[0]
        return True, box[0]


ACCESS = FileAccess()  # replaced for each run of the stage (gather_static_facts)


def read_text(path, limit=1 << 20):
    return ACCESS.text(path, limit)


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
        "build_prerequisites": get_build_prerequisites(),
    }


def get_build_prerequisites():
    """What `pip install --no-build-isolation` of a PyG extension's sdist needs here, seen without
    running anything: setuptools (before 70.1 its bdist_wheel is the `wheel` package's), a C++
    compiler on PATH, the Python headers, and scipy (torch-sparse imports it)."""
    import shutil
    import sysconfig
    include = sysconfig.get_paths().get("include") or ""
    return {
        "setuptools": distribution_version("setuptools"),
        "wheel": distribution_version("wheel"),
        "scipy": distribution_version("scipy"),
        "compiler": os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++"),
        "python_headers": os.path.isfile(os.path.join(include, "Python.h")),
    }


def distribution_version(name):
    try:
        import importlib.metadata as metadata
        return metadata.version(name)
    except Exception:  # noqa: BLE001 - not installed, or metadata a build left broken
        return None


def has_pip():
    """Whether `python -m pip` can work here, found without importing pip (that takes ~200 ms)."""
    import importlib.util

    def find():
        try:
            return importlib.util.find_spec("pip") is not None
        except (ImportError, ValueError):
            return False
    return ACCESS.run("find_spec('pip') on sys.path", find, None)


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
        if entry in seen_entries:
            continue
        seen_entries.add(entry)
        for name in ACCESS.listdir(entry):
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
    if metadata is None and is_egg and not ACCESS.isdir(path):
        metadata = read_text(path, 65536)  # an .egg-info that is a file holds PKG-INFO itself
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
    if not ACCESS.isdir(conda_meta):
        return None
    records = []
    for name in sorted(ACCESS.listdir(conda_meta)):
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
        folder = pending.pop()
        entries = ACCESS.run(folder, lambda: scan_folder(folder), [])
        seen += len(entries)
        for path, name, is_dir in entries:
            if is_dir:
                pending.append(path)
            elif name.startswith(prefix) and name.endswith(".whl"):
                found.append({"path": path, "same_binary": bool(installed) and installed == cached_record_lines(
                    path, record)})
    return found


def scan_folder(folder):
    """[(path, name, is a directory)] of a folder, [] when it cannot be listed."""
    try:
        with os.scandir(folder) as entries:
            return [(e.path, e.name, e.is_dir(follow_symlinks=False)) for e in entries]
    except OSError:
        return []


def cached_record_lines(wheel_path, record):
    import io
    import zipfile
    data = ACCESS.run(wheel_path, lambda: read_regular_bytes(wheel_path), None)
    if data is None:
        return None
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as wheel:
            name = os.path.basename(record["metadata_dir"]) + "/RECORD"
            return compiled_record_lines(wheel.read(name).decode("utf-8", "replace"))
    except (KeyError, zipfile.BadZipFile, OSError, RuntimeError, ValueError):
        return None


WHEEL_READ_LIMIT = 1 << 28  # a cached wheel larger than this is not compared


def read_regular_bytes(path):
    """A cached wheel's bytes (regular files only, never a FIFO), or None."""
    import stat
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > WHEEL_READ_LIMIT:
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(WHEEL_READ_LIMIT)
    except OSError:
        return None
    finally:
        os.close(fd)


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

    def find():
        try:
            return importlib.util.find_spec(module)
        except (ImportError, ValueError):
            return None
    spec = ACCESS.run("find_spec(%r) on sys.path" % module, find, None)
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
    for name in sorted(ACCESS.listdir(node_dir)):
        if re.match(r"^node\d+$", name):
            cpulist = read_text(os.path.join(node_dir, name, "cpulist"), 4096)
            if cpulist is not None:
                numa.append({"node": int(name[4:]), "cpus": cpulist.strip()})
    cores = set()
    cpu_dir = os.path.join(base, "cpu")
    for name in ACCESS.listdir(cpu_dir):
        if re.match(r"^cpu\d+$", name):
            topology = os.path.join(cpu_dir, name, "topology")
            core = read_text(os.path.join(topology, "core_id"), 64)
            package = read_text(os.path.join(topology, "physical_package_id"), 64)
            if core is not None and package is not None:
                cores.add((package.strip(), core.strip()))
    return {"numa_nodes": numa or None, "physical_cores": len(cores) or None}


def get_cpu_facts(import_psutil=True):
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
    if import_psutil:
        facts["psutil_physical_cores"] = ACCESS.run("import psutil", psutil_physical_cores, None)
        if facts["physical_cores"] is None and facts["psutil_physical_cores"] is not None:
            facts["physical_cores"] = facts["psutil_physical_cores"]
            facts["physical_cores_source"] = "psutil"
    return facts


def psutil_physical_cores():
    try:
        import psutil  # optional; PyG's enable_cpu_affinity needs it anyway
        return psutil.cpu_count(logical=False)
    except Exception:  # psutil absent or broken: sysfs is enough
        return None


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
    if ACCESS.isdir("/sys/class/net"):
        interfaces = sorted(ACCESS.listdir("/sys/class/net"))
    hostname = os.uname()[1] if hasattr(os, "uname") else None
    return {
        "threads": threads,
        "launch": launch,
        "network_interfaces": interfaces,
        "launcher": detect_launcher(),
        "hostname": hostname,
        "name_resolution": get_name_resolution_facts(hostname, os.environ.get("MASTER_ADDR")),
        "default_route_interface": default_route_interface(),
    }


def default_route_interface(path="/proc/net/route"):
    """The interface of this node's IPv4 default route (Linux; None elsewhere or without one)."""
    text = read_text(path, 1 << 16) or ""
    routes = [line.split() for line in text.splitlines()[1:]]
    # Fields: Iface Destination Gateway Flags RefCnt Use Metric Mask ...; the lowest metric wins.
    defaults = [r for r in routes if len(r) > 7 and r[1] == "00000000" and r[7] == "00000000"]
    defaults.sort(key=lambda r: int(r[6]) if r[6].isdigit() else 0)
    return defaults[0][0] if defaults else None


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


def get_container_facts():
    """What a container or a scheduler's cgroup limits (diagnostics_core.container): /dev/shm, the cgroup's CPU
    quota and memory limit, the host's RAM, the usable cores, the open-files limits. One bounded operation:
    a statvfs of /dev/shm could block like any mount."""
    from diagnostics_core import container
    return ACCESS.run("/dev/shm, /proc/self/cgroup, /sys/fs/cgroup (container limits)", container.get_container, None)


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


def gather_static_facts(deadline=None, import_psutil=True):
    """The static stage. With a deadline (wall time), no file system operation runs past it: what it
    could not read is listed under "files" instead."""
    global ACCESS
    ACCESS = FileAccess(deadline)
    try:
        facts = {}
        for section, gather in (("python", get_python_facts), ("distributions", get_distribution_facts),
                                ("torch_build", get_torch_build_facts), ("pyg_source", get_pyg_source_facts),
                                ("cpu", lambda: get_cpu_facts(import_psutil)),
                                ("environment", get_environment_facts), ("container", get_container_facts)):
            ACCESS.section = section  # named if the stage as a whole overruns
            facts[section] = gather()
        # What the stage could not read (FIFOs, devices, denied, blocked mounts), for files-unreadable.
        facts["environment"]["unreadable_files"] = ACCESS.facts()
        return facts
    finally:
        ACCESS = FileAccess()


class StaticStageTimeout(Exception):
    """The static stage did not finish by its deadline (blocked outside any bounded operation)."""

    def __init__(self, message, section):
        Exception.__init__(self, message)
        self.section = section


def gather_static_facts_bounded(deadline, wait_until, import_psutil=True):
    """gather_static_facts on a daemon thread: no file operation runs past `deadline`, and the thread is waited
    for until `wait_until` at most (both absolute, from the run's stage table).

    Each file operation is bounded already; this bounds what is not (an
    import, a find_spec on a hung mount) so the stage as a whole ends in time.
    """
    import threading
    box = []

    def work():
        try:
            box.append(("ok", gather_static_facts(deadline, import_psutil)))
        except Exception as error:  # noqa: BLE001 - handed to the caller
            box.append(("error", error))
    thread = threading.Thread(target=work, name="static-stage")
    thread.daemon = True
    thread.start()
    thread.join(max(0.0, wait_until - time.time()))
    if not box:
        raise StaticStageTimeout("the static stage did not finish within its deadline (blocked in its %s part)"
                                 % ACCESS.section, ACCESS.section)
    status, value = box[0]
    if status == "error":
        raise value
    return value
