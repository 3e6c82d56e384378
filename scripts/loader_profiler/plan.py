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


# ---------------------------------------------------------------------------
# The loop, measured in interleaved rounds (the default since issue 31)
# ---------------------------------------------------------------------------

MAX_ROUNDS = 6       # more rounds than this add little but time
MAX_BLOCK_S = 5.0    # a block longer than this pairs badly: the load changes within it
TARGET_ROUNDS = 3    # rounds of blocks planned; each block of a round is paired with the baseline's
MIN_ROUNDS = 2       # fewer cannot show that a win repeats
MIN_BLOCK_S = 0.3    # a block shorter than this is mostly start-up
BUSY_CORES = 0.5     # other processes' CPU (in cores) above which a block counts as measured under load
MIN_GAIN = 0.03      # a paired win smaller than this is not worth a change of settings
TIE_SHARE = 0.05     # a cheaper configuration this close to the fastest (paired medians) is as good
DROP_SHARE = 0.4     # a configuration below this share of its round's fastest is not measured again


def dropped(blocks, round_index, keep):
    """Configurations so much slower than the fastest of this round that more rounds cannot make
    them win: they cost the most time per step, and time is what the other rounds need."""
    mine = [b for b in blocks if b["round"] == round_index]
    if not mine:
        return set()
    best = max(b["epoch_steps_per_s"] for b in mine)
    return {b["config"] for b in mine if b["epoch_steps_per_s"] < DROP_SHARE * best and b["config"] not in keep}


def current_settings(current, default):
    """The user's settings (--current) over the default loader's; None when not given."""
    if not current:
        return None
    settings = dict(default)
    for key, value in current.items():
        settings["torch_threads" if key == "threads" else key] = value
    if not settings["num_workers"]:
        settings["persistent_workers"] = False
    return settings


def same(a, b):
    keys = set(a) | set(b)
    return all(a.get(k, DEFAULT_EXTRA.get(k)) == b.get(k, DEFAULT_EXTRA.get(k)) for k in keys if k != "affinity_cores")


DEFAULT_EXTRA = {"worker_threads": 1}


def candidates(default, current, per_rank_cores, max_workers=None):
    """(name, settings) in priority order, the baseline first: the user's settings where given, the
    default, then persistent workers 0, 1, 2 and the cores, each with the main process's torch threads
    at 1, at the cores left to it and at all the cores (non-persistent variants need no block of their own: their epoch
    is the persistent one's plus a start-up measured in every block)."""
    default = dict(default, worker_threads=1)
    chosen = []
    if current is not None:
        chosen.append(("current", dict(current, worker_threads=current.get("worker_threads") or 1)))
    chosen.append(("default", default))
    top = min(per_rank_cores, max_workers) if max_workers else per_rank_cores
    for workers in sorted({0, 1, 2, top} & set(range(0, top + 1))):
        for threads in sorted({1, max(1, per_rank_cores - workers), per_rank_cores}, reverse=True):
            settings = dict(default, num_workers=workers, persistent_workers=bool(workers), torch_threads=threads)
            name = "workers-%d-threads-%d" % (workers, threads) if workers else "default-threads-%d" % threads
            chosen.append((name, settings))
    unique = []
    for name, settings in chosen:
        if not any(same(settings, other) for _, other in unique):
            unique.append((name, settings))
    return unique


def block_seconds(seconds_left, blocks_left, round_overhead_s=0.0):
    """An equal share of what is left among the blocks still planned, less each block's measured
    overhead (start-up, ending workers); None when not even MIN_BLOCK_S is left per block."""
    share = (seconds_left / max(blocks_left, 1)) - round_overhead_s
    return share if share >= MIN_BLOCK_S else None


