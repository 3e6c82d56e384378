"""What to measure and how to judge it: the configurations tried, in interleaved rounds of short blocks,
how a round's blocks add up over ranks and epochs, which configurations leave the race, and when one
honestly beats another (paired round by round). Plain data in, plain data out (no torch), used by the
coordinator and the report alike."""

import statistics

PLANNED_ROUNDS = 5   # rounds the budget is shared among; racing leaves fewer configurations in the later ones
TARGET_ROUNDS = 3    # a quiet run whose answer is settled after this many rounds stops there
MAX_ROUNDS = PLANNED_ROUNDS
MAX_BLOCK_S = 5.0    # a block longer than this pairs badly: the load changes within it
MIN_ROUNDS = 2       # fewer cannot show that a win repeats
MIN_BLOCK_S = 0.3    # a block shorter than this is mostly start-up
BUSY_CORES = 0.5     # other processes' CPU (in cores) above which a block counts as measured under load
MIN_GAIN = 0.03      # a paired win smaller than this is not worth a change of settings
TIE_SHARE = 0.05     # a cheaper configuration this close to the fastest (paired medians) is as good
DROP_SHARE = 0.4     # a configuration below this share of its round's fastest in two rounds is not measured again,
LONE_DROP_SHARE = 0.2  # nor after one round below this share (one block under a burst of load can halve)
RACE_MARGIN = 0.10   # nor one another outran (in TARGET_ROUNDS rounds or more) by this much at the median
DEFAULT_EPOCHS = 10  # epochs a training run gives persistent workers to pay back their start-up (--epochs)


def default_settings(default_threads):
    """The default loader: what NeighborLoader(data, ...) does with no loader keyword argument."""
    return {"num_workers": 0, "persistent_workers": False, "filter_per_worker": True, "pin_memory": False,
            "torch_threads": default_threads}


def name_of(settings):
    return "workers-%d" % settings["num_workers"] if settings["num_workers"] else "default"


def spread(record, metric="epoch_batches_per_s"):
    low, high = record[metric + "_range"]
    return high - low


def beats(candidate, base, metric="epoch_batches_per_s"):
    """True when the candidate's median is above the base's by more than either one's spread
    (max - min over its rounds): the honest reading of "faster" without pairing rounds."""
    margin = candidate[metric] - base[metric]
    return margin > max(spread(candidate, metric), spread(base, metric))


def measured(configs):
    return [c for c in configs if c.get("status") == "ok"]


def raced_out(blocks, active, keep, rounds_done):
    """The configurations more rounds cannot make the answer, after `rounds_done` rounds: below
    LONE_DROP_SHARE of their round's fastest in their one round, or DROP_SHARE in every round of
    MIN_ROUNDS or more, or (from TARGET_ROUNDS rounds on:
    under load two rounds one way say little) outran by another active configuration by RACE_MARGIN
    at the median. They cost the time the close ones need. Those in `keep` (the baseline
    and the default, whose blocks every ratio is paired with) leave only when far below in MIN_ROUNDS
    rounds or more."""
    fastest = {}
    for block in blocks:
        fastest[block["round"]] = max(fastest.get(block["round"], 0.0), block["epoch_steps_per_s"])
    out = set()
    for name in active:
        mine = [b for b in blocks if b["config"] == name]
        share = DROP_SHARE if len(mine) >= MIN_ROUNDS else LONE_DROP_SHARE
        far = bool(mine) and all(b["epoch_steps_per_s"] < share * fastest[b["round"]] for b in mine)
        if far and (name not in keep or len(mine) >= MIN_ROUNDS):
            out.add(name)
        elif name not in keep and rounds_done >= TARGET_ROUNDS and any(
                outran(blocks, other, name, RACE_MARGIN, TARGET_ROUNDS) for other in active if other != name):
            out.add(name)
    return out


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
    return all(a.get(k, DEFAULT_EXTRA.get(k)) == b.get(k, DEFAULT_EXTRA.get(k)) for k in keys)


DEFAULT_EXTRA = {"worker_threads": 1}


def candidates(default, current, per_rank_cores, max_workers=None):
    """(name, settings) in priority order, the baseline first: the user's settings where given, the
    default, then persistent workers 0, 1, 2 and the cores, each with the main process's torch threads
    at 1, at the cores left to it and at all the cores; those whose threads fit the cores the workers
    leave come before those that oversubscribe them (a budget too short for all measures the first).
    Non-persistent variants need no block of their own: their epoch is the persistent one's plus a
    start-up measured in every block."""
    default = dict(default, worker_threads=1)
    chosen = []
    if current is not None:
        chosen.append(("current", dict(current, worker_threads=current.get("worker_threads") or 1)))
    chosen.append(("default", default))
    top = min(per_rank_cores, max_workers) if max_workers else per_rank_cores
    grid = []
    for workers in sorted({0, 1, 2, top} & set(range(0, top + 1))):
        for threads in sorted({1, max(1, per_rank_cores - workers), per_rank_cores}, reverse=True):
            settings = dict(default, num_workers=workers, persistent_workers=bool(workers), torch_threads=threads)
            name = "workers-%d-threads-%d" % (workers, threads) if workers else "default-threads-%d" % threads
            grid.append((name, settings))
    fit = [(name, settings) for name, settings in grid
           if settings["torch_threads"] <= max(1, per_rank_cores - settings["num_workers"])]
    chosen += fit + [item for item in grid if item not in fit]
    unique = []
    for name, settings in chosen:
        if not any(same(settings, other) for _, other in unique):
            unique.append((name, settings))
    return unique


