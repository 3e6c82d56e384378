"""The profiler's choice and verdict, replayed on recorded rounds: blocks as the coordinator publishes them
(epoch steps/s per configuration per round, and the CPU other processes used during each), the records
built from them, the recommendation and every rule, exactly as after a real run. These are the cases a
2-core test machine cannot produce on demand (a load that changes between rounds, a spread that covers
every difference, shared memory too small). In process: no tool is started, no torch imported."""

import pytest

from diagnostics_core import runner
from loader_profiler import advice, cli, plan
from loader_profiler.request import request_fact


def options_for(*argv):
    """The parsed command line with the run's bounds, as the runner hands it to the rules."""
    run = runner.Run(cli.SPEC, list(argv), 0.0)
    run.options = cli.SPEC.parser().parse_args(run.argv)
    run.plan_time()
    return run.options


OPTIONS = options_for("--data", "graph.pt", "--num-neighbors", "15,10", "--batch-size", "512", "--step", "train:step",
                      "--current", "num_workers=6,threads=2")
SYNTHETIC = options_for("--synthetic", "20000,200000,32", "--budget", "20")


def settings(workers=0, threads=2, persistent=None, **more):
    return dict({"num_workers": workers, "persistent_workers": bool(workers) if persistent is None else persistent,
                 "filter_per_worker": True, "pin_memory": False, "torch_threads": threads,
                 "worker_threads": 1}, **more)


CONFIGS = {"current": settings(6, 2, persistent=False), "default": settings(0, 2),
           "default-threads-1": settings(0, 1), "workers-1-threads-1": settings(1, 1),
           "workers-2-threads-1": settings(2, 1)}


def recorded(rates, others, configs=CONFIGS, baseline="current"):
    """Blocks as the coordinator publishes them, and the configurations' records over them.
    rates: {config: [epoch steps/s per round, or (steady steps/s, epoch steps/s)]},
    others: [other processes' cores per round]."""
    blocks = []
    for name, per_round in rates.items():
        for round_index, rate in enumerate(per_round):
            steady, epoch = rate if isinstance(rate, tuple) else (rate, rate)
            blocks.append({"config": name, "round": round_index, "steps_per_s": steady, "epoch_steps_per_s": epoch,
                           "first_batch_s": 0.5, "steps": 20, "restarts": [], "wall_s": 1.0,
                           "other_cpu_cores": others[round_index], "peak_rss_bytes": 300 << 20, "seeds_per_s": 1})
    return blocks, [plan.config_record(name, configs[name], blocks, baseline, "default", 512.0) for name in rates]


def replay(rates, others, configs=CONFIGS, options=OPTIONS, baseline="current", extra=(), **facts):
    """The recommendation and the findings after rounds of these rates (see recorded); `extra`: records of
    configurations that were not measured (failed, skipped)."""
    blocks, records = recorded(rates, others, configs, baseline)
    records += list(extra)
    facts = dict({"graph": {"batches_per_epoch": 100, "feature_bytes": 1, "num_edges": 1, "kind": "data"}}, **facts)
    facts.update(request=request_fact(options), configs=records, blocks=blocks, plan={"baseline": baseline})
    spec = dict(facts["request"], batches_per_epoch=facts["graph"]["batches_per_epoch"])
    facts["recommendation"] = advice.recommendation(records, spec, blocks, baseline)
    found = [finding for rule in cli.SPEC.rules for finding in rule(facts, options)]
    assert len({f["id"] for f in found}) == len(found)  # each rule says its thing once
    return {f["id"]: f for f in found}, facts["recommendation"]


# ---------------------------------------------------------------------------
# The verdict: faster, under load, the baseline kept, or too busy to tell
# ---------------------------------------------------------------------------

@pytest.mark.finding("loader-faster-settings")
def test_a_win_in_every_round_is_recommended_with_paired_speedups_against_current_and_default():
    found, advice_ = replay({"current": [2.0, 2.2, 1.8, 2.0], "default": [3.0, 3.3, 2.7, 3.0],
                             "default-threads-1": [3.1, 3.4, 2.8, 3.1], "workers-1-threads-1": [2.0, 2.1, 1.9, 2.0]},
                            [0.1, 0.2, 0.1, 0.1])
    # default and default-threads-1 are within each other's noise: the cheaper (fewer threads) is chosen.
    assert advice_["verdict"] == "faster" and advice_["config"] == "default-threads-1"
    assert advice_["speedup"] == pytest.approx(1.55, abs=0.01) and advice_["speedup_range"][0] > 1.5
    assert advice_["speedup_over_default"] == pytest.approx(1.03, abs=0.01)
    assert advice_["baseline"] == "current" and advice_["epoch_s"] == round(100 / 3.1, 2)
    assert advice_["env"] == {"OMP_NUM_THREADS": "1"} and advice_["settings"] == {}
    faster = found["loader-faster-settings"]
    assert faster["fix"] == advice_["code"] and faster["evidence"]["load"]["busy_blocks"] == 0
    assert "loader-load-decides" not in found


