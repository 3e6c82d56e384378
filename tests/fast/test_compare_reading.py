"""compare_reports.py in process: a checker report read into a node (every field type-checked), labels,
and each compared fact grouped by value. The builders here serve every compare test of the fast tier."""

import copy
import json

import pytest

from cluster_compare import facts as comparison, reports
from cluster_compare.findings import GATE, TOOL
from cluster_compare.render import render
from cluster_compare.rules import RULES
from diagnostics_core import cli, runner, safe_json

# A real report, trimmed to the fields compare reads: check_sampling_backends.py (full run: torch 2.13.0+cpu,
# PyG 2.8.1, torch-scatter and torch-sparse, no pyg-lib) on the CI machine.
RECORDED = {
    "schema_version": "2.2", "status": "warning",
    "environment": {"hostname": "vm", "launch": {}, "network_interfaces": ["eth0", "ifb0", "ifb1", "lo"]},
    "python": {"version": "3.11.7", "executable": "/root/.venvs/scalable-distributed/bin/python",
               "prefix": "/root/.venvs/scalable-distributed"},
    "torch": {"status": "ok", "version": "2.13.0+cpu", "cuda": None},
    "cuda": {"nccl_version": None, "cudnn_version": None},
    "pyg": {"status": "ok", "version": "2.8.1"},
    "sampling": {"neighbor_backend": "torch-sparse"},
    "extensions": {
        "pyg_lib": {"status": "not-installed", "distribution": "pyg-lib"},
        "torch_scatter": {"status": "ok", "version": "2.1.2", "distribution": "torch-scatter"},
        "torch_sparse": {"status": "ok", "version": "0.6.18", "distribution": "torch-sparse"},
        "torch_cluster": {"status": "not-installed", "distribution": "torch-cluster"},
        "torch_spline_conv": {"status": "not-installed", "distribution": "torch-spline-conv"}},
    "cpu": {"logical_cores": 2, "affinity": {"count": 2, "cpus": "0-1"}},
    "install": {"torch_minor": "2.13", "variant": "cpu", "platform": "linux-x86_64",
                "index_url": "https://data.pyg.org/whl/torch-2.13.0+cpu.html"},
    "findings": [{"id": "metis-unavailable", "severity": "warning"}, {"id": "ext-source-build", "severity": "info"}],
}


def report(host="node0", rank=None, world=None, edits=(), **launch):
    """The recorded report as node `host` (rank/world: RANK and WORLD_SIZE; launch: more variables) would
    write it; edits: (dotted field, value) pairs applied last."""
    document = copy.deepcopy(RECORDED)
    document["environment"]["hostname"] = host
    variables = dict(launch)
    if rank is not None:
        variables["RANK"] = rank
    if world is not None:
        variables["WORLD_SIZE"] = world
    for name, value in variables.items():
        document["environment"]["launch"][name] = {"raw": str(value), "value": value, "error": None}
    for field, value in edits:
        edit(document, field, value)
    return document


def edit(document, field, value):
    keys = field.split(".")
    target = document
    for key in keys[:-1]:
        target = target.setdefault(key, {})
    target[keys[-1]] = value
    return document


def facts_of(*documents, too_large=()):
    """The facts gather builds from files reports/0.json, reports/1.json, ... holding `documents`, and
    `too_large` files over the size bound."""
    facts = comparison.new_facts(len(documents) + len(too_large))
    for number, document in enumerate(documents):
        path = "reports/%d.json" % number
        comparison.add(facts, path, reports.report_of(path, document))
    for path in too_large:
        comparison.refuse_size(facts, path)
    return comparison.complete(facts)


def findings_of(facts):
    return [item for rule in RULES for item in rule(facts, None)]


def document_of(facts):
    """The document the runner prints for these facts: envelope, gates, the tool's sections."""
    findings = findings_of(facts)
    gates = runner.error_gate(GATE)(facts, findings, None)
    document, exit_code = TOOL.document(findings, gates, {"name": "compare_reports.py"})
    render(document, facts, None)
    return document


def ids(findings):
    return [item["id"] for item in findings]


def only(findings, finding_id, fact=None):
    found = [item for item in findings if item["id"] == finding_id
             and (fact is None or item["evidence"].get("fact") == fact)]
    assert len(found) == 1, (finding_id, fact, ids(findings))
    return found[0]


