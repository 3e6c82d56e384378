"""compare_reports.py as a process: its exit codes and its one document when the command line is refused,
when the tool breaks, when a signal stops it while it reads, and when it reads 5,000 reports (the document
stays bounded, every count right, issue 39)."""

import json
import signal
import subprocess
import sys
import time

import pytest

from cluster_compare import bounds
from conftest import ROOT, clean_env, interrupted_finding, signal_when_ready, strict_json
from test_compare_reports import gather, launch
from support.helpers import ids, run

COMPARE = str(ROOT / "scripts" / "compare_reports.py")
SCRIPTS = str(ROOT / "scripts")


# What compare reads of a report; the rest (distributions, container, probe, ...) only makes thousands slow to write.
READ = {"schema_version": None, "status": None, "torch": None, "cuda": None, "pyg": None,
        "extensions": None, "environment": ("hostname", "launch", "network_interfaces"),
        "python": ("version", "executable", "prefix"), "sampling": ("neighbor_backend",),
        "cpu": ("logical_cores", "affinity"), "install": ("torch_minor", "variant", "platform", "index_url")}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A real static report (the checker's own JSON) to copy per node, trimmed to what compare reads."""
    document = json.loads(gather(tmp_path_factory.mktemp("report"), "node0", launch(0)).read_text())
    trimmed = dict((key, document[key] if keys is None else dict((k, document[key][k]) for k in keys
                                                                  if k in document[key]))
                   for key, keys in READ.items() if key in document)
    trimmed["findings"] = [dict((k, f[k]) for k in ("id", "severity", "fix")) for f in document["findings"]]
    return trimmed


def write_nodes(folder, report, count, world, rank_of=None, python_of=None):
    """`count` reports of the one real report, as host h<N//4> rank N of `world` would write them (rank_of: the
    rank it claims instead; python_of: its Python version instead)."""
    for number in range(count):
        rank = number if rank_of is None else rank_of(number)
        launch = dict(report["environment"]["launch"], RANK={"raw": str(rank), "value": rank, "error": None},
                      WORLD_SIZE={"raw": str(world), "value": world, "error": None})
        document = dict(report, environment=dict(report["environment"], hostname="h%04d" % (number // 4),
                                                 launch=launch))
        if python_of is not None and python_of(number):
            document["python"] = dict(report["python"], version=python_of(number))
        (folder / ("r%05d.json" % number)).write_text(json.dumps(document))


@pytest.mark.finding("cluster-usage-error")
def test_compare_bad_format_is_a_usage_error(tmp_path):
    completed, document = run([sys.executable, COMPARE, "--format", "yaml", str(tmp_path)])
    assert completed.returncode == 2 and len(completed.stderr.splitlines()) == 1
    assert ids(document) == ["cluster-usage-error"] and document["gates"] == {}


BROKEN_RULE = """import sys
sys.argv[0] = {tool!r}
sys.path.insert(0, {scripts!r})
import compare_reports as tool
from cluster_compare import cli
def broken(facts, options):
    raise KeyError("rule bug")
cli.SPEC.rules = cli.SPEC.rules + (broken,)
sys.exit(tool.main(sys.argv[1:]))
"""


@pytest.mark.finding("cluster-compare-internal-error")
def test_compare_internal_error_still_prints_json(tmp_path, report):
    write_nodes(tmp_path, report, 2, 2)
    code = BROKEN_RULE.format(tool=COMPARE, scripts=SCRIPTS)
    completed, document = run([sys.executable, "-c", code, str(tmp_path)], env=clean_env())
    assert completed.returncode == 3 and document["status"] == "internal-error"
    assert ids(document)[-1] == "cluster-compare-internal-error"
    assert [entry["rank"] for entry in document["reports"]] == [0, 1]  # what was read is still shown


# The entry point, with the reading of the second report held: it says so on stderr, then waits for the signal.
STALLED_READ = """import sys, time
sys.argv[0] = {tool!r}
sys.path.insert(0, {scripts!r})
import compare_reports as tool
from cluster_compare import reports
read = reports.load_report
def stalled(path):
    if path.endswith("r00001.json"):
        sys.stderr.write("reading %s\\n" % path)
        sys.stderr.flush()
        time.sleep(120)
    return read(path)
reports.load_report = stalled
sys.exit(tool.main(sys.argv[1:]))
"""


@pytest.mark.finding("cluster-interrupted")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_while_it_reads_prints_the_interrupted_document(tmp_path, report, signum):
    write_nodes(tmp_path, report, 3, 3)
    code = STALLED_READ.format(tool=COMPARE, scripts=SCRIPTS)
    process, stdout, stderr = signal_when_ready([sys.executable, "-c", code, str(tmp_path)], signum)
    document, stopped = interrupted_finding(process, stdout, signum, "cluster-interrupted")
    assert stopped["fix"] and b"Traceback" not in stderr
    # what was read before the signal: the first report, and the count of those given
    assert [entry["rank"] for entry in document["reports"]] == [0]
    assert document["counts"] == {"given": 3, "read": 1, "too_large": 0, "listed": 1}
    assert document["gates"] == {} and not [i for i in ids(document) if i.startswith("cluster-rank")]


REPORTS = 5000


def compare_folder(folder, *args):
    started = time.time()
    completed = subprocess.run([sys.executable, COMPARE, str(folder)] + list(args), capture_output=True,
                               timeout=300, env=clean_env(), stdin=subprocess.DEVNULL)
    return completed, time.time() - started


def test_five_thousand_reports_give_a_bounded_document_with_every_count(tmp_path, report):
    """Ranks 0..4999 of a world of 5,003 on 1,250 hosts; every 7th rank on Python 3.12, rank 0 twice."""
    write_nodes(tmp_path, report, REPORTS, REPORTS + 3, rank_of=lambda number: 0 if number == 1 else number,
                python_of=lambda number: "3.12.1" if number % 7 == 3 else None)
    completed, seconds = compare_folder(tmp_path)
    size = len(completed.stdout)
    document = strict_json(completed.stdout)
    assert completed.returncode == document["exit_code"] == 1 and document["status"] == "gate-failed"
    assert size < bounds.DOCUMENT_MAX_BYTES and size < 64 << 10, size
    assert seconds < 120, seconds
    assert document["counts"] == {"given": REPORTS, "read": REPORTS, "too_large": 0, "listed": bounds.REPORTS_LISTED}
    assert len(document["reports"]) == bounds.REPORTS_LISTED
    findings = dict((f["id"], f) for f in document["findings"] if f["id"] != "cluster-stack-drift")
    missing = findings["cluster-rank-missing"]["evidence"]
    assert (missing["missing"], missing["missing_count"], missing["reports"]) == ([1, 5000, 5001, 5002], 4, REPORTS)
    assert findings["cluster-rank-duplicate"]["evidence"]["duplicates"]["RANK=0"]["count"] == 2
    [drift] = [f for f in document["findings"] if f["id"] == "cluster-stack-drift"]
    odd = len(range(3, REPORTS, 7))
    assert drift["evidence"]["fact"] == "python"
    assert [g["count"] for g in drift["evidence"]["groups"]] == [REPORTS - odd, odd]
    assert all(len(g["hosts"]) == bounds.HOSTS_NAMED for g in drift["evidence"]["groups"])
    assert "and %d more hosts" % (odd - bounds.HOSTS_NAMED) in drift["fix"]


def test_agreeing_reports_in_thousands_pass(tmp_path, report):
    write_nodes(tmp_path, report, 600, 600)
    completed, _ = compare_folder(tmp_path)
    document = strict_json(completed.stdout)
    assert completed.returncode == document["exit_code"] == 0, document["findings"]
    assert document["counts"]["read"] == 600 and document["groups"]["WORLD_SIZE"][0]["count"] == 600
