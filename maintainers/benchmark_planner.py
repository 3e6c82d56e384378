#!/usr/bin/env python3
"""What a plan costs: plan_capacity.py from sizes, and from a saved graph file at two sizes on disk, in one
run, side by side; then what --measure costs against the plan alone, per launch shape. Each pair alternates
its order from round to round, so drift on a busy machine hits both sides alike.

A plan from a file reads sizes only (the pickle is scanned, the tensors memory-mapped, none read), so its
cost must not grow with the file: the verdict is the median ratio of the large file's plan time over the
small file's. --measure runs the job (each rank, and each spawned worker, imports torch): it is reported
beside the plan alone, with the median ratio of the pair, and must end within its --timeout. Run it with the
interpreter that has torch and PyG, as root for a private /dev/shm: ``python maintainers/benchmark_planner.py``.
This is a benchmark, not a test.

output: a table on stderr, one JSON document on stdout.
exit codes: 0 the file ratio within its target and every --measure finished in time, 1 not, 2 usage error.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

PLANNER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts", "plan_capacity.py")
TARGET = 1.5  # a file 50 times larger may make the plan at most this much slower
MEASURE_TIMEOUT = 180
JOB = ["--nodes", "100000", "--edges", "1000000", "--features", "32", "--num-neighbors", "10,5", "--gpus-per-node",
       "0", "--ranks-per-node", "2", "--cores", "2"]
MEASURED = {"measure-torchrun2-w1": JOB + ["--launch", "torchrun", "--num-workers", "1"],
            "measure-spawn2-w1": JOB + ["--launch", "spawn", "--num-workers", "1"]}


def plan_seconds(args):
    started = time.perf_counter()
    completed = subprocess.run([sys.executable, PLANNER] + args, capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - started
    if completed.returncode != 0:
        raise SystemExit("plan failed (exit %d): %s %s" % (completed.returncode, completed.stderr[-1000:],
                                                          completed.stdout[-1000:]))
    json.loads(completed.stdout)
    return seconds


def save_graph(folder, name, nodes, edges, features):
    import torch
    from torch_geometric.data import Data
    path = os.path.join(folder, name)
    torch.save(Data(x=torch.randn(nodes, features), edge_index=torch.randint(0, nodes, (2, edges)),
                    y=torch.zeros(nodes, dtype=torch.long)), path)
    return path


def paired(cases, rounds):
    """{name: [seconds]} of every case, the order reversed every other round."""
    times = dict((name, []) for name in cases)
    for index in range(rounds):
        for name in (list(cases) if index % 2 == 0 else list(reversed(list(cases)))):
            times[name].append(plan_seconds(cases[name]))
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-measure", action="store_true", help="the plan pairs only")
    options = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="benchmark-planner-")
    small = save_graph(folder, "small.pt", 20000, 100000, 32)            # about 4.4 MB on disk
    large = save_graph(folder, "large.pt", 1000000, 5000000, 32)         # about 216 MB on disk
    cases = {"sizes": ["--nodes", "111000000", "--edges", "1600000000", "--undirected", "--features", "128",
                       "--layers", "3", "--num-neighbors", "15,10,5", "--gpus-per-node", "4", "--host-ram", "512GB",
                       "--cores", "64"],
             "file-small": ["--data", small], "file-large": ["--data", large]}
    try:
        times = paired(cases, options.rounds)
    finally:
        for path in (small, large):
            os.unlink(path)
        os.rmdir(folder)
    medians = dict((name, statistics.median(values)) for name, values in times.items())
    ratio = statistics.median([l / s for l, s in zip(times["file-large"], times["file-small"])])
    sizes = {"file-small": 4.4e6, "file-large": 2.16e8}
    for name in cases:
        sys.stderr.write("%-11s median %.2f s over %d rounds %s\n" % (
            name, medians[name], options.rounds, "(file %.0f MB)" % (sizes[name] / 1e6) if name in sizes else ""))
    sys.stderr.write("large/small file plan time: median ratio %.2f (target <= %.2f)\n" % (ratio, TARGET))
    result = {"seconds": times, "medians": medians, "large_over_small": ratio, "target": TARGET,
              "passed": ratio <= TARGET}
    if not options.no_measure:
        result["measure"] = measure_costs(options.rounds)
        result["passed"] = result["passed"] and all(pair["in_time"] for pair in result["measure"].values())
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0 if result["passed"] else 1


def measure_costs(rounds):
    """Per launch shape: the plan alone against the same line with --measure, paired."""
    found = {}
    for name, args in MEASURED.items():
        times = paired({"plan": args, "measure": args + ["--measure", "--timeout", str(MEASURE_TIMEOUT)]}, rounds)
        ratio = statistics.median([m / p for m, p in zip(times["measure"], times["plan"])])
        found[name] = {"seconds": times, "plan_median_s": statistics.median(times["plan"]),
                       "measure_median_s": statistics.median(times["measure"]), "measure_over_plan": ratio,
                       "in_time": max(times["measure"]) < MEASURE_TIMEOUT}
        sys.stderr.write("%-22s plan %.2f s, with --measure %.1f s (median ratio %.0f; bound %d s)\n" % (
            name, found[name]["plan_median_s"], found[name]["measure_median_s"], ratio, MEASURE_TIMEOUT))
    return found


if __name__ == "__main__":
    sys.exit(main())