def test_the_recorded_report_reads_into_a_node_with_every_compared_fact():
    node = facts_of(report(rank=0, world=1))["nodes"][0]
    assert node["values"] == {
        "python": "3.11", "torch": "2.13.0+cpu", "torch CUDA": None, "NCCL": None, "cuDNN": None,
        "torch_geometric": "2.8.1", "neighbor backend": "torch-sparse", "pyg_lib": "not-installed",
        "torch_scatter": "ok 2.1.2", "torch_sparse": "ok 0.6.18", "torch_cluster": "not-installed",
        "torch_spline_conv": "not-installed", "WORLD_SIZE": "1", "MASTER_ADDR": None, "MASTER_PORT": None,
        "usable cores": 2}
    assert (node["rank"], node["world_size"], node["rank_variable"]) == (0, 1, "RANK")
    assert node["python"] == RECORDED["python"]["executable"] and node["cores"] == 2


@pytest.mark.parametrize("variables, expected", [
    ({"RANK": 3, "WORLD_SIZE": 4}, (3, 4, "RANK")),
    ({"SLURM_PROCID": 1, "SLURM_NTASKS": 2}, (1, 2, "SLURM_PROCID")),
    ({"OMPI_COMM_WORLD_RANK": 5, "OMPI_COMM_WORLD_SIZE": 8}, (5, 8, "OMPI_COMM_WORLD_RANK")),
    ({"PMI_RANK": 0, "PMI_SIZE": 2}, (0, 2, "PMI_RANK")),
    ({"RANK": 1, "SLURM_PROCID": 0, "SLURM_NTASKS": 2}, (1, None, "RANK")),  # the first launcher that set a rank
    ({"WORLD_SIZE": 2}, (None, None, None)),
])
def test_the_rank_comes_from_the_first_launcher_that_set_one(variables, expected):
    node = facts_of(report(**variables))["nodes"][0]
    assert (node["rank"], node["world_size"], node["rank_variable"]) == expected


def test_a_rank_the_checker_rejected_is_no_rank():
    document = report()
    document["environment"]["launch"]["RANK"] = {"raw": "x", "value": None, "error": "not an integer"}
    assert facts_of(document)["nodes"][0]["rank"] is None


@pytest.mark.parametrize("hosts, ranks, labels", [
    (["a", "b"], [0, 1], ["a", "b"]),
    (["a", "a"], [0, 1], ["a rank 0", "a rank 1"]),
    (["a", "a"], [None, None], ["a (reports/0.json)", "a (reports/1.json)"]),
    ([None, "b"], [None, None], ["0", "b"]),  # no host name: the file's name
])
def test_labels_name_the_host_and_the_rank_or_file_where_hosts_repeat(hosts, ranks, labels):
    documents = [report(host=host, rank=rank) for host, rank in zip(hosts, ranks)]
    assert [node["label"] for node in facts_of(*documents)["nodes"]] == labels


def test_a_long_host_name_is_cut_in_its_label():
    node = facts_of(report(host="h" * 5000))["nodes"][0]
    assert len(node["label"]) < reports.HOST_CHARS + 40 and node["hostname"].startswith("hhh")


def test_groups_put_the_largest_first_and_break_ties_by_the_first_report():
    facts = facts_of(report("a", edits=[("torch.version", "2.12.0")]), report("b"), report("c"),
                     report("d", edits=[("torch.version", "2.11.0")]))
    assert [(g["value"], g["members"]) for g in facts["compared"]["torch"]] == [
        ("2.13.0+cpu", [1, 2]), ("2.12.0", [0]), ("2.11.0", [3])]
    two = facts_of(report("a", edits=[("torch.version", "2.12.0")]), report("b"))
    assert [g["value"] for g in two["compared"]["torch"]] == ["2.12.0", "2.13.0+cpu"]


@pytest.mark.parametrize("field, a, b, same", [
    ("python.version", "3.11.7", "3.11.9", True),  # patch releases interoperate
    ("python.version", "3.11.7", "3.12.1", False),
    ("cuda.nccl_version", [2, 21, 5], [2, 21, 5], True),
    ("cuda.nccl_version", [2, 21, 5], [2, 26, 2], False),
    ("torch.cuda", None, "12.4", False),
])
def test_values_are_compared_as_data(field, a, b, same):
    facts = facts_of(report("a", edits=[(field, a)]), report("b", edits=[(field, b)]))
    name = {"python.version": "python", "cuda.nccl_version": "NCCL", "torch.cuda": "torch CUDA"}[field]
    assert len(facts["compared"][name]) == (1 if same else 2)