def test_a_worker_setting_that_wins_is_the_code_to_paste():
    found, advice_ = replay({"current": [1.0, 1.1, 1.0], "default": [1.2, 1.2, 1.1],
                             "workers-2-threads-1": [2.0, 2.2, 2.1]}, [0.1, 0.1, 0.2])
    assert advice_["config"] == "workers-2-threads-1" and advice_["settings"] == {"num_workers": 2,
                                                                                   "persistent_workers": True}
    assert "num_workers=2, persistent_workers=True" in advice_["code"]
    assert found["loader-faster-settings"]["evidence"]["speedup"] == advice_["speedup"]


@pytest.mark.finding("loader-too-busy-to-tell")
def test_a_spread_that_covers_the_differences_under_load_is_too_busy_to_tell():
    found, advice_ = replay({"current": [2.0, 2.0, 2.0], "default": [2.6, 1.7, 2.5],
                             "default-threads-1": [2.5, 1.8, 2.4]}, [1.5, 1.8, 1.2])
    assert advice_["verdict"] == "undecided" and advice_["config"] == "current" and advice_["speedup"] == 1.0
    busy = found["loader-too-busy-to-tell"]
    assert busy["evidence"]["load"]["other_cpu_cores_median"] >= 1.0
    assert "--budget 120" in busy["fix"] and "quiet" in busy["fix"]
    assert "loader-faster-settings" not in found and "loader-default-is-best" not in found


@pytest.mark.finding("loader-default-is-best")
def test_the_same_spread_on_a_quiet_machine_keeps_the_baseline_without_blaming_the_load():
    found, advice_ = replay({"current": [2.0, 2.0, 2.0], "default": [2.6, 1.7, 2.5]}, [0.1, 0.1, 0.2])
    assert advice_["verdict"] == "undecided"
    assert "loader-default-is-best" in found and "loader-too-busy-to-tell" not in found
    assert found["loader-default-is-best"]["fix"] == advice_["code"]


def test_a_baseline_nothing_beats_is_kept_with_its_code():
    found, advice_ = replay({"current": [3.0, 3.1, 3.0], "default": [2.0, 2.1, 2.0],
                             "default-threads-1": [2.9, 3.0, 2.9]}, [0.1, 0.1, 0.1])
    assert advice_["verdict"] == "baseline" and advice_["config"] == "current"
    assert advice_["settings"] == {"num_workers": 6} and "num_workers=6" in advice_["code"]
    assert found["loader-default-is-best"]["evidence"]["fastest_measured"]["config"] == "current"


@pytest.mark.finding("loader-load-decides")
def test_when_busy_and_quiet_rounds_pick_different_threads_both_settings_are_given():
    # Rounds 0 and 2 under load: one thread wins by 2x; rounds 1 and 3 quiet: two threads win.
    found, _ = replay({"current": [1.0, 2.0, 1.0, 2.0], "default": [1.5, 4.0, 1.4, 4.1],
                       "default-threads-1": [3.0, 3.0, 3.1, 3.0]}, [1.8, 0.1, 1.6, 0.2])
    decides = found["loader-load-decides"]
    assert decides["evidence"]["under_load"]["env"] == {"OMP_NUM_THREADS": "1"}
    assert decides["evidence"]["quiet"]["env"] == {"OMP_NUM_THREADS": "2"}
    assert decides["evidence"]["quiet"]["measured"] is True
    assert "export OMP_NUM_THREADS=1" in decides["fix"] and "OMP_NUM_THREADS=2" in decides["fix"]


