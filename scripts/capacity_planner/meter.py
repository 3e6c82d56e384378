"""--measure's child: starts the job (job.py) in its launch shape, inside a private /dev/shm when it can, and
samples it from outside until it ends: /dev/shm used, and the node memory of the job's processes. What it
measured is published as it goes, so a signal that ends this child leaves the parent the last of it.
Standard library only (torch runs in the job).

Node memory = the job's anonymous pages (the sum of each process's Pss_Anon: a page forked workers share
counts once) + the libraries' file pages once (the largest RssFile of one process: every process maps the
same files, and other users' processes share them too) + a memory-mapped graph file's pages once (the sum of
its PSS over the job) + /dev/shm used (statvfs: a batch queued behind a file descriptor counts, and none
twice). smaps_rollup walks page tables, so it is read within a CPU budget; between reads a process's
RssAnon drift stands in, and whenever a process starts or ends every process is read again (sharing changes).
"""

import json
import os
import signal
import subprocess
import sys
import time

from diagnostics_core import sandbox

CLONE_NEWNS = 0x00020000                              # linux/sched.h
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 2, 4, 1 << 14, 1 << 18  # linux/mount.h
SHM = "/dev/shm"
INTERVAL_S = 0.04
ROLLUP_SHARE = 0.10   # of one core, at most, for smaps_rollup reads
CHANGE_BYTES = 4 << 20  # a process whose RssAnon or RssFile moved more than this is read again
REFRESH_S = 0.5         # ... and every process at least this often
PUBLISH_S = 1.0
END_GRACE_S = 3.0
SHM_FULL_TEXTS = ("no space left on device", "bus error", "unable to allocate shared memory",
                  "unable to write to file")
JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "job.py")


# --- a private /dev/shm -----------------------------------------------------------------------------------

def private_shm(size):
    """Move this process into a mount namespace of its own (private propagation) and mount a tmpfs of `size`
    bytes on /dev/shm there; the job inherits it, and it ends with the last of them. -> None, or why not
    (then the host's /dev/shm is measured as a difference from its level at the start)."""
    if not sys.platform.startswith("linux"):
        return "not Linux: no mount namespaces"
    if os.geteuid() != 0:
        return "not root: a private /dev/shm needs a mount namespace (CAP_SYS_ADMIN)"
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        return "unshare(CLONE_NEWNS) failed: %s" % os.strerror(ctypes.get_errno())
    # Private first: a mount made while the namespace still shares propagation would reach the host.
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return "making the mount namespace private failed: %s" % os.strerror(ctypes.get_errno())
    options = ("size=%d,mode=1777" % size).encode()
    if libc.mount(b"tmpfs", SHM.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) != 0:
        return "mounting a tmpfs on /dev/shm failed: %s" % os.strerror(ctypes.get_errno())
    return None


def shm_used():
    info = os.statvfs(SHM)
    return (info.f_blocks - info.f_bfree) * info.f_frsize


# --- /proc ------------------------------------------------------------------------------------------------

