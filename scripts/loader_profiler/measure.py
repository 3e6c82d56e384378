"""Measuring in one rank process: a block of the training loop (the first batch, the steady steps/s after
the prefetch burst, what an ordinary batch waits, epoch starts, the CPU used by this process and by the
whole machine, the peak memory of the process and its workers), and where a default batch's time goes."""

import statistics
import threading
import time

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


def loop_block(loader, settings, seconds, link, step):
    """One block of the training loop: `for batch in loader: step(batch)` for about `seconds`, from a
    fresh iter(loader) (its workers start, as at an epoch's start), then its workers are ended.

    -> the first batch's time (start-up), the steady steps/s after the prefetch burst, an ordinary
    batch's wait (what the loop waits for the loader at a step that starts no epoch), the CPU this
    process and its workers used and the CPU the whole machine used over the same interval, so the
    coordinator can tell how much other processes took."""
    stream = Stream(loader, link)
    run = step or (lambda batch: None)
    machine_before, own_before = machine_busy_seconds(), own_cpu_seconds()
    wall_started = time.perf_counter()
    end = wall_started + seconds
    steps = seeds = 0
    paused = timed = waited = 0.0
    ordinary = 1
    with PeakRss(stream.worker_pids) as rss:
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