def test_a_win_in_rounds_that_were_all_busy_holds_for_that_load_and_names_the_quiet_side_unmeasured():
    found, advice_ = replay({"current": [1.0, 1.0, 1.0], "default": [1.4, 1.5, 1.4],
                             "default-threads-1": [2.0, 2.1, 2.0]}, [1.5, 1.7, 1.6])
    assert advice_["verdict"] == "under-load" and advice_["config"] == "default-threads-1"
    decides = found["loader-load-decides"]
    assert decides["evidence"]["under_load"]["config"] == "default-threads-1"
    assert decides["evidence"]["under_load"]["ratio_to_baseline"] == pytest.approx(2.0, abs=0.01)
    assert decides["evidence"]["quiet"] == {"config": None, "measured": False}
    assert decides["evidence"]["under_load"]["code"] == advice_["code"] and "OMP_NUM_THREADS=1" in advice_["code"]
    assert "rerun when quiet" in decides["fix"] and "--budget 120" in decides["fix"]
    assert "export OMP_NUM_THREADS=1" in decides["fix"]
    # Nothing is presented as faster without the load it was measured under (issue 31).
    assert "loader-faster-settings" not in found and "loader-default-is-best" not in found


def test_a_busy_run_whose_quiet_rounds_chose_the_same_is_faster_outright():
    # Rounds 0, 2, 4 under load, 1 and 3 quiet: one thread wins in both kinds of round.
    found, advice_ = replay({"current": [1.0, 1.0, 1.0, 1.0, 1.0], "default": [1.4, 1.5, 1.4, 1.5, 1.4],
                             "default-threads-1": [2.0, 2.1, 2.0, 2.1, 2.0]}, [1.5, 0.1, 1.6, 0.2, 1.4])
    assert advice_["by_load"] == {"busy": "default-threads-1", "quiet": "default-threads-1"}
    assert advice_["verdict"] == "faster" and "loader-faster-settings" in found
    assert "loader-load-decides" not in found


# Recorded on the 2-core test machine (maintainers/benchmark_profiler_grid.py's graph and step, epoch
# steps/s per round): under two CPU hogs the two workers led one thread without workers by 1.9x and 1.5x,
# then lost a round; quiet, that one thread alone was fastest. The user's settings (two threads) crawled.
HOGS = {"current": [1.8, 1.2, 3.6], "default": [2.7, 5.1, 2.4], "default-threads-1": [21.2, 21.4, 27.1],
        "workers-1-threads-1": [24.9, 19.5, 21.0], "workers-2-threads-1": [40.8, 31.9, 24.6]}


def test_a_cheaper_setting_the_leader_did_not_beat_in_every_round_under_load_is_too_busy_to_tell():
    found, advice_ = replay(HOGS, [1.5, 1.4, 1.5])
    assert advice_["verdict"] == "undecided" and advice_["config"] == "current" and advice_["speedup"] == 1.0
    decided = advice_["decided"]
    assert decided["leader"] == "workers-2-threads-1" and decided["unsettled"] == ["default-threads-1"]
    assert decided["against"]["default-threads-1"] == [0.52, 0.671, 1.102]  # the round the leader lost
    busy = found["loader-too-busy-to-tell"]
    assert "loader-faster-settings" not in found and "loader-default-is-best" not in found
    assert "beat your settings in every round here" in busy["fix"] and "default-threads-1" in busy["fix"]
    assert busy["evidence"]["decided"]["unsettled"] == ["default-threads-1"]


def test_the_same_rounds_on_a_quiet_machine_follow_the_medians():
    found, advice_ = replay(HOGS, [0.1, 0.2, 0.1])
    assert advice_["verdict"] == "faster" and advice_["config"] == "workers-2-threads-1"
    assert advice_["settings"] == {"num_workers": 2, "persistent_workers": True}
    assert "loader-faster-settings" in found and "loader-too-busy-to-tell" not in found


def test_of_contenders_within_the_tie_the_cheapest_is_chosen_even_under_load():
    found, advice_ = replay({"current": [1.0, 1.0, 1.0], "default-threads-1": [2.0, 2.2, 1.9],
                             "workers-2-threads-1": [2.1, 2.1, 2.0]}, [1.5, 1.4, 1.5])
    assert advice_["verdict"] == "under-load" and advice_["config"] == "default-threads-1"
    assert advice_["decided"]["tied"] == ["default-threads-1", "workers-2-threads-1"]
    assert advice_["decided"]["unsettled"] == [] and "loader-faster-settings" not in found
    assert found["loader-load-decides"]["evidence"]["under_load"]["config"] == "default-threads-1"


