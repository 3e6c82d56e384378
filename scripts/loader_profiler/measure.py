"""Measuring one loader in one rank process: time to the first batch, throughput in timed windows
after a warm-up, the start-up of a later epoch, and the peak memory of the process and its workers."""

import contextlib
import statistics
import threading
import time

REPEATS = 5          # timed windows per configuration: the median and spread come from these
WARMUP_SHARE = 0.1   # of the time left after the first batch
RSS_PERIOD_S = 0.1


class PeakRss(object):
    """Samples the RSS of this process plus its workers; shared pages count once per process,
    so the peak is an upper bound on what the loader holds.

    The workers' pids come from the loader's iterator: asking psutil for children would scan
    every process on the machine at each sample, which slows the loop being measured."""

    def __init__(self, worker_pids):
        import psutil
        self.process = psutil.Process()
        self.worker_pids = worker_pids
        self.workers = {}
        self.peak = 0
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def sample(self):
        import psutil
        total = self.process.memory_info().rss
        for pid in self.worker_pids():
            try:
                worker = self.workers.get(pid) or self.workers.setdefault(pid, psutil.Process(pid))
                total += worker.memory_info().rss
            except psutil.Error:  # a worker that ended meanwhile
                pass
        self.peak = max(self.peak, total)

    def loop(self):
        while not self.stop_event.wait(RSS_PERIOD_S):
            self.sample()

    def __enter__(self):
        self.sample()
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        self.thread.join()
        self.sample()


class Stream(object):
    """Batches from a loader across epoch ends; the start of a new epoch is timed apart."""

    def __init__(self, loader, link):
        from .graph import seeds_in
        self.loader, self.link, self.seeds_in = loader, link, seeds_in
        self.iterator = None
        self.batch = None  # the last batch, for the training step
        self.restarts = []  # seconds from iter() to the first batch of each later epoch

    def first(self):
        started = time.perf_counter()
        self.iterator = iter(self.loader)
        batch = self.batch = next(self.iterator)
        return time.perf_counter() - started, self.seeds_in(batch, self.link)

    def next(self):
        """-> (seeds, seconds spent starting a new epoch inside this call)."""
        try:
            self.batch = next(self.iterator)
            return self.seeds_in(self.batch, self.link), 0.0
        except StopIteration:
            started = time.perf_counter()
            self.iterator = iter(self.loader)
            batch = self.batch = next(self.iterator)
            restart = time.perf_counter() - started
            self.restarts.append(restart)
            return self.seeds_in(batch, self.link), restart

    def worker_pids(self):
        inner = getattr(self.iterator, "iterator", self.iterator)  # PyG wraps torch's iterator
        return [worker.pid for worker in getattr(inner, "_workers", None) or [] if worker.pid]

    def close(self):
        """End the workers now rather than whenever the garbage collector runs."""
        for iterator in (self.iterator, getattr(self.loader, "_iterator", None)):
            inner = getattr(iterator, "iterator", iterator)  # PyG wraps torch's iterator
            shutdown = getattr(inner, "_shutdown_workers", None)
            if shutdown is not None:
                shutdown()
        self.iterator = None
        if getattr(self.loader, "_iterator", None) is not None:
            self.loader._iterator = None  # a persistent loader would otherwise reuse the ended workers


def measure(loader, settings, seconds, link, cores=None):
    """-> the measured record of one configuration in this rank, within about `seconds`."""
    affinity = loader.enable_cpu_affinity(cores) if cores else contextlib.nullcontext()
    end = time.perf_counter() + seconds
    stream = Stream(loader, link)
    with PeakRss(stream.worker_pids) as rss, affinity:
        try:
            first_batch_s, _ = stream.first()
            # Workers start together, so their first batches arrive in a burst; and a window shorter
            # than the prefetch queue would time batches made before it began.
            least = settings["num_workers"] + 1
            warm_until = time.perf_counter() + max(end - time.perf_counter(), 0) * WARMUP_SHARE
            for _ in range(least):
                stream.next()
            while time.perf_counter() < warm_until:
                stream.next()
            window = max(end - time.perf_counter(), 0) / REPEATS
            rates = []
            while len(rates) < REPEATS and (len(rates) < 2 or time.perf_counter() < end):  # two make a spread
                rates.append(timed_window(stream, window, least, end))
        finally:
            stream.close()
    return summary(rates, first_batch_s, epoch_start(stream, settings, first_batch_s, rates), rss.peak)


def epoch_start(stream, settings, first_batch_s, rates):
    """Seconds from iter(loader) to the first batch of a later epoch: measured where an epoch ended
    within the measurement; else what it must be: a new set of workers starts just as the first
    one did, while persistent workers (or none) deliver the first batch like any other.

    An epoch is never cut short to measure this: persistent workers would first have to finish
    the batches already asked of them, which an epoch that ends by itself never makes them do.
    """
    if stream.restarts:
        return statistics.median(stream.restarts), "measured"
    if settings["num_workers"] and not settings["persistent_workers"]:
        return first_batch_s, "as-first-batch"
    return 1.0 / statistics.median(r[0] for r in rates), "one-batch"


def timed_window(stream, seconds, least, end):
    """(batches/s, seeds/s, batches) over about `seconds` and at least `least` batches unless the
    measurement's `end` comes first (one batch at the very least); epoch starts are left out."""
    batches = seeds = 0
    paused = 0.0
    started = time.perf_counter()
    while batches == 0 or (batches < least and time.perf_counter() < end) or time.perf_counter() - started < seconds:
        count, restart = stream.next()
        batches, seeds, paused = batches + 1, seeds + count, paused + restart
    elapsed = max(time.perf_counter() - started - paused, 1e-9)
    return batches / elapsed, seeds / elapsed, batches


