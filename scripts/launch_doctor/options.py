"""The options of sbatch/srun, torchrun and mpirun that decide a launch's shape, read from words.
An option this table does not know is kept in `unknown` (a long one without "=" is taken as a flag)."""

SLURM_SHORT = {"-N": "nodes", "-n": "ntasks", "-c": "cpus-per-task", "-G": "gpus", "-w": "nodelist",
               "-o": "output", "-e": "error", "-J": "job-name", "-p": "partition", "-t": "time",
               "-A": "account", "-q": "qos", "-m": "distribution", "-D": "chdir", "-C": "constraint",
               "-x": "exclude", "-d": "dependency", "-a": "array", "-i": "input", "-L": "licenses",
               "-M": "clusters", "-r": "relative", "-B": "extra-node-info", "-W": "wait-seconds",
               "-F": "nodefile", "-S": "core-spec"}
SLURM_SHORT_FLAGS = {"-l": "label", "-u": "unbuffered", "-v": "verbose", "-Q": "quiet", "-K": "kill-on-bad-exit",
                     "-s": "oversubscribe", "-O": "overcommit", "-h": "help", "-k": "no-kill", "-X": "disable-status",
                     "-Z": "no-allocate", "-E": "preserve-env", "-H": "hold", "-I": "immediate",
                     "-V": "version"}
SLURM_VALUES = set(SLURM_SHORT.values()) | {
    "ntasks-per-node", "gpus-per-node", "gpus-per-task", "gres", "mem", "mem-per-cpu", "mem-per-gpu",
    "cpu-bind", "mpi", "export", "cpus-per-gpu", "ntasks-per-socket", "ntasks-per-core", "ntasks-per-gpu",
    "threads-per-core", "hint", "het-group", "signal", "reservation", "network", "wckey", "comment",
    "open-mode", "mail-type", "mail-user", "begin", "deadline", "switches", "tmp", "cores-per-socket",
    "sockets-per-node", "gres-flags", "container", "mem-bind", "cpu-freq", "export-file", "gpu-bind",
    "gpu-freq", "nice", "priority", "profile", "uid", "gid", "task-epilog", "task-prolog", "prolog",
    "epilog", "tres-per-task", "tres-bind", "time-min", "cluster-constraint", "bcast", "compress",
    "accel-bind", "mcs-label", "thread-spec", "power", "resv-ports", "wait-seconds", "nodefile"}
OPTIONAL_VALUE = {"exclusive", "kill-on-bad-exit", "propagate", "bcast", "compress", "get-user-env"}

TORCHRUN_VALUES = {"nnodes", "nproc-per-node", "rdzv-backend", "rdzv-endpoint", "rdzv-id", "rdzv-conf",
                   "master-addr", "master-port", "node-rank", "max-restarts", "monitor-interval", "start-method",
                   "role", "log-dir", "redirects", "tee", "local-addr", "logs-specs", "local-ranks-filter",
                   "event-log-handler", "numa-binding", "signals-to-handle", "duplicate-stdout-filters",
                   "duplicate-stderr-filters", "log-line-prefix-template"}
TORCHRUN_SHORT = {"-r": "redirects", "-t": "tee"}
TORCHRUN_FLAGS = {"standalone", "no-python", "module", "run-path", "use-env", "virtual-local-rank"}
TORCHRUN_SHORT_FLAGS = {"-m": "module"}

MPIRUN_VALUES = {"-np": "np", "-n": "np", "--np": "np", "-c": "np", "-npernode": "npernode",
                 "--npernode": "npernode", "-N": "npernode", "-ppn": "npernode", "-perhost": "npernode",
                 "--map-by": "map-by", "-map-by": "map-by", "-H": "host", "--host": "host", "-host": "host",
                 "--hostfile": "hostfile", "-hostfile": "hostfile", "-machinefile": "hostfile", "-x": "export",
                 "--bind-to": "bind-to", "-bind-to": "bind-to", "--rank-by": "rank-by", "-genv": "genv2",
                 "--mca": "mca2", "-mca": "mca2", "--prefix": "prefix", "-wdir": "wdir", "--wdir": "wdir"}


