"""A real two-node SLURM on this machine: munged, one slurmctld and two slurmd (n1, n2) on loopback
ports, every file under one temp folder. Debian's slurm-wlm and munge provide the daemons; the node
names must resolve (an /etc/hosts line, as .ci/run writes). Used by tests/test_launch_*.py through the
session fixture `slurm_cluster` in tests/conftest.py.

Nothing here touches /etc: the configuration, munge key and socket, state, spool, pid and log files
live in the folder given to start(), and SLURM_CONF in the returned environment points every client
(sbatch, squeue, srun inside a job) at it."""

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol")
# Stand-ins for srun, torchrun, python and scontrol that record the words they were started with (words end
# in \x1f, calls in \x1e, in $OUT/calls): where a corrected launch line puts a flag is read from what the
# launcher would get. The srun stand-in then starts its program (its own options given as --name=value).
RECORD = '{ printf "%s\\37" NAME "$@"; printf "\\36"; } >> "$OUT/calls"\n'
FAKE_LAUNCHERS = {"srun": RECORD + 'while [[ "$1" == -* ]]; do shift; done\nexec "$@"\n', "torchrun": RECORD,
                  "python": RECORD, "scontrol": "echo n1\n"}
NODES = ("n1", "n2")
# A job is finished in any other state (COMPLETING included: its exit code is set, as sbatch --wait reads it).
UNFINISHED = {"PENDING", "CONFIGURING", "RUNNING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED",
              "RESIZING", "SIGNALING", "STAGE_OUT"}
POLL_S = 0.2
ENABLE = ("apt-get install -y slurm-wlm munge && grep -qw n1 /etc/hosts || echo '127.0.0.1 n1 n2' >> /etc/hosts "
          "(as root; .ci/run does both)")


def fake_launchers(folder):
    """A folder of stand-in launchers (and the few real commands a corrected line pipes through): the PATH to
    run a fix with."""
    bash = shutil.which("bash")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in FAKE_LAUNCHERS.items():
        path = folder / name
        path.write_text("#!%s\n" % bash + body.replace("NAME", name))
        path.chmod(0o755)
    for name in ("bash", "sh", "head", "env", "tee", "cat", "true"):
        os.symlink(shutil.which(name), str(folder / name))
    return folder


def launcher_calls(out):
    """[(program, [words])] the stand-in launchers were started with, in order."""
    calls = Path(out, "calls")
    records = [record.split("\x1f")[:-1] for record in calls.read_text().split("\x1e")[:-1]] if calls.exists() else []
    return [(record[0], record[1:]) for record in records]


def missing():
    """Why this machine cannot run the cluster (None when it can)."""
    absent = [name for name in DAEMONS if shutil.which(name) is None]
    if absent:
        return "not installed: %s" % ", ".join(absent)
    if os.geteuid() != 0:
        return "the daemons run as root here (SlurmUser=root); run the tests as root"
    for node in NODES:
        try:
            socket.gethostbyname(node)
        except OSError:
            return "node name %s does not resolve" % node
    return None


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def slurm_conf(root, ctld_port, node_ports):
    host = socket.gethostname()
    lines = [
        "ClusterName=launchtest",
        "SlurmctldHost=%s(127.0.0.1)" % host,
        "SlurmctldPort=%d" % ctld_port,
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "AuthInfo=socket=%s/munge.socket" % root,
        "CredType=cred/munge",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/affinity",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "MpiDefault=none",
        "ReturnToService=2",
        # backfill: SLURM schedules heterogeneous jobs (#SBATCH hetjob) only with it ("Requested operation
        # not supported on this system" under sched/builtin)
        "SchedulerType=sched/backfill",
        "SchedulerParameters=bf_interval=1",  # a heterogeneous job starts within a second, not 30
        "StateSaveLocation=%s/state" % root,
        "SlurmdSpoolDir=%s/spool-%%n" % root,
        "SlurmctldPidFile=%s/slurmctld.pid" % root,
        "SlurmdPidFile=%s/slurmd-%%n.pid" % root,
        "SlurmctldLogFile=%s/slurmctld.log" % root,
        "SlurmdLogFile=%s/slurmd-%%n.log" % root,
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "InactiveLimit=0",
        "KillWait=5",
        "MinJobAge=300",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=30",
        "MessageTimeout=20",
        "PlugStackConfig=%s/plugstack.conf" % root,
    ]
    for node, port in zip(NODES, node_ports):
        lines.append("NodeName=%s NodeHostname=%s NodeAddr=127.0.0.1 Port=%d CPUs=2 Sockets=1 CoresPerSocket=2 "
                     "ThreadsPerCore=1 RealMemory=2000 State=UNKNOWN" % (node, host, port))
    lines.append("PartitionName=debug Nodes=%s Default=YES MaxTime=INFINITE State=UP" % ",".join(NODES))
    return "\n".join(lines) + "\n"


