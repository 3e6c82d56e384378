#!/usr/bin/env python3
"""Measure what the loader profiler's own measuring costs: its timing loop (one block of the loop as
the interleaved rounds run it: start-up, burst skipped, the RSS sampling thread) against a plain `for batch in loader` loop over the same
loader, in one run, side by side.

Each round runs both on the same loader object for the same wall time, alternating which goes
first (A,B then B,A, ...) so that drift on a busy machine hits both alike. The verdict is the
median over rounds of the profiler's batches/s over the plain loop's in the same round (1.0 means
the profiler reports what a training loop would see); the ratio of the two medians is shown too. Run it with the interpreter that has torch, PyG and a sampling backend:
``python scripts/benchmark_profiler.py``. This is a benchmark, not a test.

output: a table on stderr, one JSON document on stdout.
exit codes: 0 every ratio within the target, 1 one missed, 2 usage error.
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.dont_write_bytecode = True  # the skill's folder stays as it was
_here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts")
if _here not in sys.path:
    sys.path.insert(0, _here)

TARGET = 0.95  # the profiler's rate may be at most this much below the plain loop's


def plain_loop(loader, seconds):
    """batches/s of `for batch in loader` for about `seconds` after its first batch (the profiler, too,
    times from the first batch on); new epochs are included as they come."""
    iterator = iter(loader)
    next(iterator)
    batches, started = 0, time.perf_counter()
    while True:
        for _ in iterator:
            batches += 1
            if time.perf_counter() - started >= seconds:
                return batches / (time.perf_counter() - started)
        iterator = iter(loader)


def profiler_loop(loader, settings, seconds):
    """batches/s as the profiler measures the loop since issue 31: one block (a fresh iter(loader),
    the prefetch burst skipped, the steady rate after it), here with no training step."""
    from loader_profiler.measure import loop_block
    return loop_block(loader, settings, seconds, link=False, step=None)["steps_per_s"]


def run_pair(name, loader, settings, rounds, seconds):
    plain_loop(loader, min(seconds, 1.0))  # warm both paths' caches and workers alike
    samples = {"profiler": [], "plain": []}
    for round_index in range(rounds):
        order = ("profiler", "plain") if round_index % 2 == 0 else ("plain", "profiler")
        for side in order:
            rate = profiler_loop(loader, settings, seconds) if side == "profiler" else plain_loop(loader, seconds)
            samples[side].append(round(rate, 3))
    profiler, plain = statistics.median(samples["profiler"]), statistics.median(samples["plain"])
    # Each round's two sides ran back to back, so their ratio cancels the machine's drift between
    # rounds; the median of those is the verdict, the ratio of the medians is shown beside it.
    paired = statistics.median(a / b for a, b in zip(samples["profiler"], samples["plain"]))
    return {"name": name, "settings": settings, "profiler": {"median_batches_per_s": round(profiler, 3),
                                                             "samples": samples["profiler"]},
            "plain": {"median_batches_per_s": round(plain, 3), "samples": samples["plain"]},
            "ratio_of_medians": round(profiler / plain, 3), "ratio": round(paired, 3), "met": paired >= TARGET}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--synthetic", default="20000,200000,32", metavar="NODES,EDGES,FEATURES")
    parser.add_argument("--workers", type=int, default=2, help="num_workers of the second pair (default 2)")
    parser.add_argument("--rounds", type=int, default=6, help="alternated rounds per pair, at least 2")
    parser.add_argument("--seconds", type=float, default=3.0, help="wall time of each side of a round")
    options = parser.parse_args(argv)
    if options.rounds < 2 or options.seconds <= 0:
        parser.error("--rounds must be at least 2 and --seconds positive")
    import torch
    from loader_profiler.graph import build_loader, synthetic_graph
    from loader_profiler.plan import default_settings
    nodes, edges, features = [int(part) for part in options.synthetic.split(",")]
    data, _ = synthetic_graph(nodes, edges, features)
    spec = {"num_neighbors": [10, 5], "batch_size": 1024, "shuffle": True, "link": False}
    default = default_settings(torch.get_num_threads())
    pairs = [("default", default),
             ("workers-%d" % options.workers, dict(default, num_workers=options.workers, persistent_workers=True))]
    results = []
    for name, settings in pairs:
        loader = build_loader(data, spec, settings, {"input_nodes": None}, {})
        results.append(run_pair(name, loader, settings, options.rounds, options.seconds))
        del loader
    sys.stderr.write("%-12s %18s %18s %16s %13s  %s\n" % (
        "loader", "profiler batches/s", "plain batches/s", "ratio of medians", "paired ratio",
        "verdict (paired >= %.2f)" % TARGET))
    for result in results:
        sys.stderr.write("%-12s %18.1f %18.1f %16.3f %13.3f  %s\n" % (
            result["name"], result["profiler"]["median_batches_per_s"], result["plain"]["median_batches_per_s"],
            result["ratio_of_medians"], result["ratio"], "met" if result["met"] else "MISSED"))
    report = {"synthetic": [nodes, edges, features], "rounds": options.rounds, "seconds": options.seconds,
              "target_ratio": TARGET, "pairs": results, "all_met": all(r["met"] for r in results)}
    sys.stdout.write(json.dumps(report, indent=2) + "\n")
    return 0 if report["all_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