def test_a_fact_a_report_lacks_is_missing_and_a_null_fact_is_a_value():
    lacking = report("b")
    del lacking["torch"]["version"]
    facts = facts_of(report("a"), lacking, report("c", edits=[("torch.cuda", None)]))
    assert facts["missing"]["torch"] == [1] and facts["missing"]["torch CUDA"] == []
    assert [g["members"] for g in facts["compared"]["torch"]] == [[0, 2]]


@pytest.mark.parametrize("field, value", [
    ("environment.launch.RANK.value", [0]),
    ("environment.hostname", 7),
    ("extensions", ["pyg_lib"]),
    ("extensions.pyg_lib.status", {"ok": True}),
    ("cpu.affinity.count", "2"),
    ("cpu.affinity", "0-1"),
    ("environment.network_interfaces", [1, 2]),
    ("cuda.nccl_version", ["2", "21"]),
    ("python.version", 3.11),
    ("python.executable", ["/usr/bin/python3"]),
    ("pyg.file", 1),
    ("install.index_url", {}),
    ("environment.launch.MASTER_ADDR", "192.0.2.1"),
    ("schema_version", 2),
])
def test_a_field_of_the_wrong_type_is_a_usage_error_naming_file_and_field(field, value):
    document = report(rank=0, MASTER_ADDR="192.0.2.1", edits=[(field, value)])
    with pytest.raises(reports.Malformed) as raised:
        facts_of(report("good"), document)
    refusal = raised.value.usage_error()
    assert isinstance(refusal, cli.UsageError) and refusal.finding_id == "cluster-report-unreadable"
    assert refusal.evidence["file"] == "reports/1.json"
    assert refusal.evidence["field"] == field or field.startswith(refusal.evidence["field"] + "."), refusal.evidence


@pytest.mark.parametrize("document", [[], {"findings": []}, {"environment": {}}, "a report"])
def test_a_document_that_is_no_checker_report_is_refused(document):
    with pytest.raises(cli.UsageError) as raised:
        reports.report_of("node1.json", document)
    assert raised.value.finding_id == "cluster-report-unreadable"
    assert raised.value.evidence == {"file": "node1.json", "error": "no 'findings' and 'environment' keys"}


@pytest.mark.finding("cluster-report-unreadable")
@pytest.mark.parametrize("text, reason", [
    ('{"findings": [], "environment": %s%s}' % ("[" * 100000, "]" * 100000), "nested"),
    ("srun: error: node1: task 1: Exited with exit code 1\n", ""),
    ("", ""),
])
def test_a_file_that_is_no_json_report_is_unreadable_not_a_crash(tmp_path, text, reason):
    path = tmp_path / "node1.json"
    path.write_text(text)
    with pytest.raises(cli.UsageError) as raised:
        reports.load_report(str(path))
    assert raised.value.finding_id == "cluster-report-unreadable"
    assert raised.value.evidence["file"] == str(path) and reason in raised.value.evidence["error"]


def test_a_report_over_the_size_bound_is_too_large_not_unreadable(tmp_path, monkeypatch):
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(report()))
    monkeypatch.setattr(reports, "REPORT_MAX_BYTES", 100)
    with pytest.raises(safe_json.TooLarge):
        reports.load_report(str(path))


def test_a_folder_gives_its_json_files_in_order(tmp_path):
    for name in ("b.json", "a.json", "notes.txt"):
        (tmp_path / name).write_text("{}")
    assert reports.report_paths([str(tmp_path), "x.json"]) == [str(tmp_path / "a.json"), str(tmp_path / "b.json"),
                                                                "x.json"]


def test_lone_surrogates_from_a_report_become_safe_text():
    node = facts_of(report(host=u"node\udc80", MASTER_ADDR=u"\ud800x"))["nodes"][0]
    assert node["hostname"] == u"node\ufffd" and node["values"]["MASTER_ADDR"] == u"\ufffdx"


def test_only_the_known_extensions_are_compared():
    document = report(edits=[("extensions.made_up", {"status": "ok", "version": "1"})])
    assert "made_up" not in facts_of(document)["nodes"][0]["values"]
