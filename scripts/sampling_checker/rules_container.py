"""Rules about the limits a container or a scheduler's cgroup sets (the "container" facts, read by
diagnostics_core.container): a small or full /dev/shm, a CPU quota below the cores the affinity allows, a
memory limit below the host's RAM, a low open-files limit. Each is what a PyG job meets before its first
batch, and none of them shows in `nproc`, `free -g` or `df` alone."""

from diagnostics_core.command import line
from diagnostics_core.contract import script_command
from .findings import finding
from .rules_launch import launch_value
from .tables import DOCKER_SHM_DEFAULT, NOFILE_LOW, NOFILE_WANTED, SHM_SMALL_BYTES

# What the planner sizes a job from: the user's graph file, a placeholder the user replaces.
PLANNER_GRAPH = ("--data", "GRAPH.pt", "--num-workers", "4")


def container_facts(facts):
    return facts.get("container") or {}


def usable_cores(facts):
    """The cores a job may keep busy: the affinity count, or the cgroup's CPU quota (whole cores, at least 1)
    where that is smaller."""
    cpu = facts.get("cpu") or {}
    allowed = (cpu.get("affinity") or {}).get("count") or cpu.get("logical_cores") or 1
    quota = (container_facts(facts).get("cgroup_cpu") or {}).get("cores")
    return allowed if not quota else max(1, min(allowed, int(quota)))


def local_processes(facts):
    """Processes of this job on this node, as the launcher says (1 when it says nothing)."""
    launch = facts["environment"]["launch"]
    return max(1, launch_value(launch, "LOCAL_WORLD_SIZE") or launch_value(launch, "SLURM_NTASKS_PER_NODE") or 1)


def export_threads(count):
    return line("export", "OMP_NUM_THREADS=%d" % count)


def size_word(count):
    """A byte count as the planner's --shm/--host-ram read it: 64MiB, 8GiB, else the bytes."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20)):
        if count and count % size == 0:
            return "%d%s" % (count // size, unit)
    return "%d" % count


def rule_shm(facts, options):
    """/dev/shm smaller than a loader with workers needs, or nearly full."""
    shm = container_facts(facts).get("shm")
    if not shm:
        return []
    total, free = shm["total_bytes"], shm["free_bytes"]
    evidence = {"path": shm["path"], "total_bytes": total, "free_bytes": free, "size_option": shm.get("size_option"),
                "docker_default": total == DOCKER_SHM_DEFAULT,
                "what_uses_it": "every batch a DataLoader worker (num_workers > 0) hands to its rank, and the "
                                "tensors torch.multiprocessing.spawn passes to each rank",
                "symptom": "Bus error, or 'unable to allocate shared memory(shm) for file </torch_...>: No space left on "
                           "device'"}
    planner = script_command("plan_capacity.py", *(PLANNER_GRAPH + ("--shm", size_word(total))))
    if total < SHM_SMALL_BYTES:
        return [finding("container-shm-small", evidence, fix=(
            "%s  # sizes /dev/shm for your job (plan-shm-too-small names the figure); then start the container with "
            "docker run --shm-size=THAT (Docker's default is 64 MB), or --ipc=host" % planner))]
    if free < SHM_SMALL_BYTES:
        return [finding("container-shm-full", evidence, fix=(
            "ls -la /dev/shm  # unrun; files left by killed jobs (torch_*, psm_*, sem.*) hold the space: remove "
            "those of your own jobs that no process holds (fuser FILE)"))]
    return []


def rule_cgroup_cpu(facts, options):
    """A CPU quota below the cores the affinity allows: torch's default thread count (one per allowed core)
    then runs more threads than the quota lets run, and the cgroup throttles them."""
    cgroup = container_facts(facts).get("cgroup_cpu") or {}
    quota = cgroup.get("cores")
    affinity = ((facts.get("cpu") or {}).get("affinity") or {}).get("count") or (facts.get("cpu") or {}).get(
        "logical_cores")
    threads = facts["environment"]["threads"]
    if not quota or not affinity or quota >= affinity or "OMP_NUM_THREADS" in threads:
        return []  # a set OMP_NUM_THREADS above the quota is cpu-threads-oversubscribed's
    per_process = max(1, usable_cores(facts) // local_processes(facts))
    return [finding("container-cpu-quota", {
        "quota_cores": quota, "quota_us": cgroup.get("quota_us"), "period_us": cgroup.get("period_us"),
        "cgroup_version": cgroup.get("version"), "limited_at": cgroup.get("limited_at"), "file": cgroup.get("file"),
        "affinity_cores": affinity, "local_processes": local_processes(facts),
        "torch_num_threads": (facts.get("torch") or {}).get("num_threads"),
        "threads_to_set": per_process},
        fix="%s  # or torch.set_num_threads(%d) before the loaders; the quota runs %g cores' worth" % (
            export_threads(per_process), per_process, quota))]


def rule_cgroup_memory(facts, options):
    """A memory limit below the host's RAM: the job is killed at the limit, whatever `free` shows."""
    container = container_facts(facts)
    cgroup = container.get("cgroup_memory") or {}
    limit, host = cgroup.get("limit_bytes"), container.get("host_memory_bytes")
    if not limit or not host or limit >= host:
        return []
    return [finding("container-memory-limit", {
        "limit_bytes": limit, "host_memory_bytes": host, "cgroup_version": cgroup.get("version"),
        "limited_at": cgroup.get("limited_at"), "file": cgroup.get("file"),
        "symptom": "the job is killed (exit 137, 'Killed'; dmesg: 'Memory cgroup out of memory') while free -g "
                   "still shows RAM"},
        fix="%s  # plans against the limit, not the host's RAM" % script_command(
            "plan_capacity.py", *(PLANNER_GRAPH + ("--host-ram", size_word(limit)))))]


def rule_open_files(facts, options):
    """A low open-files limit: loader workers share each tensor by a file descriptor (torch's default
    sharing strategy on Linux), so a batch of many tensors in flight needs many. `ulimit -Sn` raises the
    soft limit only up to the hard one (a plain `ulimit -n` sets both, and lowers the hard one for good)."""
    limits = container_facts(facts).get("open_files") or {}
    soft, hard = limits.get("soft"), limits.get("hard")
    if soft is None or soft >= NOFILE_LOW:
        return []
    evidence = {"soft": soft, "hard": hard,
                "symptom": "RuntimeError: received 0 items of ancdata, or Too many open files, in a DataLoader with "
                           "workers", "hard_limit_command": "ulimit -Hn"}
    if hard is None or hard >= NOFILE_LOW:
        raise_to = NOFILE_WANTED if hard is None else min(hard, NOFILE_WANTED)
        return [finding("open-files-low", evidence, fix="%s  # in the job script, before python: the soft limit, "
                        "which the hard limit (ulimit -Hn) allows" % line("ulimit", "-Sn", str(raise_to)))]
    return [finding("open-files-low", evidence, severity="warning", fix=(
        "torch.multiprocessing.set_sharing_strategy('file_system')  # in the training script, before the loaders: "
        "no descriptor per tensor. The hard limit (ulimit -Hn) is %d, so ulimit -Sn cannot go above it without root: "
        "ask for more (nofile in /etc/security/limits.conf, docker run --ulimit nofile=%d:%d)"
        % (hard, NOFILE_WANTED, NOFILE_WANTED)))]
