"""The checker's document as the runner composes it from facts (tests/support/fakes.py), in process: the schema
and key order for every way a run ends, the compact document and its budget, the container section, markdown
with its redactions, the stderr summary."""

import copy
import json
import os
import time

import jsonschema
import pytest

from diagnostics_core import runner
from diagnostics_core.cli import UsageError
from diagnostics_core.contract import SCRIPTS
from diagnostics_core.interrupt import Interrupted
from diagnostics_core.text import dumps
from sampling_checker import render, rules
from sampling_checker.cli import SPEC
from sampling_checker.schema import FACT_SECTIONS, json_schema
from support.fakes import checker_facts

SCHEMA = json_schema()


def composed(facts, *argv, stopped=None, usage=None, internal=None):
    """(document, exit code) as runner.main composes them after gather, rules and gates."""
    run = runner.Run(SPEC, list(argv), time.time())
    run.options = SPEC.parser().parse_args(list(argv))
    run.plan_time()
    run.facts = facts
    if usage is None and stopped is None and internal is None:
        run.findings = rules.diagnose(facts, run.options)
        run.gates = rules.evaluate_gates(facts, run.findings, run.options)
    run.usage, run.stopped, run.internal = usage, stopped, internal
    return runner.compose(run)


def valid(document):
    jsonschema.validate(document, SCHEMA)
    assert list(document) == SCHEMA["required"]
    return document


def no_backend(facts):
    facts["pyg"]["neighbor_backend"] = facts["sampling"]["neighbor_backend"] = None
    facts["pyg"]["flags"]["WITH_TORCH_SPARSE"] = False
    return facts


@pytest.mark.parametrize("facts, argv, status, code", [
    (checker_facts(), [], "warning", 0),
    (checker_facts(), ["--full"], "warning", 0),
    (checker_facts(), ["--require-neighbor-backend", "--require-distributed", "gloo"], "warning", 0),
    (checker_facts(), ["--require-cuda"], "gate-failed", 1),
    (no_backend(checker_facts()), ["--require-neighbor-backend"], "gate-failed", 1),
    (no_backend(checker_facts()), [], "error", 0),
    (checker_facts(static_only=True), ["--static-only"], "incomplete", 0),
    ({"interpreter": None, "static_failure": {"how": "crashed"}}, ["--require-cuda"], "gate-failed", 1),
    ({"interpreter": None, "static_failure": {"how": "deadline"}}, [], "error", 0),
])
def test_every_document_validates_in_key_order(facts, argv, status, code):
    document, exit_code = composed(copy.deepcopy(facts), *argv)
    valid(document)
    assert (document["status"], exit_code, document["exit_code"]) == (status, code, code)
    assert document["checker"]["name"] == "check_sampling_backends.py" and document["checker"]["read_only"] is True


@pytest.mark.parametrize("signum, code", [(2, 130), (15, 143)])
def test_an_interrupted_document_keeps_what_was_gathered(signum, code):
    stop = Interrupted(signum)
    stop.running = {"probe_step": "ext:pyg_lib", "interpreter": "/v/bin/python"}
    facts = {"interpreter": checker_facts()["interpreter"]}
    document, exit_code = composed(facts, "--timeout", "30", stopped=stop)
    valid(document)
    assert exit_code == document["exit_code"] == code and document["status"] == "interrupted"
    [item] = document["findings"]
    assert item["id"] == "checker-interrupted" and item["evidence"]["running"]["probe_step"] == "ext:pyg_lib"
    assert item["fix"].endswith("check_sampling_backends.py --timeout 30  # let it finish; --timeout bounds the "
                                "whole run")
    assert document["interpreter"]["probed"] == facts["interpreter"]["probed"] and document["torch"] is None


def test_a_usage_error_and_an_internal_error_are_documents_too():
    refused = UsageError("line", "usage-error", {"message": "m"}, "python3 x --help")
    document, code = composed({}, usage=refused)
    assert code == 2 and valid(document)["status"] == "usage-error" and document["python"] is None
    try:
        raise KeyError("rule bug")
    except KeyError as error:
        from diagnostics_core.cli import internal_error
        from diagnostics_core.text import describe_exception
        broken = internal_error(error, describe_exception)
    document, code = composed(checker_facts(), internal=broken)
    assert code == 3 and valid(document)["status"] == "internal-error"
    assert document["findings"][-1]["id"] == "checker-internal-error"


def test_render_fills_the_checker_section_when_the_command_line_was_refused():
    document = {"checker": {"name": "check_sampling_backends.py"}}
    render.render_sections(document, {}, None)
    assert document["checker"]["mode"] == "full" and document["checker"]["timeout_s"] == 60.0
    assert all(document[section] is None for section in FACT_SECTIONS)


