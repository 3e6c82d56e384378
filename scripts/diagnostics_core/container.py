"""The limits a container or a batch scheduler's cgroup sets on this process, read as plain data: the size
and free space of /dev/shm, the cgroup's CPU quota and memory limit (cgroup v2 or v1), the host's RAM, the
CPUs this process may run on and the open-files limits. Standard library only; nothing is written or run.

Each reader takes `root`, the folder the system paths are read under ("/" here; a folder of fixture files
in tests), so tests read fixture trees through the same code. The checker reports these facts and flags
the ones that break PyG jobs; the capacity planner takes its --shm, --host-ram and --cores defaults from
get_shm(), get_usable_memory() and get_usable_cores().
"""

import os

from .text import read_regular

SHM = "/dev/shm"
MOUNTINFO = "/proc/self/mountinfo"
CGROUP = "/proc/self/cgroup"
MEMINFO = "/proc/meminfo"
# cgroup v1 writes "no limit" as the largest page-aligned counter (9223372036854771712 on 64-bit kernels):
# anything this large is no limit at all.
NO_LIMIT_FROM = 1 << 62


def read(root, path, limit=1 << 20):
    """The text of `path` under `root`, or None (absent, unreadable, or not a regular file)."""
    return read_regular(os.path.join(root, path.lstrip("/")), limit)[0]


def unescape(field):
    r"""A mountinfo path field: the kernel writes space, tab, newline and backslash as \040, \011, \012, \134."""
    out, index = [], 0
    while index < len(field):
        if field[index] == "\\" and field[index + 1:index + 4].isdigit() and len(field) >= index + 4:
            out.append(chr(int(field[index + 1:index + 4], 8)))
            index += 4
        else:
            out.append(field[index])
            index += 1
    return "".join(out)


def parse_mountinfo(text):
    """/proc/self/mountinfo -> [{"root", "mount_point", "fstype", "source", "options", "super_options"}],
    in the file's order (a later mount on the same point hides the earlier ones)."""
    mounts = []
    for line in (text or "").splitlines():
        before, separator, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if not separator or len(fields) < 6 or len(tail) < 2:
            continue
        mounts.append({"root": unescape(fields[3]), "mount_point": unescape(fields[4]), "fstype": tail[0],
                       "source": unescape(tail[1]), "options": fields[5].split(","),
                       "super_options": tail[2].split(",") if len(tail) > 2 else []})
    return mounts


def mount_at(mounts, point):
    """The mount that is visible at `point` (the last one mounted there), or None."""
    found = [mount for mount in mounts if mount["mount_point"] == point]
    return found[-1] if found else None


def get_shm(root="/", statvfs=os.statvfs, path=SHM):
    """/dev/shm: {"path", "total_bytes", "free_bytes", "fstype", "size_option"}, or None where there is none.
    The sizes come from statvfs (what a process sees there now); the mount line says what set them."""
    try:
        info = statvfs(os.path.join(root, path.lstrip("/")))
    except (OSError, AttributeError):
        return None
    mount = mount_at(parse_mountinfo(read(root, MOUNTINFO)), path) or {}
    size = [option.split("=", 1)[1] for option in mount.get("super_options", ()) if option.startswith("size=")]
    return {"path": path, "total_bytes": info.f_blocks * info.f_frsize, "free_bytes": info.f_bavail * info.f_frsize,
            "fstype": mount.get("fstype"), "size_option": size[-1] if size else None}