def test_a_leader_that_beat_the_cheaper_ones_in_every_round_is_chosen_under_load_too():
    found, advice_ = replay({"current": [1.0, 1.0, 1.0], "default-threads-1": [2.0, 2.2, 1.9],
                             "workers-2-threads-1": [2.6, 2.5, 2.4]}, [1.5, 1.4, 1.5])
    assert advice_["verdict"] == "under-load" and advice_["config"] == "workers-2-threads-1"
    assert advice_["decided"]["contenders"] == ["workers-2-threads-1"]
    decides = found["loader-load-decides"]
    assert decides["evidence"]["under_load"]["settings"] == {"num_workers": 2, "persistent_workers": True}
    assert "loader-faster-settings" not in found


def test_one_quiet_round_is_not_a_quiet_side_the_load_still_decides():
    found, advice_ = replay({"current": [1.0, 1.0, 1.0, 1.0], "default": [1.4, 1.5, 1.4, 3.0],
                             "default-threads-1": [2.0, 2.1, 2.0, 3.1]}, [1.5, 1.7, 1.6, 0.1])
    assert advice_["verdict"] == "under-load" and advice_["config"] == "default-threads-1"
    decides = found["loader-load-decides"]
    assert decides["evidence"]["quiet"]["measured"] is False and decides["evidence"]["load"]["busy_blocks"] == 9


def test_under_load_a_budget_that_left_settings_out_keeps_nothing_as_best():
    # Only the user's settings and the default were measured: the rest did not fit the budget.
    rates = {"current": [4.2, 4.0], "default": [1.6, 1.7]}
    found, advice_ = replay(rates, [1.0, 1.1])
    assert advice_["verdict"] == "baseline" and "loader-default-is-best" in found  # nothing was left out
    skipped = {"name": "default-threads-1", "settings": CONFIGS["default-threads-1"], "status": "skipped"}
    found, advice_ = replay(rates, [1.0, 1.1], extra=[skipped])
    assert (advice_["config"], advice_["verdict"]) == ("current", "undecided")
    assert advice_["decided"]["skipped"] == ["default-threads-1"] and "loader-too-busy-to-tell" in found
    assert found["loader-budget-short"]["evidence"]["skipped"] == ["default-threads-1"]


def test_a_round_lost_by_less_than_the_gain_does_not_keep_a_setting_in_contention():
    # Recorded with the background load of the test machine: one worker won round 2 by 1.4%.
    found, advice_ = replay({"current": [2.0, 2.0, 2.0, 2.0, 2.0],
                             "default-threads-1": [24.0, 20.3, 29.2, 30.4, 27.2],
                             "workers-1-threads-1": [19.9, 20.6, 20.1, 19.6, 19.9]}, [1.3, 1.2, 1.4, 1.3, 1.3])
    assert advice_["verdict"] == "under-load" and advice_["config"] == "default-threads-1"
    assert advice_["decided"]["contenders"] == ["default-threads-1"]


def test_two_rounds_under_load_do_not_rule_out_the_settings_that_beat_yours():
    # Recorded under two CPU hogs on the benchmark's graph: the budget allowed two rounds; one thread
    # without workers led both, where the quiet run had picked one worker.
    rates = {"current": [10.0, 1.6], "default-threads-1": [38.7, 33.5], "workers-1-threads-1": [30.6, 25.4],
             "workers-2-threads-1": [26.8, 25.5]}
    found, advice_ = replay(rates, [1.1, 1.0])
    assert advice_["verdict"] == "undecided" and "loader-too-busy-to-tell" in found
    assert "loader-faster-settings" not in found
    # The leader too: under load, fewer than 3 rounds rule nothing out.
    assert set(advice_["decided"]["unsettled"]) == {"default-threads-1", "workers-1-threads-1", "workers-2-threads-1"}
    found, advice_ = replay(rates, [0.1, 0.0])  # the same two rounds on a quiet machine decide
    assert advice_["verdict"] == "faster" and advice_["config"] == "default-threads-1"


def test_under_load_a_setting_the_budget_left_out_of_later_rounds_is_not_ruled_out():
    # Recorded under two CPU hogs: the budget fitted one round of everything and, of the second, the
    # baseline and the fastest of the first; one worker alone had two rounds, so it alone beat the baseline
    # "in every round", while one thread without workers and two workers had kept up in the first.
    rates = {"current": [1.58, 7.48], "default": [1.57], "default-threads-1": [30.41],
             "workers-1-threads-1": [31.61, 29.77], "workers-2-threads-1": [26.28]}
    found, advice_ = replay(rates, [1.0, 1.05])
    assert advice_["verdict"] == "undecided" and "loader-faster-settings" not in found
    assert set(advice_["decided"]["unsettled"]) == {"workers-1-threads-1", "default-threads-1", "workers-2-threads-1"}
    assert "loader-too-busy-to-tell" in found


