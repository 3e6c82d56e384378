"""compare_reports.py's rules in process, each on reports built from the recorded one: drift of every
compared fact, launch variables, ranks, interfaces, a node's own launch errors, core counts, schema, size."""

import time

import pytest

from cluster_compare.bounds import RANKS_LISTED
from cluster_compare.rules import RULES
from test_compare_reading import RECORDED, document_of, facts_of, findings_of, ids, only, report

PYTHON = RECORDED["python"]["executable"]


def three(field, value, third="c"):
    """Two nodes as recorded, a third with `field` set to `value`."""
    return facts_of(report("a"), report("b"), report(third, edits=[(field, value)]))


def test_every_rule_is_a_function_of_facts_and_options():
    facts = facts_of(report("a", rank=0, world=2), report("b", rank=1, world=2))
    for rule in RULES:
        assert rule(facts, None) == [] or rule.__name__ == "rule_incomplete", rule.__name__
    assert ids(findings_of(facts)) == []


@pytest.mark.finding("cluster-single-report")
def test_one_report_is_info_and_nothing_else_fails():
    facts = facts_of(report("a", rank=0, world=1))
    found = findings_of(facts)
    assert ids(found) == ["cluster-single-report"] and found[0]["severity"] == "info"
    assert document_of(facts)["exit_code"] == 0


@pytest.mark.parametrize("field, value, fact", [
    ("python.version", "3.12.1", "python"),
    ("torch.version", "2.12.0", "torch"),
    ("torch.cuda", "12.4", "torch CUDA"),
    ("cuda.nccl_version", [2, 21, 5], "NCCL"),
    ("pyg.version", "2.7.0", "torch_geometric"),
    ("sampling.neighbor_backend", "pyg-lib", "neighbor backend"),
    ("extensions.torch_sparse", {"status": "not-installed"}, "torch_sparse"),
    ("extensions.pyg_lib", {"status": "ok", "version": "0.4.0"}, "pyg_lib"),
    ("extensions.torch_scatter", {"status": "ok", "version": "2.1.1"}, "torch_scatter"),
])
@pytest.mark.finding("cluster-stack-drift")
def test_a_fact_that_differs_on_one_node_is_drift_naming_it(field, value, fact):
    facts = three(field, value)
    found = only(findings_of(facts), "cluster-stack-drift", fact)
    assert found["severity"] == "error"
    assert [(g["count"], g["hosts"]) for g in found["evidence"]["groups"]] == [(2, ["a", "b"]), (1, ["c"])]
    assert found["fix"].startswith("on c: ")
    document = document_of(facts)
    assert document["exit_code"] == 1 and document["gates"]["consistent"]["passed"] is False


@pytest.mark.finding("cluster-cudnn-drift")
def test_cudnn_drift_is_a_warning_naming_both_groups():
    facts = facts_of(report("a", edits=[("cuda.cudnn_version", 91002)]),
                     report("b", edits=[("cuda.cudnn_version", 90100)]))
    drift = only(findings_of(facts), "cluster-cudnn-drift")
    assert drift["severity"] == "warning"
    assert sorted(g["value"] for g in drift["evidence"]["groups"]) == [90100, 91002]
    document = document_of(facts)
    assert document["exit_code"] == 0 and document["gates"]["consistent"]["passed"] is True


