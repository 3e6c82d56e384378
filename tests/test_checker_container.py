"""The checker sees the container first, run as users run it under real limits: a private 64 MB /dev/shm (a
mount namespace; the host's /dev/shm stays as it was), a real cgroup with a CPU quota and a memory limit, and
real open-files limits. The parsing of these facts from fixture trees: tests/fast/test_checker_container_facts.py."""

import os
import shutil
import subprocess
import sys
import time

import pytest

from conftest import CHECKER, ROOT, clean_env, invoke_checker, load_modules

MiB, GiB = 1 << 20, 1 << 30


def container_module():
    return load_modules(["diagnostics_core.container"])


def need_root_and_unshare():
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("a private /dev/shm needs root and unshare (util-linux); enable: run the tests as root with "
                    "util-linux installed (apt-get install -y util-linux)")


def in_private_shm(size, *args):
    """The checker in a mount namespace of its own whose /dev/shm is a fresh tmpfs of `size` (mount's syntax)."""
    script = 'mount -t tmpfs -o size=%s tmpfs /dev/shm && exec "$@"' % size
    command = ["unshare", "-m", "sh", "-c", script, "sh", sys.executable, str(CHECKER)] + list(args)
    completed = subprocess.run(command, capture_output=True, timeout=240, env=clean_env(), stdin=subprocess.DEVNULL)
    from conftest import load_schema, strict_json, validate
    document = strict_json(completed.stdout)
    validate(document, load_schema())
    assert document["exit_code"] == completed.returncode, completed.stderr[-2000:]
    return document


def shm_line():
    with open("/proc/self/mountinfo") as handle:
        return [line for line in handle if " /dev/shm " in line]


@pytest.mark.finding("container-shm-small")
@pytest.mark.parametrize("mode", [["--static-only"], []], ids=["static-only", "full-probe"])
def test_a_private_64mb_dev_shm_is_named_with_the_planner_command(mode):
    need_root_and_unshare()
    host_before = shm_line()
    document = in_private_shm("64m", "--full", *mode)
    shm = document["container"]["shm"]
    assert shm["total_bytes"] == 64 * MiB and shm["fstype"] == "tmpfs" and shm["size_option"] == "65536k"
    [found] = [f for f in document["findings"] if f["id"] == "container-shm-small"]
    assert found["severity"] == "warning" and found["evidence"]["docker_default"] is True
    assert "%s --data GRAPH.pt --num-workers 4 --shm 64MiB  # " % (ROOT / "scripts" / "plan_capacity.py") \
        in found["fix"]
    assert shm_line() == host_before  # the host's /dev/shm was never touched
    # The same checker in a 2 GiB /dev/shm: nothing to say.
    roomy = in_private_shm("2g", "--static-only")
    assert roomy["container"]["shm"]["total_bytes"] == 2 * GiB
    assert not [f for f in roomy["findings"] if f["id"].startswith("container-shm")]


class Cgroup:
    """A child of this process's own cgroup (v1 or v2) for one controller, removed at the end."""

    def __init__(self, controller):
        self.version, parent, _ = container_module().cgroup_folder("/", controller)
        if self.version is None:
            pytest.skip("no %s cgroup controller visible here (/proc/self/cgroup); enable: a Linux host with "
                        "cgroups mounted under /sys/fs/cgroup, tests run as root" % controller)
        self.folder = os.path.join(parent, "scalable-distributed-test-%d-%s" % (os.getpid(), controller))
        try:
            os.mkdir(self.folder)
        except OSError as error:
            pytest.skip("cannot make a %s cgroup under %s (%s); enable: run the tests as root on a host whose "
                        "cgroup file system is writable" % (controller, parent, error.strerror))

    def write(self, name, value):
        try:
            with open(os.path.join(self.folder, name), "w") as handle:
                handle.write(value)
        except OSError as error:
            self.remove()
            pytest.skip("cannot set %s in a child cgroup (%s; cgroup v2 needs the controller in the parent's "
                        "cgroup.subtree_control); enable: a cgroup v1 host, or v2 with +cpu +memory delegated"
                        % (name, error.strerror))

    def enter(self):
        with open(os.path.join(self.folder, "cgroup.procs"), "w") as handle:
            handle.write(str(os.getpid()))

    def remove(self):
        for _ in range(50):  # the checker's processes leave the cgroup as they are reaped
            try:
                os.rmdir(self.folder)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)


