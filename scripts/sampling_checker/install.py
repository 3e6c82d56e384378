"""Install commands: PyG's wheel table read for one torch/CUDA/platform, and every pip line a fix prints."""

import sys

from diagnostics_core.command import Raw, line
from diagnostics_core.wheels import (SAMPLING_DISTS, SOURCE_BUILD_NEEDS, SOURCE_BUILD_PACKAGES, TORCH_PIN,
                                     TORCH_PIN_NEEDS_PYTHON, WHEEL_INDEX, WHEEL_INDEX_CHECKED, WHEEL_INDEX_SOURCE,
                                     WHEEL_PLATFORMS, WHEEL_TABLE_DATE,
                                     TORCH_INDEX, newest_torch_with_wheels, parse_version, pip_command, pip_name,
                                     platform_key, source_build_command, source_build_time, torch_install_command,
                                     wheel_command, wheel_status)
from .parsing import cuda_variant


def install_facts(facts, python):
    build = facts.get("torch_build") or {}
    torch_version = (facts.get("torch") or {}).get("version") or build.get("version")
    if not torch_version:
        return {"index_url": None, "command": None, "wheels_available": None,
                "support_table_date": WHEEL_TABLE_DATE}
    major, minor, _ = parse_version(torch_version)
    torch_minor = "%d.%d" % (major, minor)
    cuda = (facts.get("torch") or {}).get("cuda") if facts.get("torch", {}).get("status") == "ok" else build.get("cuda")
    hip = build.get("hip")
    variant = "rocm" if hip else cuda_variant(cuda)
    python_facts = facts.get("python") or {}
    platform_name = platform_key(python_facts)
    if platform_name.startswith("darwin"):
        variant = "cpu"  # PyG's macOS wheels are CPU-only
    python_version = parse_version(python_facts.get("version"))
    index_url = WHEEL_INDEX.format(torch="%s.0" % torch_minor, variant=variant)
    packages = {dist: wheel_status(dist, torch_minor, variant, platform_name, python_version)
                for dist in WHEEL_PLATFORMS}
    with_wheels = [d for d in SAMPLING_DISTS if packages[d]["wheel"]]
    missing = [d for d in SAMPLING_DISTS if packages[d]["wheel"] is False]
    py, uv = python, uses_uv(facts)
    pin_minor, pin_release = newest_torch_with_wheels(variant, platform_name, python_version)
    pin = None
    if pin_minor and variant != "rocm" and pin_minor != torch_minor:
        pin = {"torch_minor": pin_minor, "release": pin_release,
               "command": "%s && %s" % (
                   torch_install_command(pin_release, variant, py, platform_name, uv),
                   # --force-reinstall: an installed local build of the same version would satisfy pip.
                   wheel_command(py, SAMPLING_DISTS, WHEEL_INDEX.format(torch=pin_minor + ".0", variant=variant),
                                 reinstall=True, uv=uv))}
    return {
        "torch_minor": torch_minor,
        "variant": variant,
        "platform": platform_name,
        "index_url": index_url,
        # Only the extensions the table says have a wheel here: one missing wheel would fail the whole line.
        "command": wheel_command(py, with_wheels, index_url, uv=uv) if with_wheels else None,
        # What that line prints where data.pyg.org cannot be reached: these wheels are on no other index.
        "error_without_index": "ERROR: No matching distribution found for %s" % pip_name(with_wheels[0])
        if with_wheels else None,
        "packages": packages,
        # True: every sampling extension has a wheel; False: one has none; None: unknown.
        "wheels_available": False if missing else (len(with_wheels) == len(SAMPLING_DISTS) or None),
        "no_wheel_reasons": [packages[d]["reason"] for d in SAMPLING_DISTS if packages[d]["wheel"] is not True],
        "support_table_date": WHEEL_TABLE_DATE,
        "torch_pin": pin,
        "source_build_command": build_command(facts, py, ("torch-scatter", "torch-sparse")),
        "source_build_needs": SOURCE_BUILD_NEEDS,
        "source_build_time": source_build_time(("torch-scatter", "torch-sparse")),
    }


def pyg_lib_index(facts):
    """Where a fix for a missing pyg-lib installs from, and which parts of that were verified here and which
    are cited (nothing is fetched: the checker opens no socket)."""
    install = facts.get("install") or {}
    row = (install.get("packages") or {}).get("pyg-lib") or {}
    return {"url": install.get("index_url"), "pattern": WHEEL_INDEX, "pattern_source": WHEEL_INDEX_SOURCE,
            "pattern_checked": WHEEL_INDEX_CHECKED,
            "verified_here": "torch %s and variant %s, read from the probed interpreter's torch (torch/version.py, "
                             "torch.version.cuda), put into the pattern" % (install.get("torch_minor"),
                                                                          install.get("variant")),
            "cited": "that the URL serves a pyg_lib wheel for this torch, variant and platform: %s (%s); the "
                     "pattern itself: %s (checked %s)" % (row.get("source"), row.get("source_date"),
                                                          WHEEL_INDEX_SOURCE, WHEEL_INDEX_CHECKED)}