@pytest.mark.parametrize("field, reference, other, expected", [
    # a local build tag lives on PyTorch's index for that build, not on PyPI
    ("torch.version", "2.13.0+cpu", "2.12.0",
     "on c: %s -m pip install torch==2.13.0+cpu --index-url https://download.pytorch.org/whl/cpu" % PYTHON),
    ("torch.version", "2.14.1", "2.13.0", "on c: %s -m pip install torch==2.14.1 (" % PYTHON),
    ("pyg.version", "2.8.1", "2.7.0", "on c: %s -m pip install torch_geometric==2.8.1 (" % PYTHON),
    ("extensions.pyg_lib", {"status": "not-installed"}, {"status": "ok", "version": "0.4.0"},
     "on c: %s -m pip uninstall -y pyg-lib (" % PYTHON),
    ("extensions.pyg_lib", {"status": "not-installed"}, {"status": "import-error"},
     "on c: %s -m pip uninstall -y pyg-lib (" % PYTHON),
    # the wheel table has a pyg-lib wheel for torch 2.13 on CPU: the fail-fast wheel line
    ("extensions.pyg_lib", {"status": "ok", "version": "0.8.0+pt213cpu"}, {"status": "not-installed"},
     "on c: %s -m pip install --only-binary=:all: pyg-lib==0.8.0+pt213cpu -f "
     "https://data.pyg.org/whl/torch-2.13.0+cpu.html (" % PYTHON),
    # no torch-sparse wheel for torch 2.13: the source build, never a guessed wheel
    ("extensions.torch_sparse", {"status": "ok", "version": "0.6.18"}, {"status": "not-installed"},
     "on c: %s -m pip install --force-reinstall --no-deps --no-cache-dir --no-build-isolation torch-sparse==" % PYTHON),
    ("python.version", "3.11.7", "3.12.1", "check_sampling_backends.py --require-neighbor-backend (a full report"),
])
def test_the_fix_makes_the_other_node_match_the_largest_group(field, reference, other, expected):
    facts = facts_of(report("a", edits=[(field, reference)]), report("b", edits=[(field, reference)]),
                     report("c", edits=[(field, other)]))
    [found] = [item for item in findings_of(facts) if item["id"] == "cluster-stack-drift"]
    assert expected in found["fix"], found["fix"]
    assert "(to match the largest group, 2 hosts: " in found["fix"] or field == "python.version"


@pytest.mark.parametrize("states", [("not-run", "not-run", "ok"), ("not-probed", "not-probed", "not-installed"),
                                    ("blocked", "blocked", "not-installed")])
def test_no_fix_acts_on_an_extension_state_that_is_not_known(states):
    documents = [report(host, edits=[("extensions.pyg_lib", {"status": state, "version": "0.4.0"})])
                 for host, state in zip("abc", states)]
    found = only(findings_of(facts_of(*documents)), "cluster-stack-drift", "pyg_lib")
    assert "uninstall" not in found["fix"] and "pip install" not in found["fix"]
    assert "check_sampling_backends.py --require-neighbor-backend" in found["fix"]
    assert "the largest group has no state to match for pyg_lib" in found["fix"]


def test_a_copy_outside_the_interpreters_prefix_is_named_with_its_folder():
    found = only(findings_of(three("pyg.version", "2.7.0")), "cluster-stack-drift", "torch_geometric")
    assert "pip install torch_geometric==2.8.1" in found["fix"]
    facts = facts_of(report("a"), report("b"), report("c", edits=[
        ("pyg.version", "2.7.0"), ("pyg.file", "/home/me/stale/torch_geometric/__init__.py")]))
    found = only(findings_of(facts), "cluster-stack-drift", "torch_geometric")
    assert found["fix"].startswith("on c: torch_geometric is imported from /home/me/stale, outside "
                                   "/root/.venvs/scalable-distributed: remove that folder from PYTHONPATH")
    assert found["evidence"]["files"] == {"c": "/home/me/stale/torch_geometric/__init__.py"}


def test_hosts_that_need_the_same_command_are_named_together_and_the_others_counted():
    same = [report(host, edits=[("torch.version", "2.12.0")]) for host in ("c", "d")]
    own = [report("p%d" % n, edits=[("torch.version", "2.12.0"), ("python.executable", "/opt/py%d/bin/python" % n)])
           for n in range(4)]
    facts = facts_of(*([report("r%d" % n) for n in range(7)] + same + own))
    fix = only(findings_of(facts), "cluster-stack-drift", "torch")["fix"]
    assert fix.startswith("on c, d: %s -m pip install torch==2.13.0+cpu" % PYTHON)
    assert "on p0: /opt/py0/bin/python -m pip" in fix and "on p1: /opt/py1/bin/python" in fix
    assert "/opt/py2/" not in fix and "2 more hosts need other commands" in fix