@pytest.mark.finding("container-cpu-quota", "container-memory-limit")
def test_a_real_cgroup_quota_and_memory_limit_are_read_and_flagged():
    if os.geteuid() != 0:
        pytest.skip("making a cgroup needs root; enable: run the tests as root")
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("a quota below the affinity needs at least two usable cores")
    cpu, memory = Cgroup("cpu"), Cgroup("memory")
    try:
        if cpu.version == 2:
            cpu.write("cpu.max", "50000 100000")
        else:
            cpu.write("cpu.cfs_period_us", "100000")
            cpu.write("cpu.cfs_quota_us", "50000")
        memory.write("memory.max" if memory.version == 2 else "memory.limit_in_bytes", str(GiB))

        def enter():
            cpu.enter()
            memory.enter()
        result = invoke_checker("--static-only", preexec_fn=enter)
    finally:
        cpu.remove()
        memory.remove()
    facts = result.json["container"]
    assert facts["cgroup_cpu"]["cores"] == 0.5 and facts["cgroup_cpu"]["limited_at"] == cpu.folder
    assert facts["cgroup_cpu"]["version"] == cpu.version
    assert facts["cgroup_memory"]["limit_bytes"] == GiB and facts["cgroup_memory"]["limited_at"] == memory.folder
    assert facts["cores"] == {"affinity": len(os.sched_getaffinity(0)), "cgroup_cores": 0.5, "usable": 1}
    quota = result.only("container-cpu-quota")
    assert quota["evidence"]["threads_to_set"] == 1 and quota["fix"].startswith("export OMP_NUM_THREADS=1  # ")
    limit = result.only("container-memory-limit")
    assert limit["evidence"]["limit_bytes"] == GiB and "--host-ram 1GiB  # " in limit["fix"]
    assert not os.path.exists(cpu.folder) and not os.path.exists(memory.folder)
    # The thread-count finding gives the same value: the quota, not the affinity, is what runs.
    assert result.only("cpu-threads-unset")["fix"] == "export OMP_NUM_THREADS=1"


def limited(soft, hard):
    def apply():
        import resource
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return apply


@pytest.mark.finding("open-files-low")
def test_a_low_open_files_limit_and_a_fix_that_works_under_the_hard_limit(tmp_path):
    import resource
    if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 8192:
        pytest.skip("the hard open-files limit here is below 8192; enable: run the tests with ulimit -Hn 8192 or more")
    raisable = invoke_checker("--static-only", preexec_fn=limited(1024, 8192))
    assert raisable.json["container"]["open_files"] == {"soft": 1024, "hard": 8192}
    found = raisable.only("open-files-low")
    assert found["severity"] == "info" and found["fix"].startswith("ulimit -Sn 8192  # ")
    # The fix, run as printed before the checker (from another folder, the same hard limit): nothing left to say.
    step = found["fix"].split("  #")[0]
    fixed = subprocess.run(["bash", "-c", '%s && exec "$0" "$1" --static-only' % step, sys.executable, str(CHECKER)],
                           capture_output=True, text=True, timeout=120, env=clean_env(), cwd=str(tmp_path),
                           preexec_fn=limited(1024, 8192))
    import json
    document = json.loads(fixed.stdout)
    assert document["container"]["open_files"]["soft"] == 8192
    assert "open-files-low" not in [f["id"] for f in document["findings"]]
    # A hard limit of 1024: `ulimit -n 4096` itself fails there, so the fix is the sharing strategy.
    stuck = invoke_checker("--static-only", preexec_fn=limited(1024, 1024)).only("open-files-low")
    assert stuck["severity"] == "warning"
    assert stuck["fix"].startswith("torch.multiprocessing.set_sharing_strategy('file_system')")
    assert "The hard limit (ulimit -Hn) is 1024" in stuck["fix"]
    refused = subprocess.run(["bash", "-c", "ulimit -n 4096"], capture_output=True, text=True,
                             preexec_fn=limited(1024, 1024))
    assert refused.returncode != 0 and "ulimit" in refused.stderr
