"""Counts as sbatch, srun and torchrun read them, and the ones they refuse or silently wrap, with what each
says (measured on SLURM 22.05.8 and the tested torch; tests/test_launch_cluster.py submits them). Numbers
are read with a bound on their digits and their size: no huge integer reaches the topology's arithmetic."""

import re

MAX_DIGITS = 18           # longer digit strings are not counts (sbatch: "not a valid node count")
NODES_MAX = 1000000       # more nodes than any cluster has: the job cannot start
TASKS_MAX = 100000000     # more tasks than any cluster runs
PER_NODE_MAX = 65535      # more tasks on one node than any node runs
CPUS_PER_TASK_MAX = 65535  # sbatch 22.05 keeps --cpus-per-task in 16 bits: larger values wrap
GPUS_MAX = 4096
SUFFIX = {"": 1, "k": 1024, "K": 1024, "m": 1 << 20, "M": 1 << 20}
DIGITS = re.compile(r"^[0-9]+$")


def number(text, cap=None):
    """A whole number from digits (bounded: None past MAX_DIGITS or past `cap`), else None."""
    if isinstance(text, bool) or text is None:
        return None
    text = str(text).strip()
    if not DIGITS.match(text) or len(text) > MAX_DIGITS:
        return None
    value = int(text)
    return None if cap is not None and value > cap else value


def node_count(text):
    """sbatch's node count: N, Nk, Nm (times 1024, 1024^2); -> int or None."""
    match = re.match(r"^([0-9]{1,%d})([kKmM]?)$" % MAX_DIGITS, str(text).strip())
    return int(match.group(1)) * SUFFIX[match.group(2)] if match else None


def nodes_range(text):
    """(minimum, maximum or None) of sbatch's --nodes=N or N-M; None when it is no node count."""
    text = str(text).strip()
    low, dash, high = text.partition("-")
    minimum = node_count(low)
    if minimum is None:
        return None
    if not dash:
        return minimum, None
    maximum = node_count(high) if high else -1  # "2-": sbatch reads the maximum as -1
    return (minimum, maximum) if maximum is not None else None


def invalid(option, value, why, says, suggested):
    return {"option": option, "value": str(value)[:80], "why": why, "slurm_says": says, "suggested": suggested}


def check(name, value):
    """A problem with one sbatch/srun count option ({"option", "value", "why", "slurm_says", "suggested"}),
    or None when it is fine or not known (a $VARIABLE the doctor does not resolve here)."""
    if isinstance(value, bool) or value is None or "$" in str(value) or "@" in str(value):
        return None
    text = str(value).strip()
    if name == "nodes":
        return check_nodes(text)
    if name in ("ntasks", "ntasks-per-node", "cpus-per-task"):
        return check_positive(name, text)
    if name in ("gpus-per-node", "gpus-per-task", "gpus"):
        count = text.rpartition(":")[2]
        if not DIGITS.match(count) or len(count) > MAX_DIGITS or int(count) > GPUS_MAX:
            return invalid(name, text, "not a GPU count (a whole number, optionally TYPE:N)",
                           "Invalid generic resource (gres) specification", None)
    return None


def check_positive(name, text):
    negative = re.match(r"^-[0-9]+$", text)
    if not DIGITS.match(text) or negative or (DIGITS.match(text) and int(text[:MAX_DIGITS + 1]) == 0):
        suggested = "1" if name in ("ntasks-per-node", "cpus-per-task") else None
        return invalid(name, text, "not a count of at least 1", 'Invalid numeric value "%s" for --%s.' % (text, name),
                       suggested)
    if len(text) > MAX_DIGITS:
        return invalid(name, text, "a number of %d digits" % len(text),
                       "Numeric argument (9223372036854775807) to big for --%s." % name, None)
    value = int(text)
    if name == "cpus-per-task" and value > CPUS_PER_TASK_MAX:
        return invalid(name, text, "more than %d: sbatch and srun 22.05 keep it modulo 65536 (%d here), and no node "
                       "has that many CPUs" % (CPUS_PER_TASK_MAX, value % 65536), None, None)
    if name == "ntasks" and value > TASKS_MAX:
        return invalid(name, text, "more tasks than any cluster runs (over %d)" % TASKS_MAX, None, None)
    if name == "ntasks-per-node" and value > PER_NODE_MAX:
        return invalid(name, text, "more tasks on one node than any node runs (over %d)" % PER_NODE_MAX, None, None)
    return None


def check_nodes(text):
    bounds = nodes_range(text)
    if bounds is None:
        if len(text) > MAX_DIGITS and DIGITS.match(text):
            return invalid("nodes", text, "a number of %d digits" % len(text), '"%s" is not a valid node count' % text[:40],
                           None)
        return invalid("nodes", text, "not a node count (N or MIN-MAX)", '"%s" is not a valid node count' % text[:40], None)
    minimum, maximum = bounds
    if maximum is not None and maximum < minimum:
        return invalid("nodes", text, "the maximum (%d) is below the minimum (%d)" % (maximum, minimum),
                       "Maximum node count %d is less than minimum node count %d" % (maximum, minimum),
                       "%d-%d" % (maximum, minimum) if maximum > 0 else str(minimum))
    if minimum == 0 or maximum == 0:
        return invalid("nodes", text, "zero nodes", "Batch job submission failed: Node count specification invalid", "1")
    if max(minimum, maximum or 0) >= (1 << 32) - 1:
        return invalid("nodes", text, "2^32 - 1 or more: SLURM keeps node counts in 32 bits (4294967296 becomes 0)",
                       '"%s" is not a valid node count' % text[:40] if minimum == (1 << 32) - 1 else None, None)
    if max(minimum, maximum or 0) > NODES_MAX:
        return invalid("nodes", text, "more nodes than any cluster has (over %d): the job never starts" % NODES_MAX,
                       "Requested node configuration is not available", None)
    return None


def check_torchrun(name, value):
    """torchrun's --nnodes=MIN[:MAX] and --nproc-per-node: what it refuses with an AssertionError."""
    text = str(value).strip()
    if "$" in text or "@" in text:
        return None
    if name == "nnodes":
        low, colon, high = text.partition(":")
        minimum, maximum = parse_signed(low), parse_signed(high) if colon else parse_signed(low)
        if minimum is None or maximum is None:
            return invalid("nnodes", text, "not a node count (N or MIN:MAX)", None, None)
        if minimum <= 0 or minimum > maximum:
            return invalid("nnodes", text, "torchrun needs 0 < MIN <= MAX", "AssertionError: min_nodes must be > 0 and "
                           "<= max_nodes, got min_nodes=%d, max_nodes=%d" % (minimum, maximum),
                           "%d:%d" % (maximum, minimum) if 0 < maximum < minimum else None)
        if maximum > NODES_MAX:
            return invalid("nnodes", text, "more nodes than any cluster has (over %d)" % NODES_MAX, None, None)
        return None
    if text in ("gpu", "cpu", "auto", "xpu"):
        return None
    count = parse_signed(text)
    if count is None or count <= 0:
        return invalid("nproc-per-node", text, "not a count of at least 1 (or gpu, cpu, auto)", "AssertionError",
                       "1" if count is not None else None)
    if count > PER_NODE_MAX:
        return invalid("nproc-per-node", text, "more processes on one node than any node runs (over %d)" % PER_NODE_MAX,
                       None, None)
    return None


def parse_signed(text):
    match = re.match(r"^(-?)([0-9]{1,%d})$" % MAX_DIGITS, text.strip())
    if not match:
        return None
    return -int(match.group(2)) if match.group(1) else int(match.group(2))
