"""What to measure and how to judge it: the configurations tried, how the budget is shared among
them, how ranks' measurements add up, and when one configuration honestly beats another.
Plain data in, plain data out (no torch), used by the coordinator and the report alike."""

import statistics

MIN_SLICE_S = 1.0  # a configuration given less than this cannot show a median worth reporting
EXPECTED_VARIANTS = 4  # how many variants of the fastest worker count to leave time for


def default_settings(default_threads):
    """The default loader: what NeighborLoader(data, ...) does with no loader keyword argument."""
    return {"num_workers": 0, "persistent_workers": False, "filter_per_worker": True, "pin_memory": False,
            "torch_threads": default_threads, "affinity": False}


def worker_ladder(per_rank_cores, max_workers=None):
    """1, 2, 4, ... workers up to the per-rank core budget, and the budget itself."""
    top = min(per_rank_cores, max_workers) if max_workers else per_rank_cores
    ladder, count = [], 1
    while count < top:
        ladder.append(count)
        count *= 2
    return ladder + [top] if top >= 1 else ladder


def ladder_configs(default, per_rank_cores, max_workers=None):
    return [("workers-%d" % count, dict(default, num_workers=count, persistent_workers=True))
            for count in worker_ladder(per_rank_cores, max_workers)]


def variant_configs(base, default, per_rank_cores, cuda):
    """One change at a time to the fastest worker configuration (and the threads of the default)."""
    variants = []
    workers = base["num_workers"]
    if workers:
        variants.append(("%s-not-persistent" % name_of(base), dict(base, persistent_workers=False)))
        variants.append(("%s-filter-in-main" % name_of(base), dict(base, filter_per_worker=False)))
        if workers <= per_rank_cores:
            variants.append(("%s-affinity" % name_of(base), dict(base, affinity=True)))
        threads = max(1, per_rank_cores - workers)
        if threads != base["torch_threads"]:
            variants.append(("%s-threads-%d" % (name_of(base), threads), dict(base, torch_threads=threads)))
    # The default with fewer threads too: part of a worker configuration's win may be its single
    # thread per process, which the main process can have without workers.
    for threads in sorted({per_rank_cores, 1} - {default["torch_threads"]}, reverse=True):
        variants.append(("default-threads-%d" % threads, dict(default, torch_threads=threads)))
    if cuda:
        variants.append(("%s-pinned" % name_of(base), dict(base, pin_memory=True)))
    return variants


def name_of(settings):
    return "workers-%d" % settings["num_workers"] if settings["num_workers"] else "default"


def affinity_cores(allowed, per_rank_cores, rank, workers):
    """Explicit loader_cores for one rank: one core per worker from the end of the rank's own block,
    so that the main process keeps the block's first cores and ranks never share a core."""
    block = sorted(allowed)[rank * per_rank_cores:(rank + 1) * per_rank_cores]
    return block[-workers:] if workers <= len(block) else None


def slice_seconds(seconds_left, configs_left):
    """An equal share of what is left among the configurations still planned, or among as many as
    get MIN_SLICE_S each (the next one first: the plan is in priority order); None when not even one."""
    if seconds_left < MIN_SLICE_S:
        return None
    return seconds_left / max(min(configs_left, int(seconds_left // MIN_SLICE_S)), 1)


def epoch_rates(batch_rates, batches_per_epoch, restart_s):
    """Batches/s over whole epochs: each epoch's first batch takes restart_s (new workers unless
    persistent), the others come at the steady rate."""
    return [batches_per_epoch / ((batches_per_epoch - 1) / rate + restart_s) for rate in batch_rates]


def combine_ranks(per_rank, batches_per_epoch):
    """One configuration's record from its ranks' measurements, which ran at the same time.

    Window i of every rank overlapped, so the aggregate of window i is their sum.
    """
    windows = zip(*[r["batches_per_s"] for r in per_rank])
    seed_windows = zip(*[r["seeds_per_s"] for r in per_rank])
    epoch_windows = zip(*[epoch_rates(r["batches_per_s"], batches_per_epoch, r["restart_s"]) for r in per_rank])
    batch_rates = [sum(w) for w in windows]
    epoch = [sum(w) for w in epoch_windows]
    return {
        "batches_per_s": round(statistics.median(batch_rates), 3),
        "batches_per_s_range": [round(min(batch_rates), 3), round(max(batch_rates), 3)],
        "seeds_per_s": round(statistics.median([sum(w) for w in seed_windows]), 1),
        "epoch_batches_per_s": round(statistics.median(epoch), 3),
        "epoch_batches_per_s_range": [round(min(epoch), 3), round(max(epoch), 3)],
        "first_batch_s": round(max(r["first_batch_s"] for r in per_rank), 4),
        "restart_s": round(max(r["restart_s"] for r in per_rank), 4),
        "restart_source": sorted(set(r["restart_source"] for r in per_rank)),
        "peak_rss_mb": round(sum(r["peak_rss_bytes"] for r in per_rank) / 2 ** 20, 1),
        "batches": sum(r["batches"] for r in per_rank),
    }


def spread(record, metric="epoch_batches_per_s"):
    low, high = record[metric + "_range"]
    return high - low


def beats(candidate, base, metric="epoch_batches_per_s"):
    """True when the candidate's median is above the base's by more than either one's spread
    (max - min over the repeats): the honest reading of "faster" on a machine that is also busy."""
    margin = candidate[metric] - base[metric]
    return margin > max(spread(candidate, metric), spread(base, metric))


def measured(configs):
    return [c for c in configs if c.get("status") == "ok"]


def fastest(configs):
    ok = measured(configs)
    return max(ok, key=lambda c: c["epoch_batches_per_s"]) if ok else None


def cost(config):
    """What a configuration asks of the machine: processes, pinned cores and memory, in that order."""
    settings = config["settings"]
    return (settings["num_workers"], settings["affinity"], settings["pin_memory"], config["peak_rss_mb"])


def choose(configs):
    """-> (the configuration to recommend, whether it honestly beats the default, the default).

    Among the configurations that beat the default beyond the noise and that the fastest one does
    not beat beyond the noise, the cheapest: a difference within the noise buys no extra process."""
    default = next((c for c in measured(configs) if c["name"] == "default"), None)
    best = fastest(configs)
    if default is None or best is None:
        return best, False, default
    contenders = [c for c in measured(configs) if beats(c, default) and not beats(best, c)]
    if not contenders:
        return default, False, default
    return min(contenders, key=cost), True, default
