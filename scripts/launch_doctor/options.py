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
                     "-Z": "no-allocate", "-E": "preserve-env", "-H": "hold", "-I": "immediate"}
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


def slurm_options(words, stop_at_program=True):
    """-> (options {long name: value or True}, the words after the options, unknown options).
    sbatch and srun take the same spellings; srun stops at the first word that is no option."""
    options, unknown, index = {}, [], 0
    while index < len(words):
        word = words[index]
        if word == "--":
            index += 1
            break
        if word.startswith("--"):
            name, has_value, value = word[2:].partition("=")
            if name in SLURM_VALUES and not has_value:
                value, index = (words[index + 1] if index + 1 < len(words) else ""), index + 1
            elif name not in SLURM_VALUES and name not in OPTIONAL_VALUE and not has_value:
                value = True
                if not known_slurm_flag(name):
                    unknown.append(word)
            options[name] = value
        elif word.startswith("-") and len(word) >= 2 and word != "-":
            short = word[:2]
            if short in SLURM_SHORT:
                value = word[2:]
                if not value:
                    value, index = (words[index + 1] if index + 1 < len(words) else ""), index + 1
                options[SLURM_SHORT[short]] = value.lstrip("=")
            elif short in SLURM_SHORT_FLAGS:
                options[SLURM_SHORT_FLAGS[short]] = True
            else:
                unknown.append(word)
        elif stop_at_program:
            break
        else:
            unknown.append(word)
        index += 1
    return options, words[index:], unknown


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
    options, unknown, index = {}, [], 0
    while index < len(words):
        word = words[index]
        if word == "--":
            index += 1
            break
        if word.startswith("--"):
            name, has_value, value = word[2:].partition("=")
            name = name.replace("_", "-")
            if name == "nproc-per-node" or name in TORCHRUN_VALUES:
                if not has_value:
                    value, index = (words[index + 1] if index + 1 < len(words) else ""), index + 1
                options[name] = value
            elif name in TORCHRUN_FLAGS:
                options[name] = True
            else:
                unknown.append(word)
                options[name] = value if has_value else True
        elif word in TORCHRUN_SHORT:
            options[TORCHRUN_SHORT[word]] = words[index + 1] if index + 1 < len(words) else ""
            index += 1
        elif word in TORCHRUN_SHORT_FLAGS:
            options[TORCHRUN_SHORT_FLAGS[word]] = True
        elif word.startswith("-") and len(word) > 1:
            unknown.append(word)
        else:
            break
        index += 1
    return options, words[index:], unknown


def mpirun_options(words):
    options, unknown, index = {}, [], 0
    while index < len(words):
        word = words[index]
        name, has_value, value = word.partition("=")
        if name in MPIRUN_VALUES:
            key = MPIRUN_VALUES[name]
            if key.endswith("2"):
                index += 2
            else:
                if not has_value:
                    value, index = (words[index + 1] if index + 1 < len(words) else ""), index + 1
                options[key] = value
        elif word.startswith("-"):
            unknown.append(word)
        else:
            break
        index += 1
    return options, words[index:], unknown