def parse_cgroup(text):
    """/proc/self/cgroup -> [(hierarchy id, [controllers], path)]; cgroup v2's line is ("0", [], path)."""
    entries = []
    for line in (text or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            entries.append((parts[0], [name for name in parts[1].split(",") if name], parts[2]))
    return entries


def cgroup_folder(root, controller):
    """(cgroup version, the folder of this process's cgroup for `controller`, the hierarchy's mount point),
    or (None, None, None). A v1 hierarchy that has the controller wins (hybrid hosts mount v2 beside it)."""
    mounts = parse_mountinfo(read(root, MOUNTINFO))
    entries = parse_cgroup(read(root, CGROUP))
    for _, controllers, path in entries:
        if controller in controllers:
            for mount in mounts:
                if mount["fstype"] == "cgroup" and controller in mount["super_options"]:
                    return 1, folder_in(mount, path), mount["mount_point"]
    for hierarchy, controllers, path in entries:
        if hierarchy == "0" and not controllers:
            for mount in mounts:
                if mount["fstype"] == "cgroup2":
                    enabled = (read(root, os.path.join(mount["mount_point"], "cgroup.controllers")) or "").split()
                    if controller in enabled:
                        return 2, folder_in(mount, path), mount["mount_point"]
    return None, None, None


def folder_in(mount, path):
    """Where the cgroup `path` (as /proc/self/cgroup names it) lies under the hierarchy's mount. A container
    with its own cgroup namespace sees "/" for both; one without sees its cgroup below the mount's root."""
    relative = path[len(mount["root"]):] if path.startswith(mount["root"].rstrip("/") + "/") else (
        "" if path == mount["root"] else path)
    return os.path.normpath(mount["mount_point"] + "/" + relative.lstrip("/"))


def ancestors(folder, mount_point):
    """`folder` and each parent up to the hierarchy's mount point: a parent's limit binds its children."""
    chain = [folder]
    while folder != mount_point and folder.startswith(mount_point.rstrip("/") + "/"):
        folder = os.path.dirname(folder)
        chain.append(folder)
    return chain


def whole_number(text):
    try:
        return int((text or "").strip())
    except ValueError:
        return None


def cpu_limit(root, version, folder):
    """(quota in microseconds or None, period in microseconds) of one cgroup folder; (None, None) if unread."""
    if version == 2:
        words = (read(root, os.path.join(folder, "cpu.max")) or "").split()
        if len(words) != 2:
            return None, None
        return (None if words[0] == "max" else whole_number(words[0])), whole_number(words[1])
    quota = whole_number(read(root, os.path.join(folder, "cpu.cfs_quota_us")))
    period = whole_number(read(root, os.path.join(folder, "cpu.cfs_period_us")))
    return (None if quota is None or quota < 0 else quota), period


def get_cgroup_cpu(root="/"):
    """The cgroup CPU quota: {"version", "folder", "quota_us", "period_us", "cores", "limited_at", "file"},
    cores = quota / period of the tightest folder on the way up (None: no quota); None without cgroups."""
    version, folder, mount_point = cgroup_folder(root, "cpu")
    if version is None:
        return None
    facts = {"version": version, "folder": folder, "quota_us": None, "period_us": None, "cores": None,
             "limited_at": None, "file": "cpu.max" if version == 2 else "cpu.cfs_quota_us"}
    for candidate in ancestors(folder, mount_point):
        quota, period = cpu_limit(root, version, candidate)
        if quota is None or not period:
            continue
        cores = float(quota) / period
        if facts["cores"] is None or cores < facts["cores"]:
            facts.update(quota_us=quota, period_us=period, cores=round(cores, 3), limited_at=candidate)
    return facts


def get_cgroup_memory(root="/"):
    """The cgroup memory limit: {"version", "folder", "limit_bytes", "limited_at", "file"} (limit_bytes None:
    no limit), the tightest on the way up; None without cgroups."""
    version, folder, mount_point = cgroup_folder(root, "memory")
    if version is None:
        return None
    name = "memory.max" if version == 2 else "memory.limit_in_bytes"
    facts = {"version": version, "folder": folder, "limit_bytes": None, "limited_at": None, "file": name}
    for candidate in ancestors(folder, mount_point):
        text = (read(root, os.path.join(candidate, name)) or "").strip()
        limit = whole_number(text)
        if limit is None or limit >= NO_LIMIT_FROM:  # "max" (v2), the v1 ceiling, or unreadable
            continue
        if facts["limit_bytes"] is None or limit < facts["limit_bytes"]:
            facts.update(limit_bytes=limit, limited_at=candidate)
    return facts


def get_host_memory(root="/"):
    """The machine's RAM in bytes (MemTotal of /proc/meminfo), or None where it is not there."""
    for line in (read(root, MEMINFO) or "").splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == "MemTotal:" and fields[1].isdigit():
            return int(fields[1]) * (1024 if fields[2:3] == ["kB"] else 1)
    return None


def get_affinity():
    """How many CPUs this process may run on (sched_getaffinity; all of them where it does not exist)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def get_usable_cores(root="/", affinity=None):
    """{"affinity", "cgroup_cores", "usable"}: the whole cores a job may keep busy, the affinity count or the
    cgroup quota rounded down (at least 1), whichever is smaller. `affinity` None: this process's."""
    affinity = get_affinity() if affinity is None else affinity
    cpu = get_cgroup_cpu(root) or {}
    quota = cpu.get("cores")
    usable = affinity if quota is None else max(1, min(affinity or int(quota), int(quota)))
    return {"affinity": affinity, "cgroup_cores": quota, "usable": usable}


def get_usable_memory(root="/"):
    """{"host_bytes", "cgroup_limit_bytes", "usable_bytes"}: the RAM a job may use before it is killed."""
    host = get_host_memory(root)
    limit = (get_cgroup_memory(root) or {}).get("limit_bytes")
    usable = min(value for value in (host, limit) if value is not None) if host or limit else None
    return {"host_bytes": host, "cgroup_limit_bytes": limit, "usable_bytes": usable}


def get_open_files():
    """RLIMIT_NOFILE: {"soft", "hard"} (None: unlimited); None where the resource module does not exist."""
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError, AttributeError):
        return None

    def value(limit):
        return None if limit == getattr(resource, "RLIM_INFINITY", -1) or limit < 0 else limit
    return {"soft": value(soft), "hard": value(hard)}


def get_container(root="/", statvfs=os.statvfs, affinity=None):
    """Every fact above, as the checker reports them (its "container" section)."""
    return {"shm": get_shm(root, statvfs), "cgroup_cpu": get_cgroup_cpu(root),
            "cgroup_memory": get_cgroup_memory(root), "host_memory_bytes": get_host_memory(root),
            "cores": get_usable_cores(root, affinity), "open_files": get_open_files()}