@pytest.mark.finding("cluster-launch-disagrees")
@pytest.mark.parametrize("name, reference, other", [
    ("MASTER_ADDR", "192.0.2.1", "node0.cluster"), ("MASTER_PORT", 29500, 29501), ("WORLD_SIZE", 4, 8)])
def test_launch_variables_that_disagree_export_the_largest_groups_value(name, reference, other):
    facts = facts_of(report("a", **{name: reference}), report("b", **{name: reference}),
                     report("c", **{name: other}))
    found = only(findings_of(facts), "cluster-launch-disagrees", name)
    assert found["fix"].startswith("export %s=%s on every node before the launch" % (name, reference))
    assert [g["value"] for g in found["evidence"]["groups"]] == [str(reference), str(other)]


def test_an_unset_variable_is_never_printed_as_a_value():
    facts = facts_of(report("a", MASTER_ADDR="192.0.2.1"), report("b", MASTER_ADDR="192.0.2.1"), report("c"))
    fix = only(findings_of(facts), "cluster-launch-disagrees", "MASTER_ADDR")["fix"]
    assert fix == ("export MASTER_ADDR=192.0.2.1 on every node before the launch (one job script for all nodes); "
                   "it is unset on c")
    facts = facts_of(report("a"), report("b"), report("c", MASTER_ADDR="192.0.2.1"))
    fix = only(findings_of(facts), "cluster-launch-disagrees", "MASTER_ADDR")["fix"]
    assert "export MASTER_ADDR=" not in fix and fix.startswith("2 of 3 nodes do not set MASTER_ADDR: unset it on c,")


def rejected(document, name, raw):
    document["environment"]["launch"][name] = {"raw": raw, "value": None, "error": "not a port"}
    return document


def test_a_value_the_checker_rejected_is_never_exported():
    facts = facts_of(rejected(report("a"), "MASTER_PORT", "x"), rejected(report("b"), "MASTER_PORT", "x"),
                     report("c", MASTER_PORT=29500))
    fix = only(findings_of(facts), "cluster-launch-disagrees", "MASTER_PORT")["fix"]
    assert fix.startswith("export MASTER_PORT=29500 ")
    facts = facts_of(rejected(report("a"), "MASTER_PORT", "x"), rejected(report("b"), "MASTER_PORT", "y"))
    fix = only(findings_of(facts), "cluster-launch-disagrees", "MASTER_PORT")["fix"]
    assert fix.startswith("no node sets MASTER_PORT to a value this fix can export") and "export MASTER_PORT=" not in fix


@pytest.mark.finding("cluster-rank-duplicate", "cluster-rank-missing")
def test_duplicate_and_missing_ranks():
    found = findings_of(facts_of(report("a", rank=0, world=3), report("b", rank=0, world=3)))
    duplicate = only(found, "cluster-rank-duplicate")
    assert duplicate["evidence"]["duplicates"] == {"RANK=0": {"count": 2, "hosts": ["a", "b"]}}
    assert duplicate["evidence"]["ranks_duplicated"] == 1
    missing = only(found, "cluster-rank-missing")
    assert missing["evidence"]["missing"] == [1, 2] and missing["evidence"]["missing_count"] == 2
    assert missing["evidence"]["world_size"] == 3 and "WORLD_SIZE=3 waits" in missing["fix"]


@pytest.mark.parametrize("variables", [
    [{"SLURM_PROCID": 0, "SLURM_NTASKS": 2}, {"SLURM_PROCID": 1, "SLURM_NTASKS": 2}],
    [{"OMPI_COMM_WORLD_RANK": 1, "OMPI_COMM_WORLD_SIZE": 2}, {"OMPI_COMM_WORLD_RANK": 0, "OMPI_COMM_WORLD_SIZE": 2}],
    [{"RANK": 0, "WORLD_SIZE": 2}, {"RANK": 1, "WORLD_SIZE": 2}],
])
def test_a_complete_set_of_ranks_from_any_launcher_is_no_finding(variables):
    facts = facts_of(*[report("n%d" % n, **v) for n, v in enumerate(variables)])
    assert not [i for i in ids(findings_of(facts)) if i.startswith("cluster-rank")]


