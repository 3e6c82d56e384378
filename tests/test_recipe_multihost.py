"""Multi-host launches on hosts made of network namespaces (tests/support/netns.py).

Five hosts, host-a to -e at 192.0.2.1-5 (TEST-NET-1) on one bridge, each
with its own interfaces, /etc/hosts and hostname; the tests take host-a to
-c, and a launch that mostly waits (its gloo connect timeout) runs beside
them on -d and -e. On them: torchrun with
c10d rendezvous trains the DDP recipe across two hosts to the one-host
result; launch mistakes are caught by the checker inside the host before
anything starts, and the recipe launched with them fails within its own
--timeout instead of hanging; reports gathered per host are compared.
Needs root (CI runs as root); skipped with the reason otherwise, failed
under CI=true.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest

from support import netns as _netns
from support import fakes
from conftest import CHECKER, ENABLE, ROOT, clean_env, load_schema, make_linked_venv, validate

RECIPE = ROOT / "scripts" / "ddp_neighbor_training.py"
COMPARE = ROOT / "scripts" / "compare_reports.py"
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
# The recipe's --timeout in runs that must fail: every wait below is a
# multiple of it plus interpreter start-up, a guard against hangs only.
FAIL_TIMEOUT = 10
HANG_GUARD = 6 * FAIL_TIMEOUT + 300
RECIPE_ARGS = ["--threads", "1", "--epochs", "2", "--num-nodes", "600"]


def require_namespaces():
    reason = _netns.unavailable_reason()
    if reason:
        reason += "; enable: " + ENABLE["netns"]
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture(scope="module")
def cluster():
    require_namespaces()
    with _netns.Cluster(5) as made:  # the tests take host-a to -c; the loopback launch below, -d and -e
        yield made
    assert not made.leftovers()


@pytest.fixture
def hosts(cluster):
    yield cluster.hosts[:3]
    for host in cluster.hosts[:3]:  # a test that broke a host's /etc/hosts leaves no trace
        host.write_hosts(cluster.default_hosts())


_ports = iter(range(29400, 29999))


def port():
    """A fresh port per rendezvous, so no run meets a previous one's TIME_WAIT."""
    return str(next(_ports))


def host_env(host, ifname=True, **extra):
    env = clean_env({"PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"},
                    drop=("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME"))
    if ifname:
        env["GLOO_SOCKET_IFNAME"] = host.ifname
    env.update(extra)
    return env


def checker_on(host, env, *args):
    """The checker run inside `host` (static facts: milliseconds); -> its validated JSON."""
    completed = host.run([sys.executable, CHECKER, "--static-only"] + list(args), env, timeout=120)
    document = json.loads(completed.stdout)
    validate(document, load_schema())
    assert document["exit_code"] == completed.returncode
    return document


def ids(document):
    return [f["id"] for f in document["findings"]]


def only(document, finding_id):
    found = [f for f in document["findings"] if f["id"] == finding_id]
    assert len(found) == 1, (finding_id, ids(document))
    return found[0]


def finish(processes):
    """(returncode, stdout, stderr) of each process, all started before the first wait."""
    results = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=HANG_GUARD)
        results.append((process.returncode, stdout, stderr))
    return results


def torchrun(nnodes, nproc, endpoint, *args):
    return TORCHRUN + ["--nnodes", str(nnodes), "--nproc-per-node", str(nproc), "--rdzv-backend", "c10d",
                       "--rdzv-endpoint", endpoint, "--rdzv-id", "job"] + [str(a) for a in args]


def env_launch(rank, world, master, master_port, **extra):
    """What srun gives each task once the job script maps SLURM's variables (see the recipe's --help)."""
    launch = {"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
              "MASTER_ADDR": master, "MASTER_PORT": master_port}
    launch.update(extra)
    return launch


def job_report(results):
    """The one JSON document rank 0 printed, wherever rank 0 ran."""
    documents = [json.loads(stdout) for _, stdout, _ in results if stdout.strip()]
    assert len(documents) == 1, [stderr[-3000:] for _, _, stderr in results]
    return documents[0]


# ---------------------------------------------------------------------------
# The harness itself
# ---------------------------------------------------------------------------

def test_each_host_has_its_own_interfaces_hosts_file_and_name(hosts):
    for host in hosts:
        environment = checker_on(host, host_env(host))["environment"]
        assert environment["hostname"] == host.hostname
        assert environment["network_interfaces"] == sorted(["lo", host.ifname])
        own = environment["name_resolution"]["hostname"]
        assert own == {"name": host.hostname, "source": "/etc/hosts", "addresses": [host.address],
                       "loopback": False, "first_loopback": False}


