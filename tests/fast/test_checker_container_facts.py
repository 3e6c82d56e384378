"""diagnostics_core.container on fixture trees: /proc/self/mountinfo, /proc/self/cgroup and /sys/fs/cgroup laid
out as cgroup v2, v1 and hybrid hosts and containers write them, read through the same code as on the real
machine (every reader takes the root folder). The real limits: tests/test_checker_container.py."""

import os

import pytest

from diagnostics_core import container

GiB, MiB = 1 << 30, 1 << 20

V2_MOUNTS = ("24 30 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
             "25 30 0:23 / /dev/shm rw,nosuid,nodev - tmpfs shm rw,size=65536k\n")
V1_MOUNTS = ("31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755\n"
             "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
             "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
             "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
             "25 24 0:23 / /dev/shm rw - tmpfs tmpfs rw,size=24683784k\n")


def tree(root, files):
    for path, text in files.items():
        full = os.path.join(str(root), path.lstrip("/"))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as handle:
            handle.write(text)
    return str(root)


def v2(root, cgroup="/", files=None, controllers="cpuset cpu io memory pids"):
    base = "/sys/fs/cgroup" + ("" if cgroup == "/" else cgroup)
    layout = {"/proc/self/mountinfo": V2_MOUNTS, "/proc/self/cgroup": "0::%s\n" % cgroup,
              "/sys/fs/cgroup/cgroup.controllers": controllers + "\n"}
    layout.update((path.replace("@", base), text) for path, text in (files or {}).items())
    return tree(root, layout)


def v1(root, cpu_path="/", memory_path="/", files=None, mounts=V1_MOUNTS):
    layout = {"/proc/self/mountinfo": mounts,
              "/proc/self/cgroup": "12:memory:%s\n4:cpu,cpuacct:%s\n0::/\n" % (memory_path, cpu_path)}
    layout.update(files or {})
    return tree(root, layout)


@pytest.mark.parametrize("text, cores, quota, period", [
    ("max 100000\n", None, None, None),
    ("50000 100000\n", 0.5, 50000, 100000),
    ("200000 100000\n", 2.0, 200000, 100000),
    ("150000 100000", 1.5, 150000, 100000),
    ("max\n", None, None, None),           # malformed: no period
    ("", None, None, None),
    ("12x 100000\n", None, None, None),
])
def test_cgroup_v2_cpu_max(tmp_path, text, cores, quota, period):
    root = v2(tmp_path, files={"@/cpu.max": text})
    facts = container.get_cgroup_cpu(root)
    assert facts["version"] == 2 and facts["folder"] == "/sys/fs/cgroup" and facts["file"] == "cpu.max"
    assert (facts["cores"], facts["quota_us"], facts["period_us"]) == (cores, quota, period)


@pytest.mark.parametrize("quota, period, cores", [("-1", "100000", None), ("50000", "100000", 0.5),
                                                  ("400000", "100000", 4.0), ("25000", "50000", 0.5),
                                                  ("100000", "0", None)])
def test_cgroup_v1_cfs_quota(tmp_path, quota, period, cores):
    root = v1(tmp_path, files={"/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": quota + "\n",
                               "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": period + "\n"})
    facts = container.get_cgroup_cpu(root)
    assert facts["version"] == 1 and facts["file"] == "cpu.cfs_quota_us" and facts["cores"] == cores


def test_the_tightest_quota_on_the_way_up_wins(tmp_path):
    root = v2(tmp_path, cgroup="/job/step", files={
        "/sys/fs/cgroup/cpu.max": "max 100000\n", "/sys/fs/cgroup/job/cpu.max": "100000 100000\n",
        "/sys/fs/cgroup/job/step/cpu.max": "300000 100000\n"})
    facts = container.get_cgroup_cpu(root)
    assert facts["folder"] == "/sys/fs/cgroup/job/step"
    assert facts["cores"] == 1.0 and facts["limited_at"] == "/sys/fs/cgroup/job"