def test_of_five_rounds_under_load_one_may_go_the_other_way():
    # Recorded with another suite running beside it: one thread without workers led both worker
    # settings by 25-50% in rounds 2-5; in round 1 a burst of load fell on its block.
    rates = {"current": [10.64, 1.56, 3.44, 2.60, 1.59], "default-threads-1": [19.68, 35.08, 34.38, 36.10, 36.22],
             "workers-1-threads-1": [22.48, 28.32, 25.23, 27.04, 28.40],
             "workers-2-threads-1": [24.87, 25.59, 25.31, 24.23, 23.34]}
    found, advice_ = replay(rates, [1.0, 1.0, 1.0, 1.0, 1.0])
    assert advice_["verdict"] == "under-load" and advice_["config"] == "default-threads-1"
    assert advice_["decided"]["contenders"] == ["default-threads-1"] and "loader-load-decides" in found
    # Two such rounds of five are not a burst: the rounds disagree.
    rates["default-threads-1"][2] = 20.0
    found, advice_ = replay(rates, [1.0, 1.0, 1.0, 1.0, 1.0])
    assert advice_["verdict"] == "undecided" and "loader-too-busy-to-tell" in found


@pytest.mark.parametrize("others, busy", [([0.1, 0.2, 0.1], False), ([0.4, 0.49, 0.3], False),
                                          ([0.5, 0.6, 0.5], True), ([1.5, 1.4, 1.5], True), ([0.1, 0.6, 0.7], True)])
def test_a_run_counts_as_busy_from_the_median_of_other_processes_cpu(others, busy):
    blocks, _ = recorded({"current": [1.0, 1.0, 1.0]}, others)
    assert plan.busy(blocks) is busy
    assert plan.load_of(blocks)["busy_blocks"] == sum(1 for o in others if o >= plan.BUSY_CORES)


@pytest.mark.parametrize("ratios, won", [([1.1, 1.2], True), ([1.1, 0.99, 1.2], False), ([1.02, 1.02, 1.02], False),
                                         ([1.5], False), ([1.04, 1.05, 1.01], True)])
def test_a_win_is_every_shared_round_and_a_median_beyond_the_gain(ratios, won):
    rates = {"current": [1.0] * len(ratios), "default": list(ratios)}
    blocks, _ = recorded(rates, [0.0] * len(ratios))
    assert plan.wins(blocks, "default", "current") is won


# ---------------------------------------------------------------------------
# The race and the plan
# ---------------------------------------------------------------------------

def blocks_of(rates):
    return [{"config": name, "round": index, "epoch_steps_per_s": rate}
            for name, per_round in rates.items() for index, rate in enumerate(per_round)]


def test_the_race_drops_what_more_rounds_cannot_make_the_answer():
    keep = {"current", "default"}
    names = list(HOGS) + ["workers-2-threads-2"]
    rates = dict(HOGS, **{"workers-2-threads-2": [1.0, 0.9, 1.1]})
    one = blocks_of({name: per_round[:1] for name, per_round in rates.items()})
    # After one round only what is far below that round's fastest (below 0.2 of it: one block under a
    # burst of load can halve), and not the baseline or the default: every ratio is paired with them.
    assert plan.raced_out(one, names, keep, 1) == {"workers-2-threads-2"}
    halved = blocks_of({"default-threads-1": [10.0], "workers-2-threads-1": [40.8]})
    assert plan.raced_out(halved, ["default-threads-1", "workers-2-threads-1"], keep, 1) == set()
    # After two rounds: the baseline and the default too, below 0.4 in both. Two rounds that another
    # configuration won are not yet enough to drop one: under load the third may go the other way.
    two = blocks_of({name: per_round[:2] for name, per_round in rates.items()})
    assert plan.raced_out(two, names, keep, 2) == {"current", "default", "workers-2-threads-2"}
    # After three: one worker, which two workers beat in every round by 10% or more at the median; one
    # thread without workers stays: it won the third round against the leader.
    three = blocks_of(rates)
    assert plan.raced_out(three, names, keep, 3) == {"current", "default", "workers-1-threads-1",
                                                     "workers-2-threads-2"}