def test_a_huge_world_size_from_a_report_is_counted_not_walked():
    world = 10 ** 19
    started = time.time()
    found = findings_of(facts_of(report("a", rank=0, world=world), report("b", rank=1, world=world)))
    missing = only(found, "cluster-rank-missing")["evidence"]
    assert time.time() - started < 1
    assert missing["missing_count"] == world - 2 and missing["missing"] == list(range(2, 2 + RANKS_LISTED))


def test_ranks_outside_the_world_do_not_count_as_present():
    missing = only(findings_of(facts_of(report("a", rank=0, world=2), report("b", rank=5, world=2))),
                   "cluster-rank-missing")["evidence"]
    assert missing["missing"] == [1] and missing["missing_count"] == 1


@pytest.mark.finding("cluster-socket-ifname-missing")
@pytest.mark.parametrize("variable, value, absent", [
    ("GLOO_SOCKET_IFNAME", "ib0", ["ib0"]),
    ("GLOO_SOCKET_IFNAME", "eth0,ib0", ["ib0"]),
    ("NCCL_SOCKET_IFNAME", "eth", None),       # NCCL takes prefixes
    ("NCCL_SOCKET_IFNAME", "=eth", ["eth"]),   # '=': exact names
    ("NCCL_SOCKET_IFNAME", "^docker", None),   # an exclusion list names nothing missing
    ("TP_SOCKET_IFNAME", "ens5", ["ens5"]),
])
def test_an_interface_variable_naming_an_interface_the_node_lacks(variable, value, absent):
    found = findings_of(facts_of(report("a"), report("b", **{variable: value})))
    if absent is None:
        assert "cluster-socket-ifname-missing" not in ids(found)
        return
    evidence = only(found, "cluster-socket-ifname-missing")["evidence"]
    assert evidence["count"] == 1 and list(evidence["hosts"]) == ["b"]
    assert evidence["hosts"]["b"]["variables"][variable]["absent"] == absent
    assert evidence["hosts"]["b"]["interfaces"] == RECORDED["environment"]["network_interfaces"]


def test_a_node_that_listed_no_interfaces_is_not_judged():
    document = report("b", GLOO_SOCKET_IFNAME="ib0", edits=[("environment.network_interfaces", None)])
    assert "cluster-socket-ifname-missing" not in ids(findings_of(facts_of(report("a"), document)))


def with_findings(document, *items):
    document["findings"] = list(document["findings"]) + list(items)
    return document


@pytest.mark.finding("cluster-node-launch-error")
def test_a_launch_error_in_a_node_report_is_repeated_with_its_hosts():
    error = {"id": "launch-master-incomplete", "severity": "error", "fix": "export MASTER_PORT=29500"}
    facts = facts_of(report("a"), with_findings(report("b"), error), with_findings(report("c"), error))
    found = only(findings_of(facts), "cluster-node-launch-error")
    assert found["evidence"]["hosts"] == {"launch-master-incomplete": {"count": 2, "hosts": ["b", "c"]}}
    assert found["evidence"]["fixes"]["launch-master-incomplete"]["b"] == "export MASTER_PORT=29500"
    assert "--explain launch-master-incomplete" in found["fix"]
    assert document_of(facts)["exit_code"] == 1


@pytest.mark.parametrize("item", [
    {"id": "launch-master-incomplete", "severity": "warning"},
    {"id": "metis-unavailable", "severity": "error"},
    {"id": "launch-$(reboot)", "severity": "error"},
    {"id": 7, "severity": "error"},
    "launch-master-incomplete",
])
def test_only_a_node_s_own_launch_errors_are_repeated(item):
    facts = facts_of(report("a"), with_findings(report("b"), item))
    assert "cluster-node-launch-error" not in ids(findings_of(facts))