def pip_fix(facts, packages, reinstall=False):
    """install_line as a whole fix."""
    return with_pip(facts, install_line(facts, packages, reinstall))


def install_line(facts, packages, reinstall=False):
    """The install line for this torch build, naming only extensions that have a wheel here;
    for the others, the way out (a source build, or a torch that has the wheels)."""
    install = facts["install"]
    if not install.get("index_url"):
        return None
    py = interpreter(facts)
    dists = [name.replace("_", "-") for name in packages]
    others = [d for d in dists if d not in install["packages"]]  # not PyG extensions: plain PyPI packages
    dists = [d for d in dists if d not in others]
    wheels = [d for d in dists if install["packages"][d]["wheel"]]
    lacking = [d for d in dists if d not in wheels]
    parts = [pip(facts, ["install"] + others)] if others else []
    if wheels:
        parts.append(wheel_command(py, wheels, install["index_url"], reinstall, uses_uv(facts)))
    notes = []
    legacy = [d for d in lacking if d in ("torch-cluster", "torch-spline-conv")]
    if legacy:
        parts.append(pip(facts, ["uninstall", "-y"] + legacy))
        notes.append("%s: no wheel for torch %s+%s and PyG 2.8 ignores them (pyg-lib >= 0.6 has their ops)" % (
            ", ".join(legacy), install["torch_minor"], install["variant"]))
    buildable = [d for d in lacking if d in ("torch-scatter", "torch-sparse")]
    if buildable:
        if "torch-sparse" in buildable and facts["extensions"].get("torch_scatter", {}).get("status") != "ok":
            buildable.append("torch-scatter")  # torch_sparse imports it
        parts.append(build_command(facts, py, buildable))
        notes.append("%s: no wheel for torch %s+%s, so build from PyPI's source (%s; needs %s)" % (
            ", ".join(d for d in lacking if d in buildable), install["torch_minor"], install["variant"],
            source_build_time(set(buildable)), SOURCE_BUILD_NEEDS))
    if "pyg-lib" in lacking:
        pin = install.get("torch_pin")
        # A comment holds the tool's words only (a path there would end it at a newline): the pinned torch's
        # line is a fact (install.torch_pin.command) and no-prebuilt-wheels prints it.
        notes.append("pyg-lib: %s%s" % (install["packages"]["pyg-lib"]["reason"],
                                         "; or use torch %s, which has all wheels (install.torch_pin.command in "
                                         "--full)" % pin["release"] if pin else ""))
        if not buildable:
            parts.append(build_command(facts, py, SOURCE_BUILD_PACKAGES["pyg_lib"]))
            notes.append("that build: %s; needs %s" % (source_build_time(SOURCE_BUILD_PACKAGES["pyg_lib"]),
                                                        SOURCE_BUILD_NEEDS))
            notes.append("torch-sparse (built above) samples neighbours instead; pyg-lib has no sdist on PyPI")
    return " && ".join(parts) + ("  # " + "; ".join(notes) if notes else "")


def missing_build_prerequisites(facts, dists):
    """(pip packages, Debian packages) that a --no-build-isolation source build of `dists` lacks here."""
    seen = (facts.get("python") or {}).get("build_prerequisites")
    if not seen:
        return [], []
    pip, system = [], []
    setuptools = seen.get("setuptools")
    if not setuptools:
        pip.append("setuptools")  # a current one: it has bdist_wheel itself
    elif parse_version(setuptools)[:2] < (70, 1) and not seen.get("wheel"):
        pip.append("wheel")  # else: error: invalid command 'bdist_wheel'
    if "torch-sparse" in dists and not seen.get("scipy"):
        pip.append("scipy")
    if not seen.get("compiler"):
        system.append("g++")
    if not seen.get("python_headers"):
        system.append("python3-dev")
    return pip, system


def build_command(facts, py, dists):
    """The source build, after installing what it needs and this environment lacks."""
    needed, system = missing_build_prerequisites(facts, dists)
    uv = uses_uv(facts)
    parts = [line("apt-get", "install", "-y", system)] if system else []  # Debian/Ubuntu, as root
    if needed:
        parts.append(pip_command(py, ["install"] + needed, uv))
    return " && ".join(parts + [source_build_command(py, dists, uv)])


def installer(facts):
    """How the probed interpreter installs: "pip" (its own); "uv" for a venv uv made without pip
    (`uv pip --python X`); "ensurepip" for another venv without pip (pip bootstrapped first)."""
    python = facts.get("python") or {}
    if python.get("pip") is not False:
        return "pip"
    return "uv" if "uv" in (python.get("venv_tool"), python.get("ephemeral")) else "ensurepip"