@pytest.mark.parametrize("others, settled", [([0.1, 0.2, 0.1], True), ([1.5, 1.4, 1.5], False)])
def test_a_quiet_run_is_settled_once_the_choice_cannot_change_and_a_busy_one_never_early(others, settled):
    rates = {"current": [1.0, 1.0, 1.0], "default-threads-1": [2.0, 2.2, 1.9], "workers-2-threads-1": [2.6, 2.5, 2.4]}
    blocks, configs = recorded(rates, others)
    assert plan.settled(configs, blocks, "current") is settled


def test_persistent_workers_pay_their_start_up_once_over_the_run_s_epochs():
    persistent, fresh, none = settings(2, 1), settings(2, 1, persistent=False), settings(0, 1)
    # 30 steps/s, an ordinary batch waits 10 ms; new workers take 0.21 s to the first batch.
    block = {"steps_per_s": 30.0, "batch_wait_s": 0.01, "first_batch_s": 0.21, "restarts": []}
    assert plan.epoch_rate(block, persistent, 12, epochs=2) == pytest.approx(12 / (0.4 + 0.2 / 2))
    assert plan.epoch_rate(block, persistent, 12, epochs=100) == pytest.approx(12 / (0.4 + 0.2 / 100))
    assert plan.epoch_rate(block, fresh, 12, epochs=2) == pytest.approx(12 / (0.4 + 0.2))  # every epoch
    assert plan.epoch_rate(block, none, 12, epochs=2) == pytest.approx(30.0)  # no workers to start
    # An epoch end crossed in the block: its first batch waited 60 ms, 50 more than an ordinary one.
    crossed = dict(block, restarts=[0.06, 0.07, 0.05])
    assert plan.epoch_rate(crossed, persistent, 12, epochs=2) == pytest.approx(12 / (0.4 + 0.05 + 0.2 / 2))
    assert plan.epoch_rate(crossed, fresh, 12, epochs=2) == pytest.approx(12 / (0.4 + 0.05))


def test_ranks_that_ran_at_once_add_up_in_one_block():
    rank = {"steps_per_s": 10.0, "seeds_per_s": 5120.0, "first_batch_s": 0.2, "steps": 30, "batch_wait_s": 0.01,
            "restarts": [], "wall_s": 3.0, "own_cpu_s": 2.0, "machine_cpu_s": 6.0, "peak_rss_bytes": 100 << 20}
    block = plan.combine_block([rank, dict(rank, steps_per_s=8.0, first_batch_s=0.3, own_cpu_s=1.0)],
                               settings(0, 1), 12)
    assert block["steps_per_s"] == 18.0 and block["per_rank_steps_per_s"] == [10.0, 8.0]
    assert block["first_batch_s"] == 0.3 and block["steps"] == 60 and block["peak_rss_bytes"] == 200 << 20
    assert block["other_cpu_cores"] == 1.0  # (6 s of the machine's CPU - 3 s of ours) over 3 s


@pytest.mark.parametrize("cores, names", [
    (2, ["current", "default", "default-threads-1", "workers-1-threads-1", "workers-2-threads-1",
         "workers-1-threads-2", "workers-2-threads-2"]),
    (1, ["current", "default", "default-threads-1", "workers-1-threads-1"]),
    (4, ["current", "default", "default-threads-4", "default-threads-1", "workers-1-threads-3",
         "workers-1-threads-1", "workers-2-threads-2", "workers-2-threads-1", "workers-4-threads-1",
         "workers-1-threads-4", "workers-2-threads-4", "workers-4-threads-4"])])
def test_settings_that_fit_the_cores_are_planned_before_those_that_oversubscribe_them(cores, names):
    default = plan.default_settings(2)
    planned = plan.candidates(default, plan.current_settings({"num_workers": 2}, default), cores)
    assert [name for name, _ in planned] == names
    assert len({tuple(sorted(s.items())) for _, s in planned}) == len(planned)  # no setting twice


def test_the_users_settings_equal_to_the_default_are_measured_once_as_the_baseline():
    default = plan.default_settings(2)
    current = plan.current_settings({"num_workers": 0, "threads": 2}, default)
    names = [name for name, _ in plan.candidates(default, current, 2)]
    assert names[0] == "current" and "default" not in names