class Cluster(object):
    """A started cluster: env (for every client command), root (its folder), stop()."""

    def __init__(self, root):
        self.root = Path(root)
        self.env = dict(os.environ, SLURM_CONF=str(self.root / "slurm.conf"))
        for name in list(self.env):
            if name.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_")) and name != "SLURM_CONF":
                del self.env[name]
        self.pid_files = []

    def run(self, *command, timeout=30, check=True):
        return subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=timeout,
                              env=self.env, check=check, stdin=subprocess.DEVNULL)

    def start(self):
        root = self.root
        for folder in ("state", "spool-n1", "spool-n2"):
            (root / folder).mkdir(parents=True, exist_ok=True)
        key = root / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        os.chmod(root, 0o700)
        (root / "plugstack.conf").write_text("")
        ctld_port, *node_ports = free_ports(1 + len(NODES))
        (root / "slurm.conf").write_text(slurm_conf(root, ctld_port, node_ports))
        self.daemon("munge", ["munged", "--force", "--socket=%s/munge.socket" % root, "--key-file=%s" % key,
                              "--pid-file=%s/munged.pid" % root, "--log-file=%s/munged.log" % root,
                              "--seed-file=%s/munged.seed" % root], root / "munged.pid")
        self.daemon("slurmctld", ["slurmctld", "-i"], root / "slurmctld.pid")
        for node in NODES:
            self.daemon("slurmd " + node, ["slurmd", "-N", node], root / ("slurmd-%s.pid" % node))
        self.wait_idle()
        return self

    def daemon(self, name, command, pid_file):
        """Start a daemon that forks into the background; remember its pid file to stop it."""
        completed = subprocess.run(command, capture_output=True, text=True, timeout=60, env=self.env,
                                   stdin=subprocess.DEVNULL)
        self.pid_files.append(pid_file)
        deadline = time.time() + 20
        while time.time() < deadline and not pid_file.exists():
            time.sleep(0.1)
        if completed.returncode != 0 or not pid_file.exists():
            raise RuntimeError("%s did not start (exit %s): %s %s" % (name, completed.returncode,
                                                                    completed.stderr[-1500:], self.logs()))

    def wait_idle(self, timeout=60):
        deadline = time.time() + timeout
        output = ""
        while time.time() < deadline:
            output = self.run("sinfo", "-h", "-N", "-o", "%N %t", check=False).stdout
            states = dict(line.split() for line in output.splitlines() if len(line.split()) == 2)
            if all(states.get(node) == "idle" for node in NODES):
                return
            time.sleep(0.5)
        raise RuntimeError("nodes not idle after %ds: %r %s" % (timeout, output, self.logs()))

    def logs(self):
        text = []
        for name in ("slurmctld.log", "slurmd-n1.log", "slurmd-n2.log", "munged.log"):
            path = self.root / name
            if path.exists():
                text.append("== %s\n%s" % (name, path.read_text(errors="replace")[-1500:]))
        return "\n".join(text)

    def submit(self, script_path, *sbatch_args, chdir=None, timeout=180):
        """Submit a job script and wait for it; -> (exit code of the job, its log text, sbatch's
        CompletedProcess). The job runs in `chdir` (default: the script's folder); its output goes to
        <script>.log beside it. Not `sbatch --wait`: it polls after 2, 10 and 42 s, so a job of 3 s costs
        10; the job's state is read here every POLL_S instead, and its exit code as sbatch --wait gives it."""
        script_path = Path(script_path)
        log = script_path.with_suffix(".log")
        completed = self.run("sbatch", "--parsable", "--chdir=%s" % (chdir or script_path.parent),
                             "--output=%s" % log, *sbatch_args, script_path, check=False)
        code = completed.returncode
        if code == 0:
            code = self.wait_for(completed.stdout.strip().split(";")[0], timeout)
        text = log.read_text(errors="replace") if log.exists() else ""
        return code, text, completed

    def wait_for(self, job_id, timeout):
        """The job's exit code once every record of it (each heterogeneous component) has finished: the
        highest exit status, 1 for one ended by a signal (sbatch --wait's rule)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            shown = self.run("scontrol", "-o", "show", "job", job_id, check=False).stdout
            states = re.findall(r"\bJobState=(\S+)", shown)
            if states and not set(states) & UNFINISHED:
                codes = [(int(status), int(signal_number)) for status, signal_number in
                         re.findall(r"\bExitCode=(\d+):(\d+)", shown)]
                return max(status if not signal_number else 1 for status, signal_number in codes)
            time.sleep(POLL_S)
        self.run("scancel", job_id, check=False)
        raise RuntimeError("job %s did not finish in %ds: %s" % (job_id, timeout, self.logs()))

    def stop(self):
        """Stop every daemon by the pid its own pid file names: the SLURM daemons together, munged last
        (they authenticate through it while shutting down)."""
        pids = []
        for pid_file in self.pid_files:
            try:
                pids.append(int(pid_file.read_text().split()[0]))
            except (OSError, ValueError, IndexError):
                pids.append(None)
        slurm, munge = [p for p in pids[1:] if p], [p for p in pids[:1] if p]
        for group in (slurm, munge):
            self.end(group)

    @staticmethod
    def end(pids, grace=15):
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.time() + grace
        alive = list(pids)
        while alive and time.time() < deadline:
            alive = [pid for pid in alive if running(pid)]
            time.sleep(0.1)
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def running(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie of ours (none here: the daemons fork away) would count as gone
        return Path("/proc/%d/stat" % pid).read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def daemons_under(root):
    """Pids of processes whose command line names `root` or that this cluster started (a stray check)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path("/proc", entry, "environ").read_bytes()
        except OSError:
            continue
        if ("SLURM_CONF=%s/slurm.conf" % root).encode() in environ:
            found.append(int(entry))
    return found