def round_order(active, baseline, round_index):
    """The order of a round's blocks: the baseline first (a round the budget cuts short still pairs
    with it), then the others forward in even rounds and reversed in odd ones, so that a drift within
    rounds favours none of them."""
    others = [item for item in active if item[0] != baseline]
    first = [item for item in active if item[0] == baseline]
    return first + (others if round_index % 2 == 0 else others[::-1])


def block_seconds(seconds_left, blocks_left, round_overhead_s=0.0):
    """An equal share of what is left among the blocks still planned, less each block's measured
    overhead (start-up, ending workers); None when not even MIN_BLOCK_S is left per block."""
    share = (seconds_left / max(blocks_left, 1)) - round_overhead_s
    return share if share >= MIN_BLOCK_S else None


def epoch_rate(block, settings, batches_per_epoch, epochs=DEFAULT_EPOCHS):
    """Steps/s over the epochs of a training run, from one block. Each epoch: its steps at the block's
    steady rate, plus what its first batch waits beyond an ordinary batch (the epoch restarts measured
    in the block; else new workers' start-up, the block's first batch, unless they persist; else
    nothing). Once a run: persistent workers' start-up (the block's first batch), over `epochs` epochs."""
    rate = block["steps_per_s"]
    wait = block.get("batch_wait_s") or 0.0
    workers = settings["num_workers"]
    fresh = bool(workers) and not settings["persistent_workers"]
    if block.get("restarts"):
        restart = statistics.median(block["restarts"])
    else:
        restart = block["first_batch_s"] if fresh else wait
    seconds = batches_per_epoch / rate + max(restart - wait, 0.0)
    if workers and not fresh:
        seconds += max(block["first_batch_s"] - wait, 0.0) / max(epochs, 1)
    return batches_per_epoch / seconds


def other_cores(block):
    """Cores' worth of CPU other processes used during a block (what the machine used less ours)."""
    if block.get("machine_cpu_s") is None or not block.get("wall_s"):
        return None
    return max(block["machine_cpu_s"] - block["own_cpu_s"], 0.0) / block["wall_s"]