@pytest.mark.parametrize("max_workers, top", [(None, 2), (1, 1), (8, 2)])
def test_max_workers_caps_the_worker_counts_planned(max_workers, top):
    default = plan.default_settings(2)
    planned = plan.candidates(default, None, 2, max_workers)
    assert max(s["num_workers"] for _, s in planned) == top and planned[0][0] == "default"


def test_every_round_starts_with_the_baseline_and_alternates_the_others():
    active = [("current", {}), ("default", {}), ("default-threads-1", {}), ("workers-1-threads-1", {})]
    assert [n for n, _ in plan.round_order(active, "current", 0)] == \
        ["current", "default", "default-threads-1", "workers-1-threads-1"]
    assert [n for n, _ in plan.round_order(active, "current", 1)] == \
        ["current", "workers-1-threads-1", "default-threads-1", "default"]
    assert [n for n, _ in plan.round_order(active[1:], "current", 1)] == \
        ["workers-1-threads-1", "default-threads-1", "default"]  # the baseline left the race


@pytest.mark.parametrize("left, blocks, overhead, seconds", [(10.0, 4, 0.5, 2.0), (10.0, 10, 0.0, 1.0),
                                                              (1.0, 4, 0.1, None), (3.0, 10, 0.0, 0.3)])
def test_a_block_gets_an_equal_share_of_what_is_left_or_none_below_the_shortest(left, blocks, overhead, seconds):
    assert plan.block_seconds(left, blocks, overhead) == (pytest.approx(seconds) if seconds else None)


# ---------------------------------------------------------------------------
# The other rules on recorded rounds
# ---------------------------------------------------------------------------

EIGHT = {"default": settings(0, 8), "workers-2-threads-8": settings(2, 8), "workers-2-threads-2": settings(2, 2)}


@pytest.mark.finding("loader-threads-oversubscribed")
def test_fewer_threads_measured_faster_in_every_round_is_oversubscription():
    found, advice_ = replay({"default": [10.0, 10.5, 9.8], "workers-2-threads-8": [14.0, 13.5, 14.2],
                             "workers-2-threads-2": [18.0, 18.5, 17.9]}, [0.1, 0.1, 0.1], configs=EIGHT,
                            options=SYNTHETIC, baseline="default")
    over = found["loader-threads-oversubscribed"]
    assert over["fix"].startswith("export OMP_NUM_THREADS=2") and over["evidence"]["base_threads"] == 8
    assert advice_["env"] == {"OMP_NUM_THREADS": "2"}


def test_fewer_threads_that_lose_a_round_are_not_called_oversubscription():
    found, _ = replay({"default": [10.0, 10.5, 9.8], "workers-2-threads-8": [14.0, 13.5, 14.2],
                       "workers-2-threads-2": [18.0, 12.5, 17.9]}, [0.1, 0.1, 0.1], configs=EIGHT,
                      options=SYNTHETIC, baseline="default")
    assert "loader-threads-oversubscribed" not in found


@pytest.mark.finding("loader-worker-startup-unpaid")
def test_workers_faster_per_batch_but_not_per_epoch_need_persistence():
    # The user's six workers, started anew each epoch: faster per batch, slower per epoch than the default.
    found, _ = replay({"current": [(16.0, 9.0), (16.5, 9.1), (15.9, 8.9)], "default": [10.0, 10.1, 9.9]},
                      [0.1, 0.1, 0.1], options=SYNTHETIC)
    unpaid = found["loader-worker-startup-unpaid"]
    assert unpaid["evidence"]["config"] == "current" and "persistent_workers=True" in unpaid["fix"]
    assert "num_workers=6" in unpaid["fix"]


SMALL_SHM = {"allowed_cores": [0, 1], "shm": {"total_bytes": 64 << 20, "free_bytes": 1 << 20}}


@pytest.mark.finding("loader-shm-too-small")
def test_small_shared_memory_and_bus_errors_are_named():
    graph = {"batches_per_epoch": 20, "feature_bytes": 2560000, "num_edges": 200000}
    found, _ = replay({"default": [10.0, 10.1]}, [0.1, 0.1], options=SYNTHETIC, baseline="default",
                      host=SMALL_SHM, graph=graph)
    assert found["loader-shm-too-small"]["severity"] == "warning"
    failed = {"name": "workers-2-threads-1", "settings": settings(2, 1), "status": "failed",
              "error": "RuntimeError: DataLoader worker (pid 7) is killed by signal: Bus error."}
    found, _ = replay({"default": [10.0, 10.1]}, [0.1, 0.1], options=SYNTHETIC, baseline="default",
                      host=SMALL_SHM, graph=graph, extra=[failed])
    assert found["loader-shm-too-small"]["severity"] == "error"
    assert "loader-config-failed" not in found  # the shared-memory finding explains it
    assert "--shm-size" in found["loader-shm-too-small"]["fix"]


