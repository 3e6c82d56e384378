"""The coordinator: the sandboxed child of the tool. It reads the host (cores, NUMA nodes, memory,
shared memory), starts one rank process per --ranks-per-node, walks the plan within the budget and
publishes every measured configuration as soon as it has it.

The ranks are forked before this process runs any parallel torch operation: a fork taken after
OpenMP has started its threads leaves the child's OpenMP unusable, and the ranks need theirs.
"""

import json
import os
import statistics
import sys
import time

from . import plan

ANSWER_GRACE_S = 3.0  # how long past its slice a rank may take to answer before it counts as hung


def child_main(options_text):
    from diagnostics_core.sandbox import CallReporter, quiet_child_process
    quiet_child_process()
    reporter = CallReporter()
    options = json.loads(options_text)
    reporter.begin("import torch, torch_geometric", max(options["until"]["child"] - time.time(), 1.0))
    import torch  # noqa: F401
    import torch_geometric.typing
    reporter.end()
    host = host_facts()
    reporter.publish("host", host)
    backend = {"pyg_lib": bool(torch_geometric.typing.WITH_PYG_LIB),
               "torch_sparse": bool(torch_geometric.typing.WITH_TORCH_SPARSE)}
    reporter.publish("backend", backend)
    # Without a backend the graph is still loaded: a file or store that fails is the first thing to fix.
    Coordinator(options, host, reporter, measure=backend["pyg_lib"] or backend["torch_sparse"]).run()
    reporter.done()
    sys.stderr.flush()
    os._exit(0)  # a rank blocked in C may still hold a thread; do not wait for it


def host_facts():
    import psutil
    import torch
    from torch_geometric.loader.mixin import get_numa_nodes_cores  # what enable_cpu_affinity reads
    allowed = sorted(psutil.Process().cpu_affinity())
    numa = get_numa_nodes_cores()
    memory = psutil.virtual_memory()
    try:
        shm = psutil.disk_usage("/dev/shm")
        shm = {"total_bytes": shm.total, "free_bytes": shm.free}
    except OSError:
        shm = None
    return {"logical_cores": psutil.cpu_count(logical=True), "physical_cores": psutil.cpu_count(logical=False),
            "allowed_cores": allowed, "numa_nodes": len(numa) or 1,
            "numa_cores": {str(node): [cpus for _, cpus in cores] for node, cores in numa.items()},
            "memory_total_bytes": memory.total, "memory_available_bytes": memory.available, "shm": shm,
            "torch_threads_default": torch.get_num_threads(), "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            "cuda": bool(torch.cuda.is_available()), "start_method": "fork",
            "cgroup_cpu_quota_cores": cgroup_quota_cores(), "usable_cores": usable_cores(allowed)}