@pytest.mark.finding("cluster-cpu-count-differs")
def test_core_counts_that_differ_are_info_sized_for_the_smallest_share():
    facts = facts_of(report("a", LOCAL_WORLD_SIZE=4, edits=[("cpu.affinity.count", 8)]),
                     report("b", edits=[("cpu.affinity.count", 3)]), report("c", edits=[("cpu.affinity.count", 8)]))
    found = only(findings_of(facts), "cluster-cpu-count-differs")
    assert found["severity"] == "info"
    per_process = [(p["hosts"], p["cores_per_process"]) for p in found["evidence"]["per_process"]]
    assert per_process == [(["a"], 2), (["b"], 3), (["c"], 8)]
    assert "OMP_NUM_THREADS=2 " in found["fix"]
    assert [g["value"] for g in found["evidence"]["groups"]] == [8, 3]


@pytest.mark.parametrize("cores", [None, 0])
def test_an_unknown_core_count_is_not_a_difference(cores):
    facts = facts_of(report("a"), report("b", edits=[("cpu.affinity", None), ("cpu.logical_cores", cores)]))
    assert "cluster-cpu-count-differs" not in ids(findings_of(facts))


def test_an_absurd_core_count_from_a_report_still_gives_a_whole_thread_count():
    facts = facts_of(report("a", edits=[("cpu.affinity.count", -4)]), report("b", edits=[("cpu.affinity.count", 10 ** 30)]))
    found = only(findings_of(facts), "cluster-cpu-count-differs")
    assert "OMP_NUM_THREADS=1 " in found["fix"]


@pytest.mark.parametrize("world", [0, -3])
def test_a_world_size_of_no_processes_misses_no_rank(world):
    found = findings_of(facts_of(report("a", rank=0, world=world), report("b", rank=1, world=world)))
    assert "cluster-rank-missing" not in ids(found)


@pytest.mark.finding("cluster-schema-mismatch")
def test_reports_of_different_schema_majors_are_a_finding():
    facts = facts_of(report("a"), report("b", edits=[("schema_version", "3.0")]), report("c"))
    found = only(findings_of(facts), "cluster-schema-mismatch")
    assert found["evidence"]["schema_majors"] == {"2": {"count": 2, "files": ["reports/0.json", "reports/2.json"]},
                                                  "3": {"count": 1, "files": ["reports/1.json"]}}
    assert "cluster-schema-mismatch" not in ids(findings_of(three("schema_version", "2.9")))


@pytest.mark.finding("cluster-report-incomplete")
def test_a_report_lacking_facts_is_incomplete_and_still_compared():
    static = report("b")
    static["torch"] = {"status": "not-probed"}
    del static["extensions"]["pyg_lib"]
    found = findings_of(facts_of(report("a"), static))
    incomplete = only(found, "cluster-report-incomplete")
    assert incomplete["evidence"]["missing"] == {"torch": {"count": 1, "hosts": ["b"]},
                                                 "torch CUDA": {"count": 1, "hosts": ["b"]},
                                                 "pyg_lib": {"count": 1, "hosts": ["b"]}}
    assert incomplete["severity"] == "warning" and "cluster-stack-drift" not in ids(found)


@pytest.mark.finding("cluster-report-too-large")
def test_reports_over_the_size_bound_are_counted_and_the_others_compared():
    facts = facts_of(report("a", rank=0, world=3), report("b", rank=1, world=3), too_large=["reports/huge.json"])
    found = findings_of(facts)
    large = only(found, "cluster-report-too-large")
    assert large["evidence"]["files"] == ["reports/huge.json"] and large["evidence"]["count"] == 1
    assert only(found, "cluster-rank-missing")["evidence"]["missing"] == [2]
    assert document_of(facts)["counts"] == {"given": 3, "read": 2, "too_large": 1, "listed": 2}