def test_cluster_removes_what_it_made():
    require_namespaces()
    with _netns.Cluster(1) as made:
        assert made.leftovers() == sorted([made.switch, made.hosts[0].netns])
        hosts_file = made.hosts[0].hosts_file()
        assert os.path.isfile(hosts_file)
    assert made.leftovers() == [] and not os.path.exists(hosts_file)


def interface_snippet():
    """The bash block of distributed-workflows.md that picks the interface, verbatim."""
    text = (ROOT / "references" / "distributed-workflows.md").read_text()
    blocks = [b for b in text.split("```bash\n")[1:] if "MASTER_IP=$(getent" in b.split("```")[0]]
    assert len(blocks) == 1
    return blocks[0].split("```")[0]


def test_documented_interface_recipe_picks_each_hosts_veth(hosts):
    snippet = interface_snippet() + 'echo "$GLOO_SOCKET_IFNAME"\n'
    for host in hosts[:2]:  # the master (host-a) and a worker
        completed = host.run(["bash", "-c", snippet], host_env(host, ifname=False, MASTER_ADDR="host-a"), timeout=60)
        assert completed.returncode == 0, completed.stderr
        assert completed.stdout.split() == [host.ifname]


# ---------------------------------------------------------------------------
# torchrun across two hosts = the one-host run
# ---------------------------------------------------------------------------

def test_torchrun_two_hosts_trains_to_the_one_host_result(hosts, neighbor_backend):
    a, b = hosts[0], hosts[1]
    endpoint = "%s:%s" % (a.address, port())
    one_host = finish([a.popen(torchrun(1, 2, endpoint, RECIPE, *RECIPE_ARGS), host_env(a))])
    assert one_host[0][0] == 0, one_host[0][2][-3000:]
    single = job_report(one_host)

    endpoint = "%s:%s" % (a.address, port())
    two_hosts = finish([h.popen(torchrun(2, 1, endpoint, RECIPE, *RECIPE_ARGS), host_env(h)) for h in (a, b)])
    assert [code for code, _, _ in two_hosts] == [0, 0], [e[-3000:] for _, _, e in two_hosts]
    spread = job_report(two_hosts)

    assert spread["launcher"] == "torchrun" and spread["world_size"] == 2 and spread["backend"] == "gloo"
    assert sorted(r["host"] for r in spread["ranks"]) == ["host-a", "host-b"]
    assert {r["host"] for r in single["ranks"]} == {"host-a"}
    # Same seeds, shards, sampling seeds and one thread per rank: the same numbers.
    assert spread["epochs"] == single["epochs"]
    assert spread["val_acc"] == single["val_acc"]
    for key in ("num_train_seeds", "num_val_seeds", "batches_per_epoch", "train_loss"):
        assert [r[key] for r in spread["ranks"]] == [r[key] for r in single["ranks"]], key


# ---------------------------------------------------------------------------
# Launch mistakes: caught by the checker first, then what the job does
# ---------------------------------------------------------------------------

def test_gloo_ifname_prefix_names_no_interface(hosts, neighbor_backend):
    """gloo wants the exact interface name: 'veth' on a host whose interface is veth-b fails."""
    a, b = hosts[0], hosts[1]
    wrong = host_env(b, GLOO_SOCKET_IFNAME="veth")
    found = only(checker_on(b, wrong), "launch-socket-ifname-missing")
    assert found["evidence"]["GLOO_SOCKET_IFNAME"]["absent"] == ["veth"]
    assert found["evidence"]["interfaces"] == ["lo", "veth-b"]
    # The same prefix is fine for NCCL, which matches prefixes.
    assert "launch-socket-ifname-missing" not in ids(checker_on(b, host_env(b, NCCL_SOCKET_IFNAME="veth")))

    endpoint = "%s:%s" % (a.address, port())
    args = RECIPE_ARGS + ["--timeout", FAIL_TIMEOUT]
    results = finish([a.popen(torchrun(2, 1, endpoint, RECIPE, *args), host_env(a)),
                      b.popen(torchrun(2, 1, endpoint, RECIPE, *args), wrong)])
    assert [code for code, _, _ in results] == [1, 1]
    assert "Unable to find address for: veth" in results[1][2]