def cgroup_quota_cores():
    """The CPU quota of this process's cgroup in cores (cgroup v2 cpu.max, else v1 cfs), None if unlimited."""
    for path, parse in (("/sys/fs/cgroup/cpu.max", lambda t: t.split()),
                        ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", None)):
        try:
            with open(path) as handle:
                text = handle.read().strip()
            if parse is not None:
                quota, period = parse(text)[:2]
            else:
                with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us") as handle:
                    quota, period = text, handle.read().strip()
            if quota in ("max", "-1"):
                return None
            return round(int(quota) / float(int(period)), 2)
        except (OSError, ValueError):
            continue
    return None


def usable_cores(allowed):
    """The cores this process may run on at once: its affinity mask, capped by the cgroup quota."""
    import math
    quota = cgroup_quota_cores()
    return max(1, min(len(allowed), int(math.ceil(quota)) if quota else len(allowed)))


class Coordinator(object):
    def __init__(self, options, host, reporter, measure=True):
        self.options, self.host, self.reporter, self.measure_at_all = options, host, reporter, measure
        self.ranks = options["ranks"]
        self.per_rank = max(1, host.get("usable_cores", len(host["allowed_cores"])) // self.ranks)
        self.deadline = options["until"]["measure"]  # no block starts after it (cli.STAGES)
        self.processes, self.connections = [], []
        self.stopped = None  # why measuring stopped early, if it did
        self.configs = []
        self.epochs = options["spec"].get("epochs") or plan.DEFAULT_EPOCHS

    def say(self, text):
        self.reporter.send({"event": "progress", "line": text})

    def run(self):
        try:
            if self.start_ranks() and self.measure_at_all:
                self.walk_rounds()
        finally:
            self.end_ranks()

    def start_ranks(self):
        import multiprocessing
        from .rank import rank_main
        context = multiprocessing.get_context("fork")
        self.barrier = barrier = context.Barrier(self.ranks)
        spec = self.options["spec"]
        for rank in range(self.ranks):
            mine, theirs = context.Pipe()
            # Not daemonic: a rank starts DataLoader workers. It dies with this process (PDEATHSIG) and
            # end_ranks ends it and everything below it.
            process = context.Process(target=rank_main, args=(rank, theirs, barrier, spec, [self.reporter.fd]))
            process.start()
            theirs.close()
            self.processes.append(process)
            self.connections.append(mine)
        self.say("loading the graph in %d rank process%s" % (self.ranks, "" if self.ranks == 1 else "es"))
        # A slow load is not a hang: only the budget ends it.
        answers = self.answers("load the graph", max(self.deadline - time.time(), 0.1), float("inf"), "ready")
        if answers is None:
            return False
        first = answers[0]
        self.default_threads = first["default_threads"]
        self.batches_per_epoch = first["batches_per_epoch"]
        self.seeds = first["seeds"]
        self.reporter.publish("graph", dict(first["graph"], seeds=first["seeds"],
                                            batches_per_epoch=first["batches_per_epoch"]))
        return True

    def answers(self, what, report_bound_s, until, status):
        """Every rank's answer to a setup step announced as `what`, or None when one did not come (see
        collect) or one is not `status` (the first such is published as the input problem)."""
        self.reporter.begin(what, report_bound_s)
        answers = self.collect(until, what)
        self.reporter.end()
        if answers is None:
            return None
        problems = [a for a in answers if a["status"] != status]
        if problems:
            self.reporter.publish("input_problem", problems[0])
            return None
        return answers

    def collect(self, bound, what, ranks=None):
        """Each asked rank's answer, or None after publishing why one did not come: it died, it took
        longer than its own bound (hung), or the budget ran out first (out-of-time)."""
        answers = []
        last_moment = self.options["until"]["ranks"]  # then the ranks must be ended (cli.STAGES)
        for rank in (ranks if ranks is not None else range(self.ranks)):
            connection, process = self.connections[rank], self.processes[rank]
            while not connection.poll(0.05):
                if not process.is_alive():
                    return self.stop("crashed", what, rank, process.exitcode)
                if time.time() > bound:
                    return self.stop("hung", what, rank, None)
                if time.time() > last_moment:
                    return self.stop("out-of-time", what, rank, None)
            try:
                answers.append(connection.recv())
            except (EOFError, OSError):
                process.join(1.0)
                return self.stop("crashed", what, rank, process.exitcode)
        return answers

    def stop(self, how, what, rank, exitcode):
        import signal
        signal_name = None
        if exitcode is not None and exitcode < 0:
            try:
                signal_name = signal.Signals(-exitcode).name
            except ValueError:
                signal_name = "signal %d" % -exitcode
        self.stopped = {"how": how, "during": what, "rank": rank, "exitcode": exitcode, "signal": signal_name}
        self.reporter.publish("stopped", self.stopped)
        return None

    def end_ranks(self):
        for connection in self.connections:
            try:
                connection.send({"command": "stop"})
            except (OSError, ValueError):
                pass
        until = time.time() + 1.0
        for process in self.processes:
            process.join(max(until - time.time(), 0))
        from diagnostics_core.sandbox import end_descendants
        end_descendants()  # a rank that did not stop, and any worker it left

    def walk_rounds(self):
        """Every candidate still in the race once per round, in short blocks, forward then reversed, so
        that each one's block is paired with the others' under the load of the same round. After each
        round the configurations more rounds cannot make the answer leave (plan.raced_out), so the
        close ones get the time; a quiet run whose answer is settled stops early."""
        default = plan.default_settings(self.default_threads)
        current = plan.current_settings(self.options.get("current"), default)
        if not self.prepare_step():  # a step that fails is the first thing to fix: nothing else is timed
            return
        self.breakdown()
        queue = plan.candidates(default, current, self.per_rank, self.options.get("max_workers"))
        baseline = queue[0][0]
        self.reporter.publish("plan", {"baseline": baseline, "candidates": [name for name, _ in queue],
                                       "cores_per_rank": self.per_rank, "target_rounds": plan.TARGET_ROUNDS,
                                       "planned_rounds": plan.PLANNED_ROUNDS, "epochs": self.epochs})
        blocks, failed, overhead, round_index, out = [], {}, 0.15, 0, set()
        while self.stopped is None and round_index < plan.MAX_ROUNDS:
            active = [(name, settings) for name, settings in queue if name not in failed and name not in out]
            left = self.deadline - time.time()
            seconds = plan.block_seconds(left, len(active) * (plan.PLANNED_ROUNDS - round_index), overhead)
            if seconds is None and round_index < plan.MIN_ROUNDS:  # a short budget: two rounds still pair
                # (the first round leaves half a round to spare: its blocks' overhead is still a guess)
                spare = len(active) // 2 if round_index == 0 else 0
                seconds = plan.block_seconds(left, len(active) * (plan.MIN_ROUNDS - round_index) + spare, overhead)
            if seconds is None and round_index < plan.MIN_ROUNDS:  # shorter still: fewer candidates
                fits = int(left // ((plan.MIN_ROUNDS - round_index) * (plan.MIN_BLOCK_S + overhead)))
                if fits >= 2:
                    kept = self.first_to_keep(active, blocks, baseline, fits, round_index)
                    # Not measured, or measured once (no pair): budget-short names the ones never measured.
                    out |= {name for name, _ in active if name not in kept}
                    active = [(name, settings) for name, settings in active if name in kept]
                    seconds = plan.MIN_BLOCK_S
            if seconds is None or not active:
                break
            seconds = min(seconds, plan.MAX_BLOCK_S)
            spent = []
            for name, settings in plan.round_order(active, baseline, round_index):
                if self.deadline - time.time() < seconds + overhead:
                    break
                started = time.time()
                block = self.block(name, settings, seconds, round_index)
                spent.append(time.time() - started - seconds)
                if block is None:
                    break
                if block.get("status") == "failed":
                    failed[name] = block
                else:
                    blocks.append(block)
            overhead = max(statistics.mean(spent), 0.05) if spent else overhead
            round_index += 1
            if round_index == 1:
                queue += self.fallbacks(queue, failed, blocks)
            leaving = plan.raced_out(blocks, [name for name, _ in active], {baseline, "default"}, round_index)
            if leaving - out:
                self.say("after round %d, out of the race: %s" % (round_index, ", ".join(sorted(leaving - out))))
            out |= leaving
            if round_index >= plan.TARGET_ROUNDS and plan.settled(self.records(queue, blocks, failed, baseline),
                                                                  blocks, baseline):
                self.say("settled after round %d on a quiet machine: no more rounds" % round_index)
                break
        for record in self.records(queue, blocks, failed, baseline):
            self.configs.append(record)
            self.reporter.append("configs", record)

    def prepare_step(self):
        """Every rank builds the training step and runs it once, within a bound of its own."""
        seconds = min(max((self.deadline - time.time()) * 0.3, 2.0), 60.0)
        self.say("preparing the training step (%s)" % (self.options["spec"].get("loop") or {}).get("kind"))
        for connection in self.connections:
            connection.send({"command": "step"})
        return self.answers("prepare the training step", seconds + ANSWER_GRACE_S,
                            time.time() + seconds + ANSWER_GRACE_S, "ok") is not None

    def fallbacks(self, queue, failed, blocks):
        """Workers that failed where they fetch (a store client that cannot cross a fork, features too
        large for shared memory) may work when the main process fetches."""
        settings_of = dict(queue)
        if any(settings_of[b["config"]]["num_workers"] for b in blocks):
            return []
        broken = [failed[name]["settings"] for name, _ in queue if name in failed
                  and failed[name]["settings"]["num_workers"] and failed[name]["settings"]["filter_per_worker"]]
        if not broken:
            return []
        base = broken[0]
        return [("%s-filter-in-main" % plan.name_of(base), dict(base, filter_per_worker=False))]

    def block(self, name, settings, seconds, round_index):
        """One block of one configuration in every rank; -> the combined block, a failed record, or None."""
        self.say("round %d: %s for %.1f s" % (round_index + 1, name, seconds))
        for rank, connection in enumerate(self.connections):
            connection.send({"command": "block", "settings": settings, "seconds": seconds})
        # Start-up is not a hang: each worker gets a while to start and to end.
        bound = seconds * 3 + ANSWER_GRACE_S + settings["num_workers"] * 2.0 + 10.0
        self.reporter.begin("measure %s" % name, bound)
        answers = self.collect(time.time() + bound, "measure %s" % name)
        self.reporter.end()
        if answers is None:
            return None
        if any(a["status"] != "ok" for a in answers):
            problem = next(a for a in answers if a["status"] != "ok")
            self.barrier.reset()  # ranks that waited for the failed one broke it; the next block needs it whole
            return {"config": name, "settings": settings, "status": "failed", "error": problem["error"],
                    "traceback": problem.get("traceback")}
        block = dict(plan.combine_block(answers, settings, self.batches_per_epoch, self.epochs), config=name,
                     round=round_index)
        self.reporter.append("blocks", block)
        return block

    @staticmethod
    def first_to_keep(active, blocks, baseline, fits, round_index):
        """The `fits` candidates a short budget keeps: in the first round the first planned (the
        baseline first), in the second the baseline and those fastest in the first."""
        names = [name for name, _ in active]
        if round_index == 0:
            return set(names[:fits])
        rate = {b["config"]: b["epoch_steps_per_s"] for b in blocks if b["round"] == round_index - 1}
        others = sorted((n for n in names if n != baseline and n in rate), key=rate.get, reverse=True)
        return {baseline} | set(others[:fits - 1]) if baseline in names else set(others[:fits])

    def records(self, queue, blocks, failed, baseline):
        """Every planned configuration's record: measured over its rounds, failed, or not measured."""
        seeds_per_batch = float(self.seeds) / max(self.batches_per_epoch, 1)
        records = []
        for name, settings in queue:
            if name in failed:
                record = {"name": name, "settings": settings, "status": "failed", "error": failed[name]["error"],
                          "traceback": failed[name].get("traceback")}
            elif any(b["config"] == name for b in blocks):
                record = plan.config_record(name, settings, blocks, baseline, "default", seeds_per_batch)
            else:
                record = {"name": name, "settings": settings,
                          "status": "skipped" if self.stopped is None else self.stopped["how"]}
            records.append(record)
        return records

    def breakdown(self):
        seconds = min(max((self.deadline - time.time()) * 0.08, 0.5), 3.0)
        self.say("timing sampling, feature fetch and collation on the default loader (%.1f s)" % seconds)
        self.connections[0].send({"command": "breakdown", "seconds": seconds})
        self.reporter.begin("breakdown", seconds + ANSWER_GRACE_S)
        answers = self.collect(time.time() + seconds + ANSWER_GRACE_S, "breakdown", ranks=[0])
        self.reporter.end()
        if answers:
            self.reporter.publish("breakdown", answers[0])
