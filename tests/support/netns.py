"""Several hosts on one machine, made of Linux network namespaces (root only).

Each host is a network namespace with `lo` up and one veth interface plugged
into a bridge that lives in a separate "switch" namespace, so nothing is added
to the machine's own network namespace. Addresses come from 192.0.2.0/24
(TEST-NET-1, RFC 5737: documentation only, never routed). Each host gets its
own /etc/hosts (`ip netns exec` bind-mounts /etc/netns/NAME/hosts over
/etc/hosts and remounts /sys so /sys/class/net lists the namespace's own
interfaces) and its own hostname (every command runs in a new UTS namespace).
"""

import os
import shutil
import signal
import subprocess
import time

NETWORK = "192.0.2"   # TEST-NET-1; host i gets NETWORK.(i + 1)
PREFIX_LENGTH = 24
NETNS_ETC = "/etc/netns"


def unavailable_reason():
    """None when network namespaces can be made here, else why not."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "network namespaces need root (run the tests as root, as CI does)"
    if shutil.which("ip") is None or shutil.which("unshare") is None:
        return "`ip` (iproute2) or `unshare` (util-linux) is not installed: apt-get install -y iproute2"
    probe = "pygmh-probe-%d" % os.getpid()
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return "`ip netns add` fails here: %s" % made.stderr.strip()
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def remove_stale(prefix="pygmh"):
    """Delete namespaces (and /etc/netns entries) left by a test run that was killed.

    Names carry the creating process id, so only those of processes that no
    longer exist are removed; a concurrent run keeps its own.
    """
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split("\n")
    for name in [line.split()[0] for line in listed if line.startswith(prefix)]:
        pid = name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and not os.path.exists("/proc/%s" % pid):
            for process_id in subprocess.run(["ip", "netns", "pids", name], capture_output=True,
                                             text=True).stdout.split():
                try:
                    os.kill(int(process_id), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
            shutil.rmtree(os.path.join(NETNS_ETC, name), ignore_errors=True)


class Host(object):
    def __init__(self, cluster, index):
        letter = "abcdefgh"[index]
        self.cluster = cluster
        self.hostname = "host-%s" % letter
        self.netns = "%s-%s" % (cluster.tag, letter)
        self.ifname = "veth-%s" % letter          # the interface inside this host
        self.switch_port = "port-%s" % letter     # its peer, on the bridge
        self.address = "%s.%d" % (NETWORK, index + 1)

    def __repr__(self):
        return "Host(%s %s %s)" % (self.hostname, self.address, self.ifname)

    def hosts_file(self):
        return os.path.join(NETNS_ETC, self.netns, "hosts")

    def write_hosts(self, text):
        """Replace this host's /etc/hosts (seen by commands started afterwards)."""
        with open(self.hosts_file(), "w") as handle:
            handle.write(text)

    def command(self, argv):
        """argv run inside this host: its network namespace, /etc/hosts and hostname."""
        set_hostname = 'echo "$0" > /proc/sys/kernel/hostname && exec "$@"'
        return ["ip", "netns", "exec", self.netns, "unshare", "--uts", "--",
                "sh", "-c", set_hostname, self.hostname] + [str(a) for a in argv]

    def popen(self, argv, env, **kwargs):
        process = subprocess.Popen(self.command(argv), env=env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   start_new_session=True, **kwargs)
        self.cluster.processes.append(process)
        return process

    def run(self, argv, env, timeout):
        process = self.popen(argv, env)
        stdout, stderr = process.communicate(timeout=timeout)
        return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


class Cluster(object):
    """`count` hosts on one bridge. Use as a context manager: everything made is removed."""

    made = 0  # clusters made by this process: each gets its own names

    def __init__(self, count):
        Cluster.made += 1
        self.tag = "pygmh%d-%d" % (os.getpid(), Cluster.made)
        self.switch = self.tag + "-sw"
        self.hosts = [Host(self, i) for i in range(count)]
        self.processes = []
        self.made_netns_etc = False

    def __enter__(self):
        try:
            self.create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info):
        self.close()

    def ip(self, *args):
        subprocess.run(["ip"] + list(args), check=True, capture_output=True, text=True)

    def create(self):
        remove_stale()
        self.ip("netns", "add", self.switch)
        self.ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        self.ip("-n", self.switch, "link", "set", "br0", "up")
        if not os.path.isdir(NETNS_ETC):
            os.mkdir(NETNS_ETC)
            self.made_netns_etc = True
        for host in self.hosts:
            self.ip("netns", "add", host.netns)
            self.ip("link", "add", host.ifname, "netns", host.netns, "type", "veth",
                    "peer", "name", host.switch_port, "netns", self.switch)
            self.ip("-n", self.switch, "link", "set", host.switch_port, "master", "br0", "up")
            self.ip("-n", host.netns, "addr", "add", "%s/%d" % (host.address, PREFIX_LENGTH), "dev", host.ifname)
            self.ip("-n", host.netns, "link", "set", "lo", "up")
            self.ip("-n", host.netns, "link", "set", host.ifname, "up")
            # A node's default route, as the checker reads it in /proc/net/route to name the interface
            # for GLOO_SOCKET_IFNAME. The bridge routes nowhere further: nothing leaves the test network.
            self.ip("-n", host.netns, "route", "add", "default", "dev", host.ifname)
            os.mkdir(os.path.dirname(host.hosts_file()))
            host.write_hosts(self.default_hosts())

    def default_hosts(self):
        """An /etc/hosts as a well-configured cluster node has it: every host by its address."""
        lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
        lines += ["%s %s" % (h.address, h.hostname) for h in self.hosts]
        return "\n".join(lines) + "\n"

    def stop_processes(self):
        """End what the tests started here: their sessions, then anything left in the namespaces."""
        for process in self.processes:
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                process.communicate(timeout=10)
            except (subprocess.TimeoutExpired, ValueError):
                pass
        for netns in [h.netns for h in self.hosts] + [self.switch]:
            listed = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True)
            for pid in listed.stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def close(self):
        self.stop_processes()
        for netns in [h.netns for h in self.hosts] + [self.switch]:
            subprocess.run(["ip", "netns", "del", netns], capture_output=True)
        for host in self.hosts:
            shutil.rmtree(os.path.dirname(host.hosts_file()), ignore_errors=True)
        if self.made_netns_etc:
            try:
                os.rmdir(NETNS_ETC)
            except OSError:  # another user of /etc/netns appeared meanwhile: leave it
                pass

    def leftovers(self):
        """Namespaces of this cluster still present (empty after close())."""
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        return sorted(line.split()[0] for line in listed.splitlines() if line.startswith(self.tag + "-"))


def wait_all(processes, deadline):
    """Wait for every process until `deadline` (time.time()); -> True when all ended."""
    for process in processes:
        left = deadline - time.time()
        try:
            process.wait(timeout=max(left, 0.1))
        except subprocess.TimeoutExpired:
            return False
    return True