def combine_block(answers, settings, batches_per_epoch, epochs=DEFAULT_EPOCHS):
    """One configuration's block in one round, from its ranks' blocks, which ran at the same time."""
    own = sum(a["own_cpu_s"] for a in answers)
    machine = answers[0]["machine_cpu_s"]
    wall = max(a["wall_s"] for a in answers)
    merged = {"machine_cpu_s": machine, "own_cpu_s": own, "wall_s": wall}
    return {"steps_per_s": sum(a["steps_per_s"] for a in answers), "seeds_per_s": sum(a["seeds_per_s"] for a in answers),
            "epoch_steps_per_s": sum(epoch_rate(a, settings, batches_per_epoch, epochs) for a in answers),
            "first_batch_s": max(a["first_batch_s"] for a in answers), "steps": sum(a["steps"] for a in answers),
            "batch_wait_s": max(a.get("batch_wait_s") or 0.0 for a in answers),
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


def wins(blocks, config, base, margin=MIN_GAIN):
    """True when config beat base in every round both were measured in (at least MIN_ROUNDS), by
    `margin` at the median: a win that repeats under whatever load each round saw."""
    ratios = paired(blocks, config, base)
    return len(ratios) >= MIN_ROUNDS and min(ratios) > 1.0 and statistics.median(ratios) > 1.0 + margin


def outran(blocks, config, other, margin=MIN_GAIN, rounds=MIN_ROUNDS):
    """True when config left other behind: in at least `rounds` shared rounds other never beat it by
    more than MIN_GAIN (a round it won by less is the loop's own noise; of five rounds or more, one in
    five may be a burst of load's), and config led by `margin` at the median. How one setting among
    those that beat the baseline is ruled out."""
    ratios = sorted(paired(blocks, config, other))
    if len(ratios) < rounds:
        return False
    return ratios[len(ratios) // 5] > 1.0 - MIN_GAIN and statistics.median(ratios) > 1.0 + margin


def paired_median(blocks, config, base):
    """The median of config's paired ratios over base (1.0 where they share no round)."""
    ratios = paired(blocks, config, base)
    return statistics.median(ratios) if ratios else 1.0


def loop_cost(config):
    """What a configuration asks of the machine: processes, then threads, then memory."""
    settings = config["settings"]
    return (settings["num_workers"], settings["torch_threads"], settings.get("worker_threads") or 1,
            config["peak_rss_mb"])


def busy(blocks):
    return busy_load(load_of(blocks))


def busy_load(load):
    """True when other processes used BUSY_CORES or more over the run's blocks (median)."""
    return bool(load) and (load.get("other_cpu_cores_median") or 0) >= BUSY_CORES


def choose_paired(configs, blocks, baseline):
    """-> (chosen record, verdict, baseline record, how it was decided).

    The winners beat the baseline in every round. Of them, the contenders are those no other winner
    outran (see outran; under load over TARGET_ROUNDS rounds at least: two rounds one way say little
    there); the leader is the contender with the best worst median against the others; the choice is
    the cheapest contender within TIE_SHARE of the leader at the median. A contender outside that tie
    is unsettled: the rounds disagree about it by more than the difference. On a quiet machine the
    medians decide (the leader's group); under load the disagreement may be the load's doing (more
    processes win CPU share, fewer threads wait less), so nothing is presented as faster ("undecided").
    verdict: "faster", "under-load" (faster in every round, but the run was busy and its quiet rounds, if
    any, did not pick the same: the answer for this load only), "baseline" (nothing beat it and nothing
    looked faster), or "undecided"."""
    ok = {c["name"]: c for c in measured(configs) if c.get("rounds")}
    base = ok.get(baseline)
    if base is None:
        return None, "unmeasured", None, {}
    winners = [c for c in ok.values() if c is not base and wins(blocks, c["name"], baseline)]
    if not winners:
        best = max(ok.values(), key=lambda c: c["ratio_to_baseline"] or 0)
        if best is not base and (best["ratio_to_baseline"] or 0) > 1.0 + MIN_GAIN:
            return base, "undecided", base, {"leader": best["name"]}
        skipped = [c["name"] for c in configs if c.get("status") in ("skipped", "out-of-time")]
        if skipped and busy(blocks):  # under load, what the budget left out may be what wins
            return base, "undecided", base, {"skipped": skipped, "busy": True}
        return base, "baseline", base, {}
    loaded = busy(blocks)
    rounds = TARGET_ROUNDS if loaded else MIN_ROUNDS
    contenders = [c for c in winners if not any(
        other is not c and outran(blocks, other["name"], c["name"], rounds=rounds) for other in winners)] or winners

    def worst_median(config):
        return min([paired_median(blocks, config["name"], other["name"]) for other in contenders
                    if other is not config] or [1.0]), config["ratio_to_baseline"] or 0
    leader = max(contenders, key=worst_median)
    tied = [c for c in contenders if c is leader
            or paired_median(blocks, leader["name"], c["name"]) <= 1.0 + TIE_SHARE]
    chosen = min(tied, key=loop_cost)
    unsettled = [c["name"] for c in contenders if c not in tied]
    if loaded:  # and settings that kept up in some round but got fewer rounds than that takes under load
        unsettled += [name for name in short_of_rounds(ok, blocks, base) if name not in unsettled]
    detail = {"leader": leader["name"], "contenders": [c["name"] for c in contenders],
              "tied": [c["name"] for c in tied], "unsettled": unsettled, "busy": loaded}
    if unsettled and loaded:
        return base, "undecided", base, detail
    if loaded and winners_by_load(blocks, configs).get("quiet") not in detail["tied"]:
        # Measured under load: more processes win CPU share and fewer threads wait less there, so the
        # quiet machine's ranking can differ; unless quiet rounds agreed, the answer holds for this load.
        return chosen, "under-load", base, detail
    return chosen, "faster", base, detail


def short_of_rounds(measured_by_name, blocks, base):
    """The settings (not the baseline) that came within DROP_SHARE of their round's fastest in some round
    but were measured in fewer than TARGET_ROUNDS rounds: the budget, not the race, left them out."""
    fastest = {}
    for block in blocks:
        fastest[block["round"]] = max(fastest.get(block["round"], 0.0), block["epoch_steps_per_s"])
    short = []
    for name, config in measured_by_name.items():
        mine = [b for b in blocks if b["config"] == name]
        if config is not base and len(mine) < TARGET_ROUNDS and any(
                b["epoch_steps_per_s"] >= DROP_SHARE * fastest[b["round"]] for b in mine):
            short.append(name)
    return short


def settled(configs, blocks, baseline):
    """True when a quiet run's answer cannot change with more rounds worth their time: faster
    settings chosen with nothing unsettled, or nothing that looks faster than the baseline."""
    chosen, verdict, _, detail = choose_paired(configs, blocks, baseline)
    if chosen is None or detail.get("busy") or busy(blocks):
        return False
    return verdict == "baseline" or (verdict == "faster" and not detail.get("unsettled"))


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