@pytest.mark.finding("launch-master-addr-loopback")
def test_master_addr_resolving_to_loopback_on_a_worker_host(hosts, neighbor_backend):
    a, b = hosts[0], hosts[1]
    # The classic Debian line, copied to the wrong node: the master's name on 127.0.1.1.
    b.write_hosts("127.0.0.1 localhost\n127.0.1.1 host-a\n192.0.2.2 host-b\n")
    master_port = port()
    worker = host_env(b, **env_launch(1, 2, "host-a", master_port, NODE_RANK="1"))
    found = only(checker_on(b, worker), "launch-master-addr-loopback")
    assert found["evidence"]["resolved"] == {"name": "host-a", "source": "/etc/hosts", "addresses": ["127.0.1.1"],
                                             "loopback": True, "first_loopback": True}
    assert "DNS" in found["evidence"]["not_checked"]
    # Rank 0's host resolves the name properly: nothing to say there.
    master = host_env(a, **env_launch(0, 2, "host-a", master_port, NODE_RANK="0"))
    assert "launch-master-addr-loopback" not in ids(checker_on(a, master))
    # A literal loopback address is caught without any file.
    literal = host_env(b, **env_launch(1, 2, "127.0.0.1", master_port, NODE_RANK="1"))
    assert only(checker_on(b, literal), "launch-master-addr-loopback")["evidence"]["resolved"]["source"] == "literal"
    # The checker opens no socket while finding this out.
    if shutil.which("strace"):
        trace = b.run(["strace", "-f", "-qq", "-e", "trace=socket,connect", "-o", "/dev/stderr",
                       sys.executable, CHECKER, "--static-only"], worker, timeout=120)
        assert "socket(" not in trace.stderr and "connect(" not in trace.stderr

    args = RECIPE_ARGS + ["--timeout", FAIL_TIMEOUT]
    results = finish([a.popen([sys.executable, RECIPE] + args, master),
                      b.popen([sys.executable, RECIPE] + args, worker)])
    assert [code for code, _, _ in results] == [1, 1]
    report = job_report(results)
    assert report["ok"] is False and "1/2 clients joined" in report["error"]["message"]
    assert "trying to connect to (host-a, %s)" % master_port in results[1][2]


