"""The profiler's judgement of interleaved rounds (issue 31), replayed on measured-looking blocks:
the cases a 2-core test machine cannot produce on demand (a load that changes between rounds, a
spread that covers every difference). Rules and recommendation run exactly as after a real run."""

import sys

import pytest

from conftest import load_modules



def package():
    """The profiler's package, imported to replay its rules (no bytecode written)."""
    load_modules(["loader_profiler.advice", "loader_profiler.plan", "loader_profiler.rules"])
    return sys.modules["loader_profiler"]


class Options:
    argv = ["--data", "graph.pt", "--step", "train:step", "--current", "num_workers=6,threads=2"]
    budget = 60.0
    ranks = 1
    spec = {"synthetic": None, "data": "graph.pt", "store": None, "num_neighbors": [15, 10], "batch_size": 512,
            "shuffle": True, "link": False, "input_nodes": None, "input_edges": None, "batches_per_epoch": 100}


def settings(workers=0, threads=2, persistent=None):
    return {"num_workers": workers, "persistent_workers": bool(workers) if persistent is None else persistent,
            "filter_per_worker": True, "pin_memory": False, "torch_threads": threads, "affinity": False,
            "worker_threads": 1}


CONFIGS = {"current": settings(6, 2, persistent=False), "default": settings(0, 2),
           "default-threads-1": settings(0, 1), "workers-1-threads-1": settings(1, 1)}


def replay(rates, others):
    """rates: {config: [epoch steps/s per round]}, others: [other processes' cores per round]."""
    lp = package()
    blocks = []
    for name, per_round in rates.items():
        for round_index, rate in enumerate(per_round):
            blocks.append({"config": name, "round": round_index, "steps_per_s": rate, "epoch_steps_per_s": rate,
                           "first_batch_s": 0.5, "steps": 20, "restarts": [], "wall_s": 1.0,
                           "other_cpu_cores": others[round_index], "peak_rss_bytes": 300 << 20, "seeds_per_s": 1})
    configs = [lp.plan.config_record(name, CONFIGS[name], blocks, "current", "default", 512.0) for name in rates]
    facts = {"configs": configs, "blocks": blocks, "plan": {"baseline": "current"},
             "graph": {"batches_per_epoch": 100, "feature_bytes": 1, "num_edges": 1}}
    facts["recommendation"] = lp.advice.recommendation(configs, dict(Options.spec), 1, blocks, "current")
    return {f["id"]: f for f in lp.rules.diagnose(facts, Options())}, facts["recommendation"]


def test_a_win_in_every_round_is_recommended_with_paired_speedups_against_current_and_default():
    found, advice = replay({"current": [2.0, 2.2, 1.8, 2.0], "default": [3.0, 3.3, 2.7, 3.0],
                            "default-threads-1": [3.1, 3.4, 2.8, 3.1], "workers-1-threads-1": [2.0, 2.1, 1.9, 2.0]},
                           [0.1, 0.2, 0.1, 0.1])
    # default and default-threads-1 are within each other's noise: the cheaper (fewer threads) is chosen.
    assert advice["verdict"] == "faster" and advice["config"] == "default-threads-1"
    assert advice["speedup"] == pytest.approx(1.55, abs=0.01) and advice["speedup_range"][0] > 1.5
    assert advice["speedup_over_default"] == pytest.approx(1.03, abs=0.01)
    assert advice["baseline"] == "current" and advice["epoch_s"] == round(100 / 3.1, 2)
    assert advice["env"] == {"OMP_NUM_THREADS": "1"} and advice["settings"] == {}
    assert found["loader-faster-settings"]["evidence"]["load"]["busy_blocks"] == 0
    assert "loader-load-decides" not in found


@pytest.mark.finding("loader-too-busy-to-tell")
def test_a_spread_that_covers_the_differences_under_load_is_too_busy_to_tell():
    found, advice = replay({"current": [2.0, 2.0, 2.0], "default": [2.6, 1.7, 2.5],
                            "default-threads-1": [2.5, 1.8, 2.4]}, [1.5, 1.8, 1.2])
    assert advice["verdict"] == "undecided" and advice["config"] == "current" and advice["speedup"] == 1.0
    busy = found["loader-too-busy-to-tell"]
    assert busy["evidence"]["load"]["other_cpu_cores_median"] >= 1.0
    assert "--budget 120" in busy["fix"] and "quiet" in busy["fix"]
    assert "loader-faster-settings" not in found and "loader-default-is-best" not in found


@pytest.mark.finding("loader-default-is-best")
def test_the_same_spread_on_a_quiet_machine_keeps_the_baseline_without_blaming_the_load():
    found, advice = replay({"current": [2.0, 2.0, 2.0], "default": [2.6, 1.7, 2.5]}, [0.1, 0.1, 0.2])
    assert advice["verdict"] == "undecided"
    assert "loader-default-is-best" in found and "loader-too-busy-to-tell" not in found


@pytest.mark.finding("loader-load-decides")
def test_when_busy_and_quiet_rounds_pick_different_threads_both_settings_are_given():
    # Rounds 0 and 2 under load: one thread wins by 2x; rounds 1 and 3 quiet: two threads win.
    found, advice = replay({"current": [1.0, 2.0, 1.0, 2.0], "default": [1.5, 4.0, 1.4, 4.1],
                            "default-threads-1": [3.0, 3.0, 3.1, 3.0]}, [1.8, 0.1, 1.6, 0.2])
    decides = found["loader-load-decides"]
    assert decides["evidence"]["under_load"]["env"] == {"OMP_NUM_THREADS": "1"}
    assert decides["evidence"]["quiet"]["env"] == {"OMP_NUM_THREADS": "2"}
    assert decides["evidence"]["quiet"]["measured"] is True
    assert "export OMP_NUM_THREADS=1" in decides["fix"] and "OMP_NUM_THREADS=2" in decides["fix"]


def test_fewer_threads_winning_in_rounds_that_were_all_busy_names_the_quiet_side_unmeasured():
    found, advice = replay({"current": [1.0, 1.0, 1.0], "default": [1.4, 1.5, 1.4],
                            "default-threads-1": [2.0, 2.1, 2.0]}, [1.5, 1.7, 1.6])
    assert advice["verdict"] == "faster" and advice["config"] == "default-threads-1"
    decides = found["loader-load-decides"]
    assert decides["evidence"]["quiet"]["measured"] is False and "rerun when quiet" in decides["fix"]