@pytest.mark.parametrize("cgroup_path, mount_root, folder", [
    ("/docker/abc", "/", "/sys/fs/cgroup/memory/docker/abc"),      # no cgroup namespace: the full path
    ("/", "/docker/abc", "/sys/fs/cgroup/memory"),                  # namespaced: the mount's root is ours
    ("/docker/abc", "/docker/abc", "/sys/fs/cgroup/memory"),
    ("/docker/abc/inner", "/docker/abc", "/sys/fs/cgroup/memory/inner"),
])
def test_a_v1_cgroup_folder_under_its_mount(tmp_path, cgroup_path, mount_root, folder):
    mounts = V1_MOUNTS.replace("35 31 0:32 / /sys/fs/cgroup/memory", "35 31 0:32 %s /sys/fs/cgroup/memory" % mount_root)
    root = v1(tmp_path, memory_path=cgroup_path, mounts=mounts)
    assert container.cgroup_folder(root, "memory") == (1, folder, "/sys/fs/cgroup/memory")


@pytest.mark.parametrize("files, limit, at", [
    ({"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, None, None),   # v1's "no limit"
    ({"/sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824\n"}, GiB, "/sys/fs/cgroup/memory"),
    ({"/sys/fs/cgroup/memory/memory.limit_in_bytes": "4294967296\n",
      "/sys/fs/cgroup/memory/job/memory.limit_in_bytes": "9223372036854771712\n"}, 4 * GiB, "/sys/fs/cgroup/memory"),
    ({"/sys/fs/cgroup/memory/memory.limit_in_bytes": "4294967296\n",
      "/sys/fs/cgroup/memory/job/memory.limit_in_bytes": "2147483648\n"}, 2 * GiB, "/sys/fs/cgroup/memory/job"),
    ({"/sys/fs/cgroup/memory/job/memory.limit_in_bytes": "garbage\n"}, None, None),
])
def test_cgroup_v1_memory_limit_on_the_way_up(tmp_path, files, limit, at):
    root = v1(tmp_path, memory_path="/job", files=files)
    facts = container.get_cgroup_memory(root)
    assert facts["version"] == 1 and facts["folder"] == "/sys/fs/cgroup/memory/job"
    assert (facts["limit_bytes"], facts["limited_at"]) == (limit, at)


@pytest.mark.parametrize("text, limit", [("max\n", None), ("8589934592\n", 8 * GiB), ("0\n", 0)])
def test_cgroup_v2_memory_max(tmp_path, text, limit):
    root = v2(tmp_path, cgroup="/user.slice", files={"@/memory.max": text})
    facts = container.get_cgroup_memory(root)
    assert facts["file"] == "memory.max" and facts["limit_bytes"] == limit


def test_a_v2_controller_not_enabled_is_no_cgroup(tmp_path):
    root = v2(tmp_path, files={"@/cpu.max": "50000 100000\n"}, controllers="memory pids")
    assert container.get_cgroup_cpu(root) is None
    assert container.get_cgroup_memory(root)["version"] == 2


def test_a_hybrid_host_reads_v1_controllers_beside_an_empty_v2_mount(tmp_path):
    root = v1(tmp_path, cpu_path="/slurm/job7", files={
        "/sys/fs/cgroup/cpu,cpuacct/slurm/job7/cpu.cfs_quota_us": "200000\n",
        "/sys/fs/cgroup/cpu,cpuacct/slurm/job7/cpu.cfs_period_us": "100000\n",
        "/sys/fs/cgroup/unified/cgroup.controllers": "\n"})
    facts = container.get_cgroup_cpu(root)
    assert facts["version"] == 1 and facts["cores"] == 2.0
    assert facts["limited_at"] == "/sys/fs/cgroup/cpu,cpuacct/slurm/job7"


@pytest.mark.parametrize("files", [{}, {"/proc/self/cgroup": ""}, {"/proc/self/cgroup": "0::/\n",
                                                                    "/proc/self/mountinfo": ""}])
def test_no_cgroup_facts_where_there_are_none(tmp_path, files):
    root = tree(tmp_path, files)
    assert container.get_cgroup_cpu(root) is None and container.get_cgroup_memory(root) is None
    assert container.get_usable_memory(root) == {"host_bytes": None, "cgroup_limit_bytes": None, "usable_bytes": None}


@pytest.mark.parametrize("line, expected", [
    (r"36 35 98:0 /mnt1 /mnt\040two rw,noatime master:1 - ext3 /dev/root rw,errors=continue",
     {"root": "/mnt1", "mount_point": "/mnt two", "fstype": "ext3", "source": "/dev/root",
      "options": ["rw", "noatime"], "super_options": ["rw", "errors=continue"]}),
    ("25 30 0:23 / /dev/shm rw - tmpfs shm rw,size=65536k",
     {"root": "/", "mount_point": "/dev/shm", "fstype": "tmpfs", "source": "shm", "options": ["rw"],
      "super_options": ["rw", "size=65536k"]}),
    (r"1 2 0:1 / /a\134b\011c rw - proc proc rw", {"root": "/", "mount_point": "/a\\b\tc", "fstype": "proc",
                                                   "source": "proc", "options": ["rw"], "super_options": ["rw"]}),
])
def test_mountinfo_lines(line, expected):
    assert container.parse_mountinfo(line + "\n") == [expected]


@pytest.mark.parametrize("text", ["", "garbage\n", "1 2 3 4 5 6\n", "1 2 0:1 / /x rw -\n"])
def test_mountinfo_lines_that_are_not_mounts_are_skipped(text):
    assert container.parse_mountinfo(text) == []


class FakeStatvfs:
    def __init__(self, blocks, available, size=4096):
        self.f_blocks, self.f_bavail, self.f_frsize = blocks, available, size


@pytest.mark.parametrize("mounts, size_option, fstype", [
    (V2_MOUNTS, "65536k", "tmpfs"),
    (V1_MOUNTS + "30 25 0:27 / /dev/shm rw - tmpfs tmpfs rw,size=1024k\n", "1024k", "tmpfs"),   # the last mount shows
    ("", None, None),
])
def test_dev_shm_sizes_come_from_statvfs_and_the_mount_says_what_set_them(tmp_path, mounts, size_option, fstype):
    root = tree(tmp_path, {"/proc/self/mountinfo": mounts, "/dev/shm/.keep": ""})
    seen = []

    def statvfs(path):
        seen.append(path)
        return FakeStatvfs(16384, 4096)
    facts = container.get_shm(root, statvfs)
    assert seen == [os.path.join(root, "dev/shm")]
    assert facts == {"path": "/dev/shm", "total_bytes": 64 * MiB, "free_bytes": 16 * MiB, "fstype": fstype,
                     "size_option": size_option}


def test_no_dev_shm_is_none(tmp_path):
    def statvfs(path):
        raise FileNotFoundError(path)
    assert container.get_shm(str(tmp_path), statvfs) is None


@pytest.mark.parametrize("text, total", [("MemTotal:       24683784 kB\nMemFree: 1 kB\n", 24683784 * 1024),
                                         ("MemFree: 1 kB\n", None), ("MemTotal: lots kB\n", None)])
def test_host_memory_from_meminfo(tmp_path, text, total):
    assert container.get_host_memory(tree(tmp_path, {"/proc/meminfo": text})) == total


@pytest.mark.parametrize("quota_text, affinity, usable", [
    ("max 100000\n", 8, 8), ("250000 100000\n", 8, 2), ("50000 100000\n", 8, 1), ("1600000 100000\n", 8, 8)])
def test_usable_cores_are_the_affinity_or_the_quota(tmp_path, quota_text, affinity, usable):
    root = v2(tmp_path, files={"@/cpu.max": quota_text})
    cores = container.get_usable_cores(root, affinity=affinity)
    assert cores["affinity"] == affinity and cores["usable"] == usable


def test_usable_memory_is_the_smaller_of_ram_and_limit(tmp_path):
    root = v2(tmp_path, files={"@/memory.max": "%d\n" % (8 * GiB), "/proc/meminfo": "MemTotal: 33554432 kB\n"})
    assert container.get_usable_memory(root) == {"host_bytes": 32 * GiB, "cgroup_limit_bytes": 8 * GiB,
                                                 "usable_bytes": 8 * GiB}


def test_this_machine_reads_without_error():
    facts = container.get_container()
    assert set(facts) == {"shm", "cgroup_cpu", "cgroup_memory", "host_memory_bytes", "cores", "open_files"}
    assert facts["cores"]["usable"] >= 1
    limits = container.get_open_files()
    assert limits is None or limits["soft"] is None or limits["hard"] is None or limits["soft"] <= limits["hard"]
