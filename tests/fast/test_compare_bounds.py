"""compare_reports.py's document is bounded whatever the number of reports (issue 39: 5,000 reports made
more than 2 MB): hosts per list, values per fact, reports, commands per fix and each text from a report are
capped, and the counts of the rest are always given, right. The rules still decide on every node."""

import json
import time

import pytest

from cluster_compare import bounds
from cluster_compare.render import to_markdown
from diagnostics_core.text import TEXT_LIMIT, dumps
from test_compare_reading import document_of, facts_of, findings_of, only, report

NODES = 1000


@pytest.fixture(scope="module")
def many():
    """NODES reports, two ranks per host, one rank short of the world: torch in 11 versions, MASTER_PORT in 9."""
    documents = [report("n%04d" % (i // 2), rank=i, world=NODES + 1, MASTER_PORT=29500 + i % 9,
                        edits=[("torch.version", "2.%d.0" % (i % 11))]) for i in range(NODES)]
    started = time.time()
    facts = facts_of(*documents)
    document = document_of(facts)
    return facts, document, time.time() - started


def size(document):
    return len(dumps(document).encode("utf-8"))


def test_many_reports_give_a_small_document_in_bounded_time(many):
    facts, document, seconds = many
    assert size(document) < 32 << 10 and seconds < 5
    assert len(document["reports"]) == bounds.REPORTS_LISTED
    assert document["counts"] == {"given": NODES, "read": NODES, "too_large": 0, "listed": bounds.REPORTS_LISTED}


def test_every_group_is_counted_and_names_at_most_its_share_of_hosts(many):
    _, document, _ = many
    torch = document["groups"]["torch"]
    assert len(torch) == bounds.GROUPS_LISTED and all(len(g["hosts"]) == bounds.HOSTS_NAMED for g in torch)
    rest = document["groups_not_listed"]["torch"]
    assert rest == {"values": 11 - bounds.GROUPS_LISTED, "hosts": NODES - sum(g["count"] for g in torch)}
    per_version = sorted((len(range(v, NODES, 11)) for v in range(11)), reverse=True)
    assert [g["count"] for g in torch] == per_version[:bounds.GROUPS_LISTED]
    port = document["groups"]["MASTER_PORT"]
    assert sum(g["count"] for g in port) + document["groups_not_listed"].get("MASTER_PORT", {}).get("hosts", 0) == NODES


def test_the_rules_decide_on_every_node_and_show_counts(many):
    facts, document, _ = many
    findings = document["findings"]
    drift = only(findings, "cluster-stack-drift", "torch")
    assert drift["evidence"]["groups_not_listed"] == document["groups_not_listed"]["torch"]
    assert drift["fix"].count("more hosts") >= 1 and len(drift["fix"]) <= bounds.FIX_CHARS + 200
    missing = only(findings, "cluster-rank-missing")["evidence"]
    assert missing["missing"] == [NODES] and missing["missing_count"] == 1 and missing["reports"] == NODES
    assert document["exit_code"] == 1


def test_duplicate_ranks_beyond_the_listed_ones_are_counted():
    documents = [report("h%d" % i, rank=i // 2, world=50) for i in range(100)]
    found = only(findings_of(facts_of(*documents)), "cluster-rank-duplicate")["evidence"]
    assert found["ranks_duplicated"] == 50 and len(found["duplicates"]) == bounds.GROUPS_LISTED
    assert all(entry["count"] == 2 for entry in found["duplicates"].values())


def long(tag, number):
    """A text as long as the document keeps one (TEXT_LIMIT), distinct per node."""
    unit = "%s%d-" % (tag, number)
    return (unit * (TEXT_LIMIT // len(unit) + 1))[:TEXT_LIMIT]


def worst(number):
    """A report whose every text is as long as a report can make it, and different on every node."""
    document = report(long("host", number), rank=number * 7, world=10 ** 6, MASTER_ADDR=long("addr", number),
                      MASTER_PORT=long("port", number), GLOO_SOCKET_IFNAME=long("if", number),
                      NCCL_SOCKET_IFNAME=long("nif", number), TP_SOCKET_IFNAME=long("tp", number), edits=[
        ("python.version", long("3.", number)), ("torch.version", long("2.", number)),
        ("torch.cuda", long("c", number)), ("cuda.nccl_version", list(range(number, number + 500))),
        ("cuda.cudnn_version", number), ("pyg.version", long("9.", number)),
        ("sampling.neighbor_backend", long("nb", number)), ("python.executable", long("/py", number)),
        ("python.prefix", long("/pre", number)), ("pyg.file", long("/f", number)), ("torch.file", long("/t", number)),
        ("schema_version", long("s", number)), ("cpu.affinity.count", number + 1),
        ("environment.network_interfaces", [long("n%d" % k, number) for k in range(40)]),
        ("install.index_url", long("u", number)), ("install.torch_minor", long("m", number))])
    for module in document["extensions"]:
        document["extensions"][module] = {"status": "ok" if number % 2 else long("st", number),
                                          "version": long("1.", number), "file": long("/e", number)}
    document["findings"] = [{"id": "launch-x%d-%d" % (number, k), "severity": "error", "fix": long("fix", number)}
                            for k in range(10)]
    return document


@pytest.fixture(scope="module")
def worst_case():
    facts = facts_of(*[worst(number) for number in range(bounds.REPORTS_LISTED + 6)],
                     too_large=[long("/big", k) for k in range(40)])
    return document_of(facts)


def test_the_document_stays_under_its_stated_bound_whatever_the_reports_hold(worst_case):
    assert size(worst_case) < bounds.DOCUMENT_MAX_BYTES
    assert len(to_markdown(worst_case).encode("utf-8")) < bounds.DOCUMENT_MAX_BYTES


def test_no_fix_is_cut_by_the_document(worst_case):
    printed = json.loads(dumps(worst_case))
    for built, shown in zip(worst_case["findings"], printed["findings"]):
        assert shown["fix"] == built["fix"], built["id"]
        assert built["fix"] is None or len(built["fix"]) <= TEXT_LIMIT


@pytest.mark.parametrize("key, listed", [
    ("reports", bounds.REPORTS_LISTED), ("hosts", bounds.HOSTS_NAMED), ("groups", bounds.GROUPS_LISTED)])
def test_each_list_shown_is_capped(worst_case, key, listed):
    if key == "reports":
        assert len(worst_case["reports"]) == listed
        return
    for finding in worst_case["findings"]:
        for group in finding["evidence"].get("groups", []) if isinstance(finding["evidence"], dict) else []:
            assert len(group["hosts"]) <= bounds.HOSTS_NAMED
        if key == "groups" and "groups" in finding["evidence"]:
            assert len(finding["evidence"]["groups"]) <= listed


@pytest.mark.parametrize("value, shown", [
    ("2.13.0", "2.13.0"), ([2, 21, 5], [2, 21, 5]), (None, None), (91002, 91002),
    (list(range(100)), json.dumps(list(range(100)))[:170]),
])
def test_a_value_is_shown_whole_or_cut_with_its_head(value, shown):
    assert bounds.value(value) == shown or bounds.value(value).startswith(shown)
    if isinstance(value, list) and len(value) > bounds.ITEMS_LISTED:
        assert len(bounds.value(value)) <= bounds.TEXT_CHARS + 40


def test_the_reference_states_the_bounds_the_code_applies():
    from pathlib import Path
    text = (Path(__file__).resolve().parents[2] / "references" / "troubleshooting.md").read_text()
    section = text[text.index("## Cluster comparison"):text.index("### cluster-stack-drift")]
    section = " ".join(section.split())
    assert "under %d KiB for any number of reports" % (bounds.DOCUMENT_MAX_BYTES >> 10) in section
    assert "the first %d reports, %d values per fact and %d hosts per list" % (
        bounds.REPORTS_LISTED, bounds.GROUPS_LISTED, bounds.HOSTS_NAMED) in section