def test_a_configuration_that_raised_is_named_with_its_code_after_a_comment():
    failed = {"name": "workers-2-threads-1", "settings": settings(2, 1), "status": "failed",
              "error": "RuntimeError: connection used from a forked process"}
    found, _ = replay({"default": [10.0, 10.1]}, [0.1, 0.1], options=SYNTHETIC, baseline="default", extra=[failed])
    fix = found["loader-config-failed"]["fix"]
    assert fix.startswith("# measured without workers-2-threads-1") and "\n" not in fix
    assert "num_workers=2, persistent_workers=True" in fix


@pytest.mark.finding("loader-fetch-bound")
def test_a_batch_mostly_spent_gathering_features_is_fetch_bound():
    split = {"status": "ok", "sample_s": 0.002, "fetch_s": 0.02, "collate_s": 0.001, "batch_s": 0.023}
    found, _ = replay({"default": [10.0, 10.1]}, [0.1, 0.1], options=SYNTHETIC, baseline="default", breakdown=split)
    assert found["loader-fetch-bound"]["evidence"]["fetch_share"] > 0.6
    assert "loader-sampler-bound" not in found


SAMPLING = {"status": "ok", "sample_s": 0.02, "fetch_s": 0.002, "collate_s": 0.001, "batch_s": 0.023}


@pytest.mark.finding("loader-sampler-bound")
def test_a_batch_mostly_spent_sampling_is_sampler_bound_and_workers_that_won_sample_in_parallel():
    found, _ = replay({"default": [10.0, 10.1, 9.9], "workers-2-threads-1": [20.0, 20.4, 19.8]}, [0.1, 0.1, 0.1],
                      options=SYNTHETIC, baseline="default", breakdown=SAMPLING,
                      backend={"pyg_lib": True, "torch_sparse": False})
    assert found["loader-sampler-bound"]["evidence"]["sample_share"] > 0.6
    assert found["loader-sampler-bound"]["fix"].startswith("loader = NeighborLoader(data, num_neighbors=[10, 5], "
                                                           "batch_size=1024, shuffle=True, num_workers=2, ")
    assert "loader-fetch-bound" not in found


@pytest.mark.parametrize("backend, says", [
    ({"pyg_lib": False, "torch_sparse": True}, "check_sampling_backends.py --require-neighbor-backend"),
    ({"pyg_lib": True, "torch_sparse": False}, "num_neighbors=[5, 2]")])
def test_where_workers_did_not_pay_sampling_is_pyg_lib_or_a_smaller_fan_out(backend, says):
    found, _ = replay({"default": [10.0, 10.1]}, [0.1, 0.1], options=SYNTHETIC, baseline="default",
                      breakdown=SAMPLING, backend=backend)
    assert says in found["loader-sampler-bound"]["fix"]


@pytest.mark.parametrize("split, found_id", [
    ({"sample_s": 0.014, "fetch_s": 0.002, "collate_s": 0.004}, "loader-sampler-bound"),
    ({"sample_s": 0.011, "fetch_s": 0.005, "collate_s": 0.004}, None),
    ({"sample_s": 0.002, "fetch_s": 0.012, "collate_s": 0.006}, "loader-fetch-bound"),
    ({"sample_s": 0.0, "fetch_s": 0.0, "collate_s": 0.0}, None)])
def test_a_share_of_sixty_percent_or_more_names_the_bound(split, found_id):
    split = dict(split, status="ok", batch_s=split["sample_s"] + split["fetch_s"] + split["collate_s"])
    found, _ = replay({"default": [10.0, 10.1]}, [0.1, 0.1], options=SYNTHETIC, baseline="default", breakdown=split)
    assert {"loader-sampler-bound", "loader-fetch-bound"} & set(found) == ({found_id} if found_id else set())


@pytest.mark.finding("loader-no-sampler-backend")
def test_no_backend_names_the_checker_that_names_the_install():
    found, advice_ = replay({}, [], options=SYNTHETIC, baseline="default",
                            backend={"pyg_lib": False, "torch_sparse": False})
    assert advice_ is None and "--require-neighbor-backend" in found["loader-no-sampler-backend"]["fix"]
