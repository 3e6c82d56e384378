"""Small parsers of versions, wheel tags, CPU lists and launch variables."""

import re


def normalise_name(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_local_tag(version):
    """PyG wheel local tag '0.6.18+pt213cu126' -> {'torch': '2.13', 'variant': 'cu126'}."""
    if not version or "+" not in version:
        return None
    local = version.split("+", 1)[1]
    match = re.match(r"^pt(\d)(\d+)(cpu|cu\d+|rocm[\d.]+)$", local)
    if not match:
        return {"raw": local, "torch": None, "variant": None}
    return {"raw": local, "torch": match.group(1) + "." + match.group(2), "variant": match.group(3)}


def cuda_variant(cuda_version):
    """torch.version.cuda '12.6' -> 'cu126'; None -> 'cpu'. Rebuilt from its numbers: the text comes from the
    user's torch/version.py and ends up in index URLs and fixes."""
    if not cuda_version:
        return "cpu"
    major, minor = (re.findall(r"[0-9]+", str(cuda_version)) + ["0", "0"])[:2]
    return "cu%d%d" % (int(major), int(minor))


def compress_cpu_list(cpus):
    """[0, 1, 2, 5] -> '0-2,5' (the notation of taskset and sysfs)."""
    ranges = []
    for cpu in sorted(cpus):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(str(a) if a == b else "%d-%d" % (a, b) for a, b in ranges)


def parse_int_variable(raw):
    try:
        return int(raw.strip()), None
    except ValueError:
        return None, "not an integer"


def parse_slurm_task_counts(raw):
    """SLURM's '4(x2),3' -> [4, 4, 3] (one count per node), or None when malformed."""
    counts = []
    for part in raw.strip().split(","):
        match = re.match(r"^(\d+)(?:\(x(\d+)\))?$", part.strip())
        if not match:
            return None
        counts.extend([int(match.group(1))] * int(match.group(2) or 1))
    return counts or None