@pytest.mark.finding("launch-hostname-loopback")
def test_own_hostname_on_loopback_without_gloo_ifname(hosts):
    """Measured once on this harness: gloo then advertises 127.0.1.1 and connectFullMesh fails."""
    b = hosts[1]
    b.write_hosts("127.0.0.1 localhost\n192.0.2.1 host-a\n127.0.1.1 host-b\n")
    launch = env_launch(1, 2, "host-a", port(), NODE_RANK="1")
    document = checker_on(b, host_env(b, ifname=False, **launch))
    found = only(document, "launch-hostname-loopback")
    assert found["evidence"]["resolved"]["addresses"] == ["127.0.1.1"]
    assert found["evidence"]["interfaces"] == ["lo", "veth-b"]
    # It predicts a failure, so it is an error: ok is false, and a cluster compare can group by it.
    assert found["severity"] == "error" and document["ok"] is False
    # The interface to name comes from the node's own default route.
    assert found["evidence"]["default_route_interface"] == "veth-b"
    assert found["fix"].startswith("export GLOO_SOCKET_IFNAME=veth-b  # ")
    # Every way a launch says it spans nodes: SLURM, torchrun --nnodes (GROUP_WORLD_SIZE), WORLD_SIZE.
    for spans in ({"SLURM_NNODES": "2", "SLURM_NODEID": "1"}, {"GROUP_WORLD_SIZE": "2", "GROUP_RANK": "1"},
                  {"WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}):
        assert only(checker_on(b, host_env(b, ifname=False, **spans)), "launch-hostname-loopback")[
            "severity"] == "error", spans
    # NCCL_SOCKET_IFNAME named: an NCCL job's interface is chosen; gloo's side is only a warning then.
    nccl = host_env(b, ifname=False, NCCL_SOCKET_IFNAME="veth-b", **launch)
    assert only(checker_on(b, nccl), "launch-hostname-loopback")["severity"] == "warning"
    # GLOO_SOCKET_IFNAME makes gloo take the interface's address instead.
    assert "launch-hostname-loopback" not in ids(checker_on(b, host_env(b, **launch)))
    # One node: loopback is where the peers are, nothing to say.
    single = env_launch(0, 1, "127.0.0.1", port())
    assert "launch-hostname-loopback" not in ids(checker_on(b, host_env(b, ifname=False, **single)))


@pytest.mark.finding("launch-world-size-mismatch")
def test_world_size_larger_than_nodes_times_tasks(hosts, neighbor_backend, tmp_path):
    """An sbatch script for 2 nodes x 1 task that still exports WORLD_SIZE=3."""
    a, b = hosts[0], hosts[1]
    master_port = port()
    slurm = {"SLURM_NNODES": "2", "SLURM_NTASKS_PER_NODE": "1"}
    envs = [host_env(h, **env_launch(r, 3, a.address, master_port, SLURM_PROCID=str(r), SLURM_NODEID=str(r),
                                     **slurm)) for r, h in enumerate((a, b))]
    for host, env in zip((a, b), envs):
        document = checker_on(host, env)
        found = only(document, "launch-world-size-mismatch")
        assert found["evidence"]["expected"] == 2 and found["evidence"]["WORLD_SIZE"] == 3
        (tmp_path / ("%s.json" % host.hostname)).write_text(json.dumps(document))
    # The same reports, compared: rank 2 never reports.
    compared = subprocess.run([sys.executable, COMPARE, tmp_path], capture_output=True, text=True, timeout=120)
    assert compared.returncode == 1
    missing = [f for f in json.loads(compared.stdout)["findings"] if f["id"] == "cluster-rank-missing"]
    assert missing and missing[0]["evidence"]["missing"] == [2]

    args = RECIPE_ARGS + ["--timeout", FAIL_TIMEOUT]
    results = finish([h.popen([sys.executable, RECIPE] + args, env) for h, env in zip((a, b), envs)])
    assert [code for code, _, _ in results] == [1, 1]
    assert "2/3 clients joined" in job_report(results)["error"]["message"]


def test_unreachable_master_fails_within_the_timeout(hosts, neighbor_backend):
    b = hosts[1]
    nobody = "192.0.2.99"  # on the test network, no host answers
    env = host_env(b, **env_launch(1, 2, nobody, port()))
    results = finish([b.popen([sys.executable, RECIPE] + RECIPE_ARGS + ["--timeout", FAIL_TIMEOUT], env)])
    code, _, stderr = results[0]
    assert code == 1
    assert "failed to connect to any network address of (%s" % nobody in stderr


# ---------------------------------------------------------------------------
# Drift: reports gathered on every host by torchrun, one host planted
# ---------------------------------------------------------------------------

def fake_other_pyg(root, version):
    """torch_geometric on PYTHONPATH that reports another version: the installed PyG's code,
    as a stale copy left on a node's PYTHONPATH would shadow the venv's."""
    import importlib.util
    real = importlib.util.find_spec("torch_geometric").submodule_search_locations[0]
    source = textwrap.dedent("""\
        # Fake torch_geometric %(version)s written by tests/test_recipe_multihost.py: the installed PyG's code
        import os as _os
        __path__ = [%(real)r]
        with open(_os.path.join(__path__[0], "__init__.py")) as _handle:
            exec(compile(_handle.read(), _os.path.join(__path__[0], "__init__.py"), "exec"))
        __version__ = %(version)r
        """) % {"real": real, "version": version}
    return fakes.make_package(str(root), "torch_geometric", source)


GATHER = 'exec "$CHECK_PYTHON" scripts/check_sampling_backends.py > "$REPORTS/$(hostname)-$RANK.json"'


def test_compare_names_the_host_with_planted_drift(hosts, neighbor_backend, tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    stale = tmp_path / "stale"
    fake_other_pyg(stale, "2.7.0")
    no_sparse = make_linked_venv(tmp_path / "no-sparse", exclude=("torch_sparse",))
    endpoint = "%s:%s" % (hosts[0].address, port())
    processes = []
    for host in hosts:
        env = host_env(host, REPORTS=str(reports), CHECK_PYTHON=sys.executable)
        if host.hostname == "host-c":
            env.update(CHECK_PYTHON=str(no_sparse), PYTHONPATH=str(stale))
        processes.append(host.popen(torchrun(3, 1, endpoint, "--no-python", "bash", "-c", GATHER), env, cwd=ROOT))
    assert [code for code, _, _ in finish(processes)] == [0, 0, 0]
    names = sorted(p.stem.rsplit("-", 1) for p in reports.iterdir())  # torchrun picks who is rank 0
    assert [host for host, _ in names] == ["host-a", "host-b", "host-c"]
    assert sorted(rank for _, rank in names) == ["0", "1", "2"]

    compared = subprocess.run([sys.executable, COMPARE, reports], capture_output=True, text=True, timeout=120)
    assert compared.returncode == 1, compared.stderr
    document = json.loads(compared.stdout)
    drift = {f["evidence"]["fact"]: f["evidence"]["groups"] for f in document["findings"]
             if f["id"] == "cluster-stack-drift"}
    assert sorted(drift) == ["neighbor backend", "torch_geometric", "torch_sparse"]
    labels = {r["host"]: r["label"] for r in document["reports"]}
    for fact in drift:
        groups = drift[fact]
        assert [sorted(g["hosts"]) for g in groups] == [sorted([labels["host-a"], labels["host-b"]]),
                                                        [labels["host-c"]]], fact
    assert drift["torch_geometric"][1]["value"] == "2.7.0"
    stale_fix = [f["fix"] for f in document["findings"] if f["evidence"].get("fact") == "torch_geometric"][0]
    assert stale_fix.startswith("on %s: torch_geometric is imported from %s" % (labels["host-c"], stale))
    assert "PYTHONPATH" in stale_fix
    assert drift["torch_sparse"][1]["value"] == "not-installed"
    assert not [f for f in document["findings"] if f["id"].startswith(("cluster-rank", "cluster-launch"))]
    markdown = subprocess.run([sys.executable, COMPARE, reports, "--format", "markdown"],
                              capture_output=True, text=True, timeout=120)
    assert "| torch_geometric **(differs)** |" in markdown.stdout


# ---------------------------------------------------------------------------
# The loopback launch: started before the first test, on hosts of its own
# ---------------------------------------------------------------------------

def hostname_loopback_launch(a, b):
    """The user's step: a 2-node gloo job with MASTER_ADDR of node 0, each node's own name on 127.0.1.1 and no
    GLOO_SOCKET_IFNAME; then the same job with the checker's fix on each node. -> what each step gave."""
    a.write_hosts("127.0.0.1 localhost\n127.0.1.1 %s\n%s %s\n" % (a.hostname, b.address, b.hostname))
    b.write_hosts("127.0.0.1 localhost\n%s %s\n127.0.1.1 %s\n" % (a.address, a.hostname, b.hostname))
    master_port = port()
    envs = [host_env(h, ifname=False, **env_launch(r, 2, a.address, master_port, NODE_RANK=str(r)))
            for r, h in enumerate((a, b))]
    fixes = [only(checker_on(h, env), "launch-hostname-loopback")["fix"] for h, env in zip((a, b), envs)]
    args = RECIPE_ARGS + ["--timeout", FAIL_TIMEOUT]
    failed = finish([h.popen([sys.executable, RECIPE] + args, env) for h, env in zip((a, b), envs)])
    fixed_port = port()
    fixed = []
    for rank, (host, fix) in enumerate(zip((a, b), fixes)):
        variable, value = fix.split("  #")[0].split()[1].split("=")  # export GLOO_SOCKET_IFNAME=veth-d
        fixed.append(host_env(host, ifname=False, **dict(env_launch(rank, 2, a.address, fixed_port,
                                                                   NODE_RANK=str(rank)), **{variable: value})))
    checked = ids(checker_on(b, fixed[1]))
    trained = finish([h.popen([sys.executable, RECIPE] + RECIPE_ARGS, env) for h, env in zip((a, b), fixed)])
    return {"fixes": fixes, "failed": failed, "checked_after_fix": checked, "trained": trained}


@pytest.fixture(scope="module", autouse=True)
def loopback_launch(request, cluster):
    """The loopback launch, run beside the module's tests: most of it is gloo waiting out its connect timeout,
    and it touches only host-d and host-e. -> its future (None without a sampling backend: the test says so)."""
    try:
        request.getfixturevalue("neighbor_backend")
    except (pytest.skip.Exception, pytest.fail.Exception):
        yield None
        return
    with ThreadPoolExecutor(max_workers=1) as pool:
        yield pool.submit(hostname_loopback_launch, cluster.hosts[3], cluster.hosts[4])


def test_hostname_loopback_fails_the_launch_and_the_printed_interface_fixes_it(loopback_launch, neighbor_backend):
    result = loopback_launch.result(timeout=2 * HANG_GUARD)
    assert [code for code, _, _ in result["failed"]] == [1, 1]
    assert "127.0.1.1" in result["failed"][0][2] + result["failed"][1][2]
    assert [fix.split("  #")[0] for fix in result["fixes"]] == ["export GLOO_SOCKET_IFNAME=veth-d",
                                                                "export GLOO_SOCKET_IFNAME=veth-e"]
    assert "launch-hostname-loopback" not in result["checked_after_fix"]
    assert [code for code, _, _ in result["trained"]] == [0, 0], result["trained"][1][2][-2000:]