def uses_uv(facts):
    return installer(facts) == "uv"


def pip(facts, words):
    """One pip command for the probed interpreter (`pip(facts, ["install", "x"])`); fixes wrap it in with_pip."""
    return pip_command(interpreter(facts), words, uses_uv(facts))


def with_pip(facts, fix):
    """A fix that runs the probed interpreter's pip: where that venv has none (and uv does not stand in),
    ensurepip bootstraps it first, once, at the front of the whole fix."""
    if fix and installer(facts) == "ensurepip":
        return "%s && %s" % (line(interpreter(facts), "-m", "ensurepip", "--upgrade"), fix)
    return fix


def interpreter(facts):
    """The probed interpreter (--python), also in static-only runs: its path as it is, a word of a fix."""
    return ((facts.get("probe") or {}).get("interpreter") or (facts.get("python") or {}).get("executable")
            or sys.executable)


# Step outcomes that mean the import itself failed. "deadline" and "not-run"
# mean the probe ran out of time first; probe-deadline reports those.
FAILED_STEP_STATUSES = ("error", "crashed", "hung")


def torch_reinstall_command(facts):
    """Reinstall the same torch build: a local tag (+cpu, +cu126) names PyTorch's own index."""
    build = facts["torch_build"]
    version = (build.get("version") or "").split("+")[0]
    words = ["install", "--force-reinstall", "torch==" + version]
    variant = build.get("variant")
    if "+" in (build.get("version") or "") and variant and variant != "rocm":
        words += ["--index-url", TORCH_INDEX.format(variant=variant)]
    return with_pip(facts, pip(facts, words))


def gpu_seen(facts):
    """True/False from NVML when the probe asked it, None when nothing asked (static-only)."""
    nvml = (facts.get("cuda") or {}).get("nvml")
    if not nvml:
        return None
    return bool(nvml.get("available") and nvml.get("devices"))


def torch_and_pyg_install_command(facts):
    """Install torch (pinned) and PyG; the CPU-only build unless a GPU was seen."""
    python = interpreter(facts)
    platform_name = platform_key(facts["python"])
    lasting = Raw(VENV + "/bin/python")  # the tool's own path: ~ expands where the fix runs
    lasting_install = "%s && %s" % (torch_install_command(TORCH_PIN, "cpu", lasting, platform_name),
                                    pip_command(lasting, ["install", "torch_geometric"]))
    if facts["python"].get("ephemeral"):
        # Installing into a throwaway env helps no later run (interpreter-ephemeral says why).
        return ("not into this throwaway %s env: make a lasting one: python3 -m venv %s && %s"
                % (facts["python"]["ephemeral"], VENV, lasting_install))
    if parse_version(facts["python"]["version"])[:2] < TORCH_PIN_NEEDS_PYTHON:
        return ("torch %s and PyG 2.8 need Python %d.%d+; make a venv with a newer Python: "
                "python3.11 -m venv %s && %s"
                % ((TORCH_PIN,) + TORCH_PIN_NEEDS_PYTHON + (VENV, lasting_install,)))
    venv, notes, into_probed = "", [], True
    if not in_environment(facts):
        # A base interpreter: Debian's refuses pip (externally-managed-environment), and an install
        # there would mix with the system's packages. A venv first, then the same lines into it.
        venv, python, into_probed = line(python, "-m", "venv", Raw(VENV)) + " && ", lasting, False
        notes.append("this Python is no venv, so the line makes one (Debian/Ubuntu: apt-get install python3-venv "
                     "if -m venv fails)")
    uv = into_probed and uses_uv(facts)  # the new venv has pip
    seen = gpu_seen(facts)
    if seen:  # PyPI's default Linux build is a CUDA one
        command = pip_command(python, ["install", "torch==" + TORCH_PIN], uv)
    else:
        command = torch_install_command(TORCH_PIN, "cpu", python, platform_key(facts["python"]), uv)
    command = venv + command + " && " + pip_command(python, ["install", "torch_geometric"], uv)
    if seen is None:
        notes.append("CPU-only torch: nothing asked for GPUs here; drop +cpu and --index-url for the CUDA build")
    elif not seen:
        notes.append("CPU-only torch: no GPU seen (NVML); drop +cpu and --index-url for the CUDA build")
    fix = command + ("  # " + "; ".join(notes) if notes else "")
    return with_pip(facts, fix) if into_probed else fix


# The one venv path every fix and README command uses.
VENV = "~/.venvs/scalable-distributed"


def in_environment(facts):
    """A venv or a conda env (its own prefix), as opposed to a base or system Python."""
    return bool(facts["python"].get("in_virtualenv") or (facts.get("distributions") or {}).get("conda_prefix"))