class OptionWords(object):
    """A launcher's words read as options, one at a time: iterate for each word before the program,
    take() for an option's value. `--` ends the options where the launcher says so (sbatch/srun,
    torchrun); `break` at the program leaves it first in rest()."""

    def __init__(self, words, double_dash_ends=True):
        self.words, self.index, self.double_dash_ends = list(words), 0, double_dash_ends
        self.options, self.unknown = {}, []

    def __iter__(self):
        while self.index < len(self.words):
            word = self.words[self.index]
            if word == "--" and self.double_dash_ends:
                self.index += 1
                return
            yield word
            self.index += 1

    def take(self):
        """The next word, as the value of the option just read ("" when the words end)."""
        self.index += 1
        return self.words[self.index] if self.index < len(self.words) else ""

    def result(self):
        """-> (options, the words after the options, unknown options)."""
        return self.options, self.words[self.index:], self.unknown


def slurm_options(words, stop_at_program=True):
    """-> (options {long name: value or True}, the words after the options, unknown options).
    sbatch and srun take the same spellings; srun stops at the first word that is no option."""
    walk = OptionWords(words)
    for word in walk:
        if word.startswith("--"):
            name, has_value, value = word[2:].partition("=")
            if name in SLURM_VALUES and not has_value:
                value = walk.take()
            elif name not in SLURM_VALUES and name not in OPTIONAL_VALUE and not has_value:
                value = True
                if not known_slurm_flag(name):
                    walk.unknown.append(word)
            walk.options[name] = value
        elif word.startswith("-") and len(word) >= 2 and word != "-":
            short = word[:2]
            if short in SLURM_SHORT:
                walk.options[SLURM_SHORT[short]] = (word[2:] or walk.take()).lstrip("=")
            elif short in SLURM_SHORT_FLAGS:
                walk.options[SLURM_SHORT_FLAGS[short]] = True
            else:
                walk.unknown.append(word)
        elif stop_at_program:
            break
        else:
            walk.unknown.append(word)
    return walk.result()


KNOWN_FLAGS = {"exclusive", "exact", "overlap", "overcommit", "label", "unbuffered", "verbose", "quiet",
               "requeue", "no-requeue", "hold", "wait", "contiguous", "spread-job", "test-only", "no-kill",
               "pty", "oversubscribe", "use-min-nodes", "whole", "external-launcher", "disable-status",
               "no-allocate", "preserve-env", "immediate", "parsable", "ignore-pbs", "multi-prog",
               "kill-on-bad-exit", "help", "usage", "version", "quit-on-interrupt", "reboot", "send-libs",
               "get-user-env", "propagate", "mpi-list", "nodefile", "x11", "acctg-freq", "batch"}


def known_slurm_flag(name):
    return name in KNOWN_FLAGS


def torchrun_options(words):
    """-> (options with '_' spelled '-', the program and its arguments, unknown options)."""
    walk = OptionWords(words)
    for word in walk:
        if word.startswith("--"):
            name, has_value, value = word[2:].partition("=")
            name = name.replace("_", "-")
            if name == "nproc-per-node" or name in TORCHRUN_VALUES:
                walk.options[name] = value if has_value else walk.take()
            elif name in TORCHRUN_FLAGS:
                walk.options[name] = True
            else:
                walk.unknown.append(word)
                walk.options[name] = value if has_value else True
        elif word in TORCHRUN_SHORT:
            walk.options[TORCHRUN_SHORT[word]] = walk.take()
        elif word in TORCHRUN_SHORT_FLAGS:
            walk.options[TORCHRUN_SHORT_FLAGS[word]] = True
        elif word.startswith("-") and len(word) > 1:
            walk.unknown.append(word)
        else:
            break
    return walk.result()


def mpirun_options(words):
    walk = OptionWords(words, double_dash_ends=False)
    for word in walk:
        name, has_value, value = word.partition("=")
        if name in MPIRUN_VALUES:
            key = MPIRUN_VALUES[name]
            if key.endswith("2"):  # -genv NAME VALUE, --mca KEY VALUE: two words, not read
                walk.take()
                walk.take()
            else:
                walk.options[key] = value if has_value else walk.take()
        elif word.startswith("-"):
            walk.unknown.append(word)
        else:
            break
    return walk.result()
