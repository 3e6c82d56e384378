"""The DDP recipe's report, in process: the plain record the recipe keeps of its job (what it prints alone, and
its exit code), and the skill's findings, gate and sections decided on that record."""

import argparse
import json

import pytest

import ddp_neighbor_training as recipe
from ddp_recipe import cli, rules

# Two ranks' reports as the recipe gathers them (rank 0 took one more batch of its 121 seeds).
RANKS = [{"rank": 0, "local_rank": 0, "host": "n1", "pid": 101, "device": "cpu", "threads": 1, "num_train_seeds": 121,
          "num_val_seeds": 81, "batches_per_epoch": [5, 5], "train_loss": [1.2, 0.7]},
         {"rank": 1, "local_rank": 1, "host": "n1", "pid": 102, "device": "cpu", "threads": 1, "num_train_seeds": 120,
          "num_val_seeds": 80, "batches_per_epoch": [4, 4], "train_loss": [1.1, 0.6]}]
EPOCHS = [{"epoch": 1, "train_loss": 1.15, "val_acc": 0.55}, {"epoch": 2, "train_loss": 0.65, "val_acc": 0.9}]
GRAPH = {"source": "synthetic", "num_nodes": 402, "num_edges": 5000, "num_features": 16, "num_classes": 4,
         "num_train": 241, "num_val": 161, "tensor_bytes": 123456}
PEER = {"rank": 0, "pid": 101, "time": 2.0, "message": "RuntimeError: [gloo] Connection closed by peer"}
FIRST = {"rank": 1, "pid": 102, "time": 1.0, "message": "RuntimeError: --fail-rank: injected failure"}


def options(*words):
    return cli.build_parser().parse_args(list(words))


def finished_job():
    job = {"ok": False, "launcher": "spawn", "world_size": 2, "graph": GRAPH, "sampling_backend": "torch-sparse"}
    job.update(recipe.finished(options("--epochs", "2"), "gloo", "torch-sparse", GRAPH, EPOCHS, RANKS))
    return job


def decided(job, *words, **facts):
    facts = dict({"job": job, "python": "/venv/bin/python", "argv": list(words)}, **facts)
    found = [finding for rule in rules.RULES for finding in rule(facts, options(*words))]
    return found, rules.gates(facts, found, options(*words))


def test_a_finished_job_reports_every_rank_its_epochs_and_config():
    job = finished_job()
    assert job["ok"] is True and recipe.exit_code(job) == 0
    assert job["world_size"] == 2 and job["val_acc"] == 0.9 and job["epochs"] == EPOCHS
    assert job["config"]["epochs"] == 2 and job["config"]["num_workers"] == 0 and job["input"] == "data"
    assert [rank["rank"] for rank in job["ranks"]] == [0, 1]
    json.dumps(job)  # the plain report is JSON as it stands


def test_a_finished_job_has_no_finding_and_passes_the_gate():
    found, gates = decided(finished_job())
    assert found == [] and gates == {"trained": {"passed": True}}


def test_failed_ranks_keep_the_first_failure_first_and_each_is_a_finding():
    job = recipe.failed({"launcher": "spawn", "world_size": 2}, [FIRST, PEER])
    assert job["error"] == FIRST and job["failed_ranks"] == [FIRST, PEER] and recipe.exit_code(job) == 1
    found, gates = decided(job)
    assert [(f["id"], f["evidence"]["rank"]) for f in found] == [("ddp-rank-failed", 1), ("ddp-rank-failed", 0)]
    assert gates == {"trained": {"passed": False}}


def test_no_sampling_backend_is_its_finding_with_the_checkers_line():
    job = {"ok": False, "launcher": "spawn", "world_size": 2, "sampling_backend": None,
           "error": {"message": recipe.NO_SAMPLING_BACKEND}}
    found, gates = decided(job)
    assert [f["id"] for f in found] == ["neighbor-sampling-unavailable"] and not gates["trained"]["passed"]
    assert found[0]["fix"].endswith("check_sampling_backends.py --require-neighbor-backend")
    assert found[0]["evidence"]["python"] == "/venv/bin/python"


@pytest.mark.parametrize("job, code", [
    ({"refused": "--data x: no such file"}, 2),
    ({"interrupted": {"signal": "SIGTERM", "exit_code": 143}}, 143),
    ({"interrupted": {"signal": "SIGINT", "exit_code": 130}}, 130),
    ({"ok": False, "error": {"message": "x"}}, 1),
    ({"ok": True}, 0),
])
def test_the_plain_exit_code_follows_the_record(job, code):
    assert recipe.exit_code(job) == code


def test_a_stopped_job_keeps_the_epochs_rank_0_finished():
    job = recipe.stopped_at({"launcher": "torchrun"}, recipe.Stopped(15), EPOCHS[:1])
    assert job["interrupted"] == {"signal": "SIGTERM", "exit_code": 143}
    assert job["epochs"] == EPOCHS[:1] and job["val_acc"] == 0.55 and recipe.exit_code(job) == 143
    assert recipe.stopped_at({}, recipe.Stopped(2), [])["val_acc"] is None


def test_the_skills_document_carries_the_jobs_keys_but_not_what_the_envelope_says():
    document = {"ok": True}
    job = dict(finished_job(), refused=None, interrupted=None)
    cli.render(document, {"job": job}, None)
    assert document["ok"] is True and "refused" not in document and "interrupted" not in document
    assert document["ranks"] == RANKS and document["launcher"] == "spawn" and document["graph"] == GRAPH
    empty = {}
    cli.render(empty, {}, None)  # a refused command line: no facts at all
    assert empty == {}


def test_a_handed_refusal_and_interruption_become_the_runners_outcomes():
    """A launched rank 0 hands its record over after training: a refusal is the usage document, a stop the
    interrupted one (raised for the runner), a stack refusal its own finding."""
    from diagnostics_core.interrupt import Interrupted
    run = argparse.Namespace(facts={}, argv=["--epochs", "2"], options=options("--epochs", "2"))
    with pytest.raises(cli.cli.UsageError) as refused:
        cli.take_handed(run, {"refused": "RANK='x' is not a whole number"})
    assert refused.value.finding_id == "ddp-usage-error" and "RANK='x'" in refused.value.line
    with pytest.raises(cli.cli.UsageError) as stack:
        cli.take_handed(run, {"refused": "ImportError: x", "stack_missing": True})
    assert stack.value.finding_id == "ddp-stack-missing"
    with pytest.raises(Interrupted) as stopped:
        cli.take_handed(run, {"interrupted": {"signal": "SIGTERM", "exit_code": 143}, "epochs": EPOCHS})
    assert stopped.value.signal == "SIGTERM" and stopped.value.code == 143 and run.facts["job"]["epochs"] == EPOCHS