def epoch_rate(block, settings, batches_per_epoch):
    """Steps/s over a whole epoch from one block: each epoch pays a start-up (new workers unless
    persistent: the block's first batch), the other steps come at the block's steady rate."""
    rate = block["steps_per_s"]
    starts_workers = settings["num_workers"] and not settings["persistent_workers"]
    restart = block["first_batch_s"] if starts_workers else 1.0 / rate
    if block.get("restarts") and starts_workers:
        restart = statistics.median(block["restarts"])
    return batches_per_epoch / ((batches_per_epoch - 1) / rate + restart)


def other_cores(block):
    """Cores' worth of CPU other processes used during a block (what the machine used less ours)."""
    if block.get("machine_cpu_s") is None or not block.get("wall_s"):
        return None
    return max(block["machine_cpu_s"] - block["own_cpu_s"], 0.0) / block["wall_s"]


def combine_block(answers, settings, batches_per_epoch):
    """One configuration's block in one round, from its ranks' blocks, which ran at the same time."""
    own = sum(a["own_cpu_s"] for a in answers)
    machine = answers[0]["machine_cpu_s"]
    wall = max(a["wall_s"] for a in answers)
    merged = {"machine_cpu_s": machine, "own_cpu_s": own, "wall_s": wall}
    return {"steps_per_s": sum(a["steps_per_s"] for a in answers), "seeds_per_s": sum(a["seeds_per_s"] for a in answers),
            "epoch_steps_per_s": sum(epoch_rate(a, settings, batches_per_epoch) for a in answers),
            "first_batch_s": max(a["first_batch_s"] for a in answers), "steps": sum(a["steps"] for a in answers),
            "restarts": [r for a in answers for r in a["restarts"]], "wall_s": round(wall, 3),
            "other_cpu_cores": None if other_cores(merged) is None else round(other_cores(merged), 2),
            "peak_rss_bytes": sum(a["peak_rss_bytes"] for a in answers),
            "per_rank_steps_per_s": [round(a["steps_per_s"], 3) for a in answers]}


def paired(blocks, config, base):
    """Round by round, config's epoch rate over base's in the same round: -> [ratio, ...]."""
    mine = {b["round"]: b["epoch_steps_per_s"] for b in blocks if b["config"] == config}
    theirs = {b["round"]: b["epoch_steps_per_s"] for b in blocks if b["config"] == base}
    return [mine[r] / theirs[r] for r in sorted(mine) if r in theirs and theirs[r] > 0]


def config_record(name, settings, blocks, baseline, default_name, seeds_per_batch):
    """The measured record of one configuration over its rounds (the old keys keep their meaning:
    batches/s are the loop's steps/s, one step a batch)."""
    mine = [b for b in blocks if b["config"] == name]
    steady = [b["steps_per_s"] for b in mine]
    epoch = [b["epoch_steps_per_s"] for b in mine]
    others = [b["other_cpu_cores"] for b in mine if b["other_cpu_cores"] is not None]
    record = {
        "name": name, "settings": settings, "status": "ok", "rounds": len(mine),
        "batches_per_s": round(statistics.median(steady), 3),
        "batches_per_s_range": [round(min(steady), 3), round(max(steady), 3)],
        "seeds_per_s": round(statistics.median(epoch) * seeds_per_batch, 1),
        "epoch_batches_per_s": round(statistics.median(epoch), 3),
        "epoch_batches_per_s_range": [round(min(epoch), 3), round(max(epoch), 3)],
        "first_batch_s": round(statistics.median(b["first_batch_s"] for b in mine), 4),
        "restart_s": round(statistics.median(b["first_batch_s"] for b in mine), 4)
        if settings["num_workers"] and not settings["persistent_workers"] else round(1.0 / statistics.median(steady), 4),
        "peak_rss_mb": round(max(b["peak_rss_bytes"] for b in mine) / 2 ** 20, 1),
        "batches": sum(b["steps"] for b in mine),
        "other_cpu_cores": others,
    }
    if len(mine[0].get("per_rank_steps_per_s") or []) > 1:
        record["per_rank_batches_per_s"] = [round(statistics.median(rates), 3) for rates in
                                            zip(*[b["per_rank_steps_per_s"] for b in mine])]
    for key, base in (("baseline", baseline), ("default", default_name)):
        ratios = paired(blocks, name, base)
        record["ratio_to_%s" % key] = round(statistics.median(ratios), 3) if ratios else None
        record["ratio_to_%s_range" % key] = [round(min(ratios), 3), round(max(ratios), 3)] if ratios else None
    return record