def summary(rates, first_batch_s, restart, peak_rss):
    """Window by window, in time order: ranks' windows are added up index by index."""
    return {"batches_per_s": [r[0] for r in rates], "seeds_per_s": [r[1] for r in rates],
            "batches": sum(r[2] for r in rates), "first_batch_s": first_batch_s, "restart_s": restart[0],
            "restart_source": restart[1], "peak_rss_bytes": peak_rss}


def breakdown(loader, seconds, link):
    """Where a batch's time goes, measured on the default loader (num_workers=0) in this process:
    neighbour sampling, feature fetch (PyG's filter_fn, which also assembles the subgraph), and
    collation (the rest of a loader step: batching seed indices, DataLoader bookkeeping, transforms)."""
    sampler = loader.link_sampler if link else loader.node_sampler
    stages = {"sample_s": [], "fetch_s": [], "step_s": []}
    end = time.perf_counter() + seconds
    index_batches = iter(loader.batch_sampler)
    iterator = iter(loader)
    while time.perf_counter() < end or not stages["step_s"]:
        try:
            index = next(index_batches)
        except StopIteration:
            index_batches = iter(loader.batch_sampler)
            index = next(index_batches)
        t0 = time.perf_counter()
        inputs = loader.input_data[index]
        out = (sampler.sample_from_edges(inputs, neg_sampling=loader.neg_sampling) if link
               else sampler.sample_from_nodes(inputs))
        t1 = time.perf_counter()
        loader.filter_fn(out)
        t2 = time.perf_counter()
        try:
            next(iterator)
        except StopIteration:
            iterator = iter(loader)
            next(iterator)
        t3 = time.perf_counter()
        stages["sample_s"].append(t1 - t0)
        stages["fetch_s"].append(t2 - t1)
        stages["step_s"].append(t3 - t2)
    sample = statistics.median(stages["sample_s"])
    fetch = statistics.median(stages["fetch_s"])
    step = statistics.median(stages["step_s"])
    collate = max(step - sample - fetch, 0.0)  # medians of separate timings: the rest is at least none
    return {"batches": len(stages["step_s"]), "sample_s": sample, "fetch_s": fetch, "collate_s": collate,
            "batch_s": sample + fetch + collate}


def machine_busy_seconds():
    """CPU seconds every process on the machine has used (all cores), from /proc/stat; None elsewhere."""
    import os
    try:
        with open("/proc/stat") as handle:
            fields = handle.readline().split()
    except OSError:
        return None
    # user nice system idle iowait irq softirq steal: idle and iowait are not busy.
    busy = sum(int(v) for i, v in enumerate(fields[1:9]) if i not in (3, 4))
    return busy / float(os.sysconf("SC_CLK_TCK"))


def own_cpu_seconds():
    """CPU seconds of this process and its children that have ended (the workers, once joined)."""
    import os
    times = os.times()
    return times[0] + times[1] + times[2] + times[3]


def loop_block(loader, settings, seconds, link, step, cores=None):
    """One block of the training loop: `for batch in loader: step(batch)` for about `seconds`, from a
    fresh iter(loader) (its workers start, as at an epoch's start), then its workers are ended.

    -> the first batch's time (start-up), the steady steps/s after the prefetch burst, an ordinary
    batch's wait (what the loop waits for the loader at a step that starts no epoch), the CPU this
    process and its workers used and the CPU the whole machine used over the same interval, so the
    coordinator can tell how much other processes took."""
    affinity = loader.enable_cpu_affinity(cores) if cores else contextlib.nullcontext()
    stream = Stream(loader, link)
    run = step or (lambda batch: None)
    machine_before, own_before = machine_busy_seconds(), own_cpu_seconds()
    wall_started = time.perf_counter()
    end = wall_started + seconds
    steps = seeds = 0
    paused = timed = waited = 0.0
    ordinary = 1
    with PeakRss(stream.worker_pids) as rss, affinity:
        try:
            first_batch_s, _ = stream.first()
            run(stream.batch)
            # Workers start together, so their first batches arrive in a burst: skip one a worker.
            # A slow step (a busy machine, a large model) cuts the warm-up short rather than the block long.
            warm_until = wall_started + seconds / 2
            for _ in range(settings["num_workers"] + 1):
                if time.perf_counter() > warm_until:
                    break
                stream.next()
                run(stream.batch)
            started = time.perf_counter()
            restarted = len(stream.restarts)
            while steps < 1 or time.perf_counter() < end:
                asked = time.perf_counter()
                count, restart = stream.next()
                if not restart:
                    waited += time.perf_counter() - asked
                run(stream.batch)
                steps, seeds, paused = steps + 1, seeds + count, paused + restart
            timed = max(time.perf_counter() - started - paused, 1e-9)
            ordinary = max(steps - (len(stream.restarts) - restarted), 1)
        finally:
            stream.close()
    wall = time.perf_counter() - wall_started
    machine_after, own_after = machine_busy_seconds(), own_cpu_seconds()
    return {"first_batch_s": first_batch_s, "steps_per_s": steps / timed, "seeds_per_s": seeds / timed,
            "batch_wait_s": waited / ordinary, "steps": steps, "restarts": list(stream.restarts), "wall_s": wall,
            "own_cpu_s": own_after - own_before,
            "machine_cpu_s": None if machine_before is None else machine_after - machine_before,
            "peak_rss_bytes": rss.peak}