@pytest.mark.parametrize("cpu, memory, kept", [
    ({"cores": None, "limited_at": None}, {"limit_bytes": None, "limited_at": None}, False),
    ({"cores": 2.0, "quota_us": 200000, "period_us": 100000, "limited_at": "/sys/fs/cgroup/job"},
     {"limit_bytes": 1 << 30, "limited_at": "/sys/fs/cgroup/job"}, True),
])
def test_the_compact_container_section_names_a_cgroup_folder_only_where_it_limits(cpu, memory, kept):
    facts = checker_facts()
    facts["container"]["cgroup_cpu"].update(cpu)
    facts["container"]["cgroup_memory"].update(memory)
    compact, _ = composed(copy.deepcopy(facts))
    full, _ = composed(copy.deepcopy(facts), "--full")
    for key in ("cgroup_cpu", "cgroup_memory"):
        assert ("folder" in compact["container"][key]) is kept and full["container"][key]["folder"] == "/sys/fs/cgroup"
    assert compact["container"]["shm"] == full["container"]["shm"]
    assert compact["container"]["open_files"] == {"soft": 65536, "hard": 65536}


@pytest.mark.parametrize("length", [20, 150, 400, 1500])
def test_the_compact_document_fits_whatever_the_interpreter_path(length):
    python = "/" + "x" * (length - len("/bin/python") - 1) + "/bin/python"
    document, _ = composed(no_backend(checker_facts(python=python)))
    text = dumps(document)
    assert len(text) < 10000, len(text)
    errors = [f for f in document["findings"] if f["severity"] == "error"]
    assert errors and all(f["fix"] and f["title"] for f in errors)
    assert document["findings"][0]["fix"].startswith(python + " -m pip install")
    full, _ = composed(no_backend(checker_facts(python=python)), "--full")
    assert "trimmed" not in full["checker"]
    if "trimmed" in document["checker"]:
        assert "--full" in document["checker"]["trimmed"]["why"] and document["checker"]["trimmed"]["cut"]


def hostile_document(**launch):
    facts = checker_facts()
    facts["environment"]["launch"] = dict((name, {"raw": value, "value": value, "error": None})
                                          for name, value in launch.items())
    document, _ = composed(facts)
    document["findings"][0]["fix"] = "ssh %s | %s" % (launch.get("MASTER_ADDR"), launch.get("SLURM_JOB_NODELIST"))
    return document


def test_markdown_redacts_job_node_lists_and_master_addr(monkeypatch):
    for name in ("SLURM_JOB_NODELIST", "SLURM_NODELIST", "MASTER_ADDR"):
        monkeypatch.delenv(name, raising=False)
    document = hostile_document(SLURM_JOB_NODELIST="gpu-node[017-019]", MASTER_ADDR="gpu-node017.cluster.example")
    report = render.render_markdown(document)
    assert "gpu-node" not in report and "cluster.example" not in report
    assert "<master_addr>" in report and "<slurm_job_nodelist>" in report
    assert "gpu-node017.cluster.example" in render.render_markdown(document, redact_private=False)


def test_markdown_is_a_short_table_with_the_findings_and_their_fixes():
    document, _ = composed(checker_facts())
    report = render.render_markdown(document, redact_private=False)
    lines = report.splitlines()
    assert lines[0].startswith("### PyG environment (check_sampling_backends 2.")
    assert "| component | version (state) |" in report and "| torch | 2.13.0+cpu (CUDA build: none) |" in report
    assert "| neighbour sampling | torch-sparse (smoke sample passed) |" in report
    assert len(lines) < 80 and "#### Findings (%d)" % len(document["findings"]) in report
    assert report.count("  fix: `") == sum(1 for f in document["findings"] if f["fix"])


def test_markdown_of_a_refused_run_says_no_facts_were_gathered():
    document, _ = composed({}, usage=UsageError("line", "usage-error", {}, None))
    assert "no facts gathered" in render.render_markdown(document)


@pytest.mark.parametrize("edit, shown", [
    (lambda facts: facts, ["metis-unavailable"]),
    (no_backend, ["neighbor-sampling-unavailable", "metis-unavailable"]),
])
def test_the_stderr_summary_is_one_screen_with_errors_and_warnings(edit, shown):
    document, _ = composed(edit(checker_facts()))
    lines = render.stderr_summary(document)
    assert lines[0] == "check_sampling_backends: %s (exit %d) for /venvs/pyg/bin/python (Python 3.11.7)" % (
        document["status"], document["exit_code"])
    assert len(lines) <= 20
    named = [line.split()[1].rstrip(":") for line in lines[1:] if line.startswith("  ") and not line.startswith(
        "   ") and not line.startswith("  (")]
    assert named == shown
    assert lines[-1].startswith("  (+") and "more, info included" in lines[-1]


def test_the_schema_names_the_new_section_status_and_exit_codes():
    assert SCHEMA["properties"]["schema_version"]["const"] == "2.2"
    assert SCHEMA["required"].index("container") == SCHEMA["required"].index("environment") + 1
    assert "interrupted" in SCHEMA["properties"]["status"]["enum"]
    assert SCHEMA["properties"]["exit_code"]["enum"] == [0, 1, 2, 3, 130, 143]
    ids = SCHEMA["properties"]["findings"]["items"]["properties"]["id"]["enum"]
    assert {"checker-interrupted", "container-shm-small", "container-shm-full", "container-cpu-quota",
            "container-memory-limit", "open-files-low"} <= set(ids)
    with open(os.path.join(SCRIPTS, "check_sampling_backends.schema.json")) as handle:
        committed = json.load(handle)
    assert committed == json.loads(dumps(SCHEMA))  # maintainers/build_bundle.py wrote it from this table