def wins(blocks, config, base):
    """True when config beat base in every round both were measured in (at least MIN_ROUNDS), by
    MIN_GAIN at the median: a win that repeats under whatever load each round saw."""
    ratios = paired(blocks, config, base)
    return len(ratios) >= MIN_ROUNDS and min(ratios) > 1.0 and statistics.median(ratios) > 1.0 + MIN_GAIN


def loop_cost(config):
    """What a configuration asks of the machine: processes, then threads, then memory."""
    settings = config["settings"]
    return (settings["num_workers"], settings["torch_threads"], settings.get("worker_threads") or 1,
            config["peak_rss_mb"])


def choose_paired(configs, blocks, baseline):
    """-> (chosen record, verdict, baseline record). verdict: "faster" (it beats the baseline in every
    round), "baseline" (nothing beats it and nothing looks faster), or "undecided" (something looked
    faster at the median but not in every round: the spread covers the difference)."""
    ok = {c["name"]: c for c in measured(configs) if c.get("rounds")}
    base = ok.get(baseline)
    if base is None:
        return None, "unmeasured", None
    best = max(ok.values(), key=lambda c: c["ratio_to_baseline"] or 0)
    # A cheaper configuration is chosen over the fastest only when it is within TIE_SHARE of it at the
    # median: "within the noise" of a few rounds on a busy machine can hide a large difference.
    contenders = [c for c in ok.values() if c is not base and wins(blocks, c["name"], baseline)
                  and not wins(blocks, best["name"], c["name"])
                  and c["ratio_to_baseline"] >= best["ratio_to_baseline"] * (1.0 - TIE_SHARE)]
    if contenders:
        return min(contenders, key=loop_cost), "faster", base
    if best is not base and (best["ratio_to_baseline"] or 0) > 1.0 + MIN_GAIN:
        return base, "undecided", base
    return base, "baseline", base


def load_of(blocks):
    """The other processes' CPU over the run: median and range in cores, and how many blocks were busy."""
    others = [b["other_cpu_cores"] for b in blocks if b.get("other_cpu_cores") is not None]
    if not others:
        return None
    return {"other_cpu_cores_median": round(statistics.median(others), 2),
            "other_cpu_cores_range": [round(min(others), 2), round(max(others), 2)],
            "busy_blocks": sum(1 for o in others if o >= BUSY_CORES), "blocks": len(others),
            "busy_threshold_cores": BUSY_CORES}


def winners_by_load(blocks, configs):
    """{"busy": name, "quiet": name}: the fastest configuration (median epoch rate) over the rounds
    whose blocks were, on average, under load and over those that were not; a side with fewer than
    MIN_ROUNDS rounds is absent."""
    by_round = {}
    for block in blocks:
        if block.get("other_cpu_cores") is not None:
            by_round.setdefault(block["round"], []).append(block["other_cpu_cores"])
    sides = {"busy": [], "quiet": []}
    for round_index, others in by_round.items():
        sides["busy" if statistics.median(others) >= BUSY_CORES else "quiet"].append(round_index)
    names = [c["name"] for c in measured(configs) if c.get("rounds")]
    found = {}
    for side, rounds in sides.items():
        if len(rounds) < MIN_ROUNDS:
            continue
        rates = {}
        for name in names:
            mine = [b["epoch_steps_per_s"] for b in blocks if b["config"] == name and b["round"] in rounds]
            if len(mine) == len(rounds):
                rates[name] = statistics.median(mine)
        if rates:
            found[side] = max(rates, key=rates.get)
    return found
