"""The checker's time: every stage's bound from --timeout through the Spec's stage table (the runner computes
them, nothing else does), and the order they must keep for each stage to say why it stopped."""

import time

import pytest

from diagnostics_core import runner
from sampling_checker.cli import SPEC, STAGES


def bounds(timeout):
    run = runner.Run(SPEC, ["--timeout", str(timeout)], 1000.0)
    run.options = SPEC.parser().parse_args(run.argv)
    run.plan_time()
    return run


@pytest.mark.parametrize("timeout, stage, seconds", [
    (60, "question", 30.0), (10, "question", 5.0), (1, "question", 1.0), (3600, "question", 30.0),
    (60, "hang", 20.0), (10, "hang", 4.0), (2, "hang", 2.0), (45, "hang", 18.0),
    (60, "static", 58.5), (1, "static", 0.5), (2, "static", 0.5),
    (60, "static_wait", 59.0), (1, "static_wait", 1.0),
    (60, "step_wait", 21.0), (10, "step_wait", 5.0), (1, "step_wait", 3.0),
    (60, "probe", 59.5), (6, "probe", 5.5),
    (60, "retry", 120.0), (2, "retry", 4.0), (3000, "retry", 3600.0),
])
def test_each_stage_bound_from_the_timeout(timeout, stage, seconds):
    run = bounds(timeout)
    assert run.bounds[stage] == seconds
    assert run.options.bounds is run.bounds  # the children get them with the options


@pytest.mark.parametrize("timeout", [1, 2, 3, 5, 6, 10, 20, 30, 45, 60, 120, 600, 3600])
def test_the_stages_keep_their_order_within_the_deadline(timeout):
    run = bounds(timeout)
    b = run.bounds
    assert run.deadline == 1000.0 + timeout
    # the static stage's reads end first, its thread is abandoned after, the run's end comes last
    assert b["static"] < b["static_wait"] <= max(timeout, 1.0)
    assert b["static_wait"] - b["static"] >= 0.5
    # within an attempt the static step is waited for a second longer than a step may take
    assert b["step_wait"] - b["hang"] >= 1.0
    assert b["probe"] < timeout and b["retry"] >= min(timeout, 3600)
    assert run.by("static") == 1000.0 + b["static"]


def test_every_stage_is_in_the_table_and_no_other_budget_module_is_left():
    assert set(STAGES) == {"question", "hang", "static", "static_wait", "step_wait", "probe", "retry"}
    import importlib.util
    assert importlib.util.find_spec("sampling_checker.budget") is None


def test_left_counts_down_from_the_deadline():
    run = runner.Run(SPEC, ["--timeout", "30"], time.time())
    run.options = SPEC.parser().parse_args(run.argv)
    run.plan_time()
    assert 29.0 < run.left() <= 30.0 and run.left(reserve=10.0) <= 20.0
