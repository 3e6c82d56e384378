#!/usr/bin/env python3
"""What a plan costs: plan_capacity.py from sizes, and from a saved graph file at two sizes on disk, in one
run, side by side (rounds alternate the order so drift on a busy machine hits all alike).

A plan from a file reads sizes only (the pickle is scanned, the tensors memory-mapped, none read), so its
cost must not grow with the file: the verdict is the median ratio of the large file's plan time over the
small file's. Run it with the interpreter that has torch and PyG: ``python maintainers/benchmark_planner.py``.
This is a benchmark, not a test.

output: a table on stderr, one JSON document on stdout.
exit codes: 0 the ratio within the target, 1 it missed, 2 usage error.
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


def plan_seconds(args):
    started = time.perf_counter()
    completed = subprocess.run([sys.executable, PLANNER] + args, capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - started
    if completed.returncode != 0:
        raise SystemExit("plan failed: %s" % completed.stderr[-1000:])
    json.loads(completed.stdout)
    return seconds


def save_graph(folder, name, nodes, edges, features):
    import torch
    from torch_geometric.data import Data
    path = os.path.join(folder, name)
    torch.save(Data(x=torch.randn(nodes, features), edge_index=torch.randint(0, nodes, (2, edges)),
                    y=torch.zeros(nodes, dtype=torch.long)), path)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="benchmark-planner-")
    small = save_graph(folder, "small.pt", 20000, 100000, 32)            # about 4.4 MB on disk
    large = save_graph(folder, "large.pt", 1000000, 5000000, 32)         # about 216 MB on disk
    cases = {"sizes": ["--nodes", "111000000", "--edges", "1600000000", "--undirected", "--features", "128",
                       "--layers", "3", "--num-neighbors", "15,10,5", "--gpus-per-node", "4"],
             "file-small": ["--data", small], "file-large": ["--data", large]}
    times = dict((name, []) for name in cases)
    try:
        for index in range(options.rounds):
            order = list(cases) if index % 2 == 0 else list(reversed(list(cases)))
            for name in order:
                times[name].append(plan_seconds(cases[name]))
    finally:
        for path in (small, large):
            os.unlink(path)
        os.rmdir(folder)
    medians = dict((name, statistics.median(values)) for name, values in times.items())
    ratios = [l / s for l, s in zip(times["file-large"], times["file-small"])]
    ratio = statistics.median(ratios)
    sizes = {"file-small": 4.4e6, "file-large": 2.16e8}
    for name in cases:
        sys.stderr.write("%-11s median %.2f s over %d rounds %s\n" % (
            name, medians[name], options.rounds, "(file %.0f MB)" % (sizes[name] / 1e6) if name in sizes else ""))
    sys.stderr.write("large/small file plan time: median ratio %.2f (target <= %.2f)\n" % (ratio, TARGET))
    json.dump({"seconds": times, "medians": medians, "large_over_small": ratio, "target": TARGET,
               "passed": ratio <= TARGET}, sys.stdout)
    sys.stdout.write("\n")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