def read_fields(path, fields):
    found = {}
    try:
        with open(path) as handle:
            for line in handle:
                key, _, rest = line.partition(":")
                if key in fields:
                    found[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return found


def read_status(pid):
    return read_fields("/proc/%d/status" % pid, ("VmRSS", "RssAnon", "RssFile", "RssShmem"))


def read_rollup(pid):
    found = read_fields("/proc/%d/smaps_rollup" % pid, ("Rss", "Pss_Anon"))
    return found if found and "Pss_Anon" in found else None


def read_file_pss(pid, path):
    """(Rss, Pss) of this process's mappings of one file (its VMAs in /proc/PID/smaps), or None."""
    rss = pss = 0
    inside = False
    try:
        with open("/proc/%d/smaps" % pid) as handle:
            for line in handle:
                first = line.split(None, 1)[0] if line.strip() else ""
                if "-" in first and not first.endswith(":"):  # a VMA header: start-end perms offset dev inode path
                    inside = line.rstrip("\n").endswith(path)
                elif inside and first == "Rss:":
                    rss += int(line.split()[1]) * 1024
                elif inside and first == "Pss:":
                    pss += int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return rss, pss


def read_cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


def job_processes():
    """{pid: parent pid} of every live process below this one (the job's, whatever their session)."""
    table = sandbox.process_table() or {}
    return dict((pid, table[pid][0]) for pid in sandbox.descendants_of(os.getpid(), table) if table[pid][1] != "Z")


# --- the job ----------------------------------------------------------------------------------------------

def job_command(config, config_path):
    """The job in its launch shape. torchrun's agent runs as `python -m torch.distributed.run` does, from a
    two-line bootstrap that first makes it die with this process."""
    python = [sys.executable, "-B"]
    if config["launch"] != "torchrun":
        return python + [JOB, config_path]
    bootstrap = ("import ctypes, runpy, sys; ctypes.CDLL(None).prctl(1, 9, 0, 0, 0); "
                 "sys.argv = ['torchrun'] + sys.argv[1:]; runpy.run_module('torch.distributed.run', "
                 "run_name='__main__')")
    return python + ["-c", bootstrap, "--standalone", "--nproc-per-node", str(config["ranks"]), JOB, config_path]


def job_environment(config):
    env = sandbox.child_environment()
    env.update({"OMP_NUM_THREADS": str(config["threads"]), "MKL_NUM_THREADS": str(config["threads"])})
    env.pop("PYTHONPATH", None)
    return env


def prepare_graph(config, folder, stop_at):
    """The destination-sorted file a mapped design maps (not measured): -> None, or why it failed."""
    path = os.path.join(folder, "prepare.json")
    with open(path, "w") as handle:
        json.dump(config, handle)
    with open(os.path.join(folder, "prepare.out"), "wb") as out:
        process = subprocess.Popen([sys.executable, "-B", JOB, "--prepare", path], env=job_environment(config),
                                   stdout=out, stderr=subprocess.STDOUT, cwd=folder)
        try:
            code = process.wait(timeout=max(1.0, stop_at - time.time()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            return "preparing the sorted graph file did not finish in time"
    return None if code == 0 else "preparing the sorted graph file failed (exit %s): %s" % (
        code, tail(os.path.join(folder, "prepare.out")))


def tail(path, limit=1500):
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            handle.seek(max(0, handle.tell() - limit))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def read_marks(path, position):
    """-> (new marks, new position): whole lines only, a rank may be writing the next one."""
    try:
        with open(path, "rb") as handle:
            handle.seek(position)
            chunk = handle.read()
    except OSError:
        return [], position
    complete = chunk[:chunk.rfind(b"\n") + 1]
    marks = []
    for line in complete.splitlines():
        try:
            marks.append(json.loads(line.decode("utf-8")))
        except ValueError:
            continue
    return marks, position + len(complete)


def end_processes(grace=END_GRACE_S):
    """SIGTERM every process below this one, then SIGKILL what is left; -> how many there were."""
    seen = set()
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        pids = list(job_processes())
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, sig)
                seen.add(pid)
            except OSError:
                pass
        stop = time.time() + wait
        while time.time() < stop and job_processes():
            sandbox.reap_orphans()
            time.sleep(0.05)
    sandbox.reap_orphans()
    return len(seen)


# --- sampling ---------------------------------------------------------------------------------------------

class Sampler(object):
    """Samples /dev/shm and the job's node memory; keeps each process's latest smaps_rollup."""

    def __init__(self, base_shm, graph_file, started):
        self.base_shm, self.graph_file, self.started = base_shm, graph_file, started
        self.procs = {}        # pid -> {"ppid", "cmd", "roll", "roll_status", "roll_t", "hist"}
        self.members = set()
        self.spent = 0.0
        self.samples = []      # (t, shm, node or None, processes, anonymous, libraries)

    def sample(self):
        now = time.time() - self.started
        current = {}
        for pid, ppid in job_processes().items():
            status = read_status(pid)
            if not status or "VmRSS" not in status:
                continue
            info = self.procs.setdefault(pid, {"ppid": ppid, "cmd": read_cmdline(pid), "roll": None,
                                               "roll_status": None, "roll_t": -1.0, "hist": [], "first_t": now})
            info["last_t"] = now
            current[pid] = status
        changed = set(current) != self.members  # sharing between processes changes: read every one again
        self.members = set(current)
        fresh = 0
        for pid in self.stale(current, now, changed):
            began = time.time()
            roll = read_rollup(pid)
            if roll is not None and self.graph_file:
                mapped = read_file_pss(pid, self.graph_file)
                roll["file_rss"], roll["file_pss"] = mapped or (0, 0)
            self.spent += time.time() - began
            if roll is not None:
                fresh += 1
                info = self.procs[pid]
                info.update(roll=roll, roll_status=current[pid], roll_t=now)
                info["hist"].append((round(now, 3), roll["Pss_Anon"]))
                del info["hist"][:-64]
        used = shm_used() - self.base_shm
        consistent = not changed or fresh == len(current)  # an exiting process's share could not be reread
        anon, libraries, graph_file = self.memory(current)
        node = anon + libraries + graph_file + used if consistent else None
        self.samples.append((round(now, 3), used, node, len(current), anon, libraries))
        return now

    def stale(self, current, now, changed):
        """The processes to read now: all of them after a membership change, else those never read, moved
        or old, within the CPU budget."""
        if changed:
            return list(current)
        order = []
        for pid, status in current.items():
            info = self.procs[pid]
            base = info["roll_status"]
            moved = base is None or max(abs(status.get(k, 0) - base.get(k, 0)) for k in ("RssAnon", "RssFile")) \
                > CHANGE_BYTES
            if moved or now - info["roll_t"] > REFRESH_S:
                order.append((0 if base is None else 1 if moved else 2, info["roll_t"], pid))
        chosen = []
        for rank, _, pid in sorted(order):
            if rank and self.spent > ROLLUP_SHARE * max(now, 1.0):
                break
            chosen.append(pid)
        return chosen

    def memory(self, current):
        """(Σ Pss_Anon, plus each process's RssAnon drift since its last read; the largest RssFile without the
        graph file; the graph file's PSS summed): node memory is their sum and /dev/shm used."""
        anon = libraries = graph_file = 0
        for pid, status in current.items():
            info = self.procs[pid]
            roll, base = info["roll"], info["roll_status"]
            if roll is None:
                continue
            anon += max(0, roll["Pss_Anon"] + status.get("RssAnon", 0) - base.get("RssAnon", 0))
            libraries = max(libraries, base.get("RssFile", 0) - roll.get("file_rss", 0))
            graph_file += roll.get("file_pss", 0)
        return anon, libraries, graph_file


def roles(procs, marks):
    """{pid: kind}: ranks and the launcher from their marks, torchrun's agent, resource trackers and
    forkservers by command line, a rank's (or its forkserver's) other children its workers."""
    named = dict((m["pid"], "rank" if m["who"].startswith("rank") else m["who"]) for m in marks)
    found = {}

    def kind(pid, depth=0):
        if pid in found:
            return found[pid]
        if pid in named:
            return named[pid]
        info = procs.get(pid)
        if info is None or depth > 16:
            return None
        if "resource_tracker" in info["cmd"]:
            return "resource_tracker"
        parent = kind(info["ppid"], depth + 1)
        if parent == "forkserver":  # forked from it: its command line is the forkserver's
            return "worker"
        if "forkserver" in info["cmd"]:
            return "forkserver"
        if parent == "rank":
            return "worker"
        if "torch.distributed.run" in info["cmd"]:
            return "agent"
        return "other"
    for pid in procs:
        found[pid] = kind(pid)
    return found


def stages(samples, marks, settle_s):
    """[{"stage", "peak_shm_bytes", "peak_node_bytes", "end_shm_bytes"}], one per stage the ranks marked (its
    last rank's end), each window from the previous one's end to its own end plus the settle."""
    ends = {}
    for m in marks:
        if m["who"].startswith("rank"):
            ends[m["stage"]] = max(ends.get(m["stage"], 0.0), m["t"])
    found, start = [], float("-inf")
    for name, end in sorted(ends.items(), key=lambda item: item[1]):
        window = [s for s in samples if start <= s[0] <= end + settle_s]
        if window:
            nodes = [s[2] for s in window if s[2] is not None]
            last = [s for s in window if s[2] is not None][-1:] or window[-1:]
            found.append({"stage": name, "peak_shm_bytes": max(s[1] for s in window),
                          "peak_node_bytes": max(nodes) if nodes else None, "end_shm_bytes": last[0][1],
                          "end_anon_bytes": last[0][4], "end_libraries_bytes": last[0][5],
                          "window_s": [round(max(start, window[0][0]), 3), round(end + settle_s, 3)]})
        start = end + settle_s
    return found


def by_kind(procs, kinds, t):
    """{kind: {"count", "pss_anon_bytes"}} from each process's last smaps_rollup at or before `t`."""
    found = {}
    for pid, info in procs.items():
        reads = [value for stamp, value in info["hist"] if stamp <= t]
        if not reads or info.get("last_t", -1) < t:
            continue
        entry = found.setdefault(kinds.get(pid) or "other", {"count": 0, "pss_anon_bytes": 0})
        entry["count"] += 1
        entry["pss_anon_bytes"] += reads[-1]
    return found


def summary(sampler, marks, settle_s, started):
    """What was measured so far, as the parent shows it: the peaks while the job ran its stages (its teardown
    after "done" is reported apart: processes exiting are not the job the model sizes), the stages, the
    workers' start method, the processes by kind."""
    kinds = roles(sampler.procs, marks)
    relative = [dict(m, t=m["t"] - started) for m in marks]
    found = stages(sampler.samples, relative, settle_s)
    ends = {}
    for m in relative:
        if m["who"].startswith("rank"):
            ends[m["stage"]] = max(ends.get(m["stage"], m["t"]), m["t"])
    for stage in found:
        stage["by_kind"] = by_kind(sampler.procs, kinds, ends[stage["stage"]] + 0.8 * settle_s)
    counts = {}
    for pid in sampler.procs:
        counts[kinds[pid]] = counts.get(kinds[pid], 0) + 1
    done = [s["window_s"][1] for s in found if s["stage"] == "done"]
    running = [s for s in sampler.samples if not done or s[0] <= done[0]]
    teardown = [s[2] for s in sampler.samples[len(running):] if s[2] is not None]
    nodes = [s for s in running if s[2] is not None]
    node_peak = max(nodes, key=lambda s: s[2]) if nodes else None
    return {"peak": {"shm_bytes": max([s[1] for s in running] or [0]), "node_bytes": node_peak and node_peak[2],
                     "node_at_s": node_peak and node_peak[0], "processes": max([s[3] for s in running] or [0])},
            "teardown_node_bytes": max(teardown) if teardown else None,
            "samples": len(sampler.samples), "stages": found, "processes": counts,
            "worker_start_methods": sorted(set(m["worker_start_method"] for m in marks if m.get("worker_start_method"))),
            "batch_bytes": [m["batch_bytes"] for m in marks if m.get("batch_bytes")],
            "seconds": round(time.time() - started, 2)}


def failure(code, log, cut):
    """How the job failed, as data: None, or {"kind": shm-full | deadline | job-failed, ...}."""
    if cut:
        return {"kind": "deadline", "detail": cut}
    if code == 0:
        return None
    low = log.lower()
    kind = "shm-full" if any(text in low for text in SHM_FULL_TEXTS) else "job-failed"
    return {"kind": kind, "exit_code": code, "detail": log[-1500:]}


def leftovers(folder, before):
    """What the job left: in its temporary folder (counted, then removed here: the run's scratch folder goes
    too) and in /dev/shm (a private one ends with its namespace) -> {"removed_from_temp", "shm_files_left"}."""
    removed = {"pymp-*": 0, "torchelastic_*": 0, "PyG templates (*.py)": 0}
    for name in os.listdir(folder):
        key = ("pymp-*" if name.startswith("pymp-") else "torchelastic_*" if name.startswith("torchelastic_")
               else "PyG templates (*.py)" if name.endswith(".py") else None)  # this child's own folder is not one
        if key:
            removed[key] += 1
            path = os.path.join(folder, name)
            if os.path.isdir(path):
                import shutil
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.unlink(path)
                except OSError:
                    pass
    try:
        left = len(set(os.listdir(SHM)) - before)
    except OSError:
        left = None
    return {"removed_from_temp": removed, "shm_files_left": left}


def run(options, reporter):
    """The measurement: a private /dev/shm, the graph file when mapped, the job, sampling until it ends or
    the stop time, the job's processes ended, what they left."""
    config = options.job
    sandbox.become_subreaper()  # a job process that double-forks stays below this one
    why = private_shm(options.shm_size)
    reporter.publish("private_shm", {"private": why is None, "why_not": why,
                                     "size_bytes": options.shm_size if why is None else None})
    temp = os.environ.get("TMPDIR") or "/tmp"  # the run's scratch folder: the job's temporary files land here
    if why is not None and os.statvfs(SHM).f_bavail * os.statvfs(SHM).f_frsize < options.shm_needed:
        reporter.publish("refused", {"why": "the host's /dev/shm has less free space than the job needs, and a "
                                            "private one could not be mounted (%s)" % why})
        return
    import shutil
    import tempfile
    folder = tempfile.mkdtemp(prefix="measure-", dir=temp)  # this child's own files: settings, marks, the log
    try:
        measure_job(options, reporter, config, temp, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def measure_job(options, reporter, config, temp, folder):
    stop_at = options.stop_at
    if config["layout"] == "mapped":
        config["graph"] = dict(config["graph"], source=config["graph"].get("path"),
                               path=os.path.join(folder, "graph_sorted.pt"), mmap=True)
        problem = prepare_graph(config, folder, stop_at)
        if problem:
            reporter.publish("result", {"failure": {"kind": "job-failed", "detail": problem}})
            return
    config["marks"] = os.path.join(folder, "marks.jsonl")
    config_path = os.path.join(folder, "job.json")
    with open(config_path, "w") as handle:
        json.dump(config, handle)
    before = set(os.listdir(SHM))
    sampler = Sampler(shm_used(), config["graph"]["path"] if config["layout"] == "mapped" else None, time.time())
    log_path = os.path.join(folder, "job.out")
    marks, position, cut, published = [], 0, None, 0.0
    with open(log_path, "wb") as log:
        job = subprocess.Popen(job_command(config, config_path), env=job_environment(config), stdout=log,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=temp)
        while job.poll() is None:
            began = time.time()
            if began > stop_at:
                cut = "the job did not finish before the measure's deadline (--timeout)"
                break
            sampler.sample()
            new, position = read_marks(config["marks"], position)
            marks += new
            if new or began - published > PUBLISH_S:
                reporter.publish("measured", summary(sampler, marks, config["settle_s"], sampler.started))
                published = began
            time.sleep(max(0.002, INTERVAL_S - (time.time() - began)))
        ended = end_processes()
        code = job.poll()
    new, position = read_marks(config["marks"], position)
    marks += new
    result = summary(sampler, marks, config["settle_s"], sampler.started)
    result.update(failure=failure(code, tail(log_path), cut), processes_ended_at_the_end=ended,
                  cleanup=leftovers(temp, before), rollup_cpu_s=round(sampler.spent, 2))
    reporter.publish("result", result)
