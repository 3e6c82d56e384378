"""PyG's wheel table and the install lines built from it: which compiled extension has a wheel on
PyG's index for which torch minor, CUDA variant and platform, each row with its public source and
date; and the exact pip lines (wheels, a pinned torch, source builds). Shared by the checker, the
cluster compare and `check_sampling_backends.py --wheels`."""

import re

from .command import line


def parse_version(text):
    """'2.13.0+cpu' -> (2, 13, 0); unparsable parts become 0."""
    numbers = []
    for part in re.split(r"[.+]", text or "")[:3]:
        match = re.match(r"\d+", part, re.ASCII)
        numbers.append(int(match.group()) if match else 0)
    while len(numbers) < 3:
        numbers.append(0)
    return tuple(numbers)


# PyG's optional compiled extensions: import name -> distribution name.
# Order matters: torch_sparse imports torch_scatter, so torch_scatter goes
# first and a crash is blamed on the module that really crashed.
EXTENSIONS = (
    ("pyg_lib", "pyg-lib"),
    ("torch_scatter", "torch-scatter"),
    ("torch_sparse", "torch-sparse"),
    ("torch_cluster", "torch-cluster"),
    ("torch_spline_conv", "torch-spline-conv"),
)


EXTENSION_DIST = dict(EXTENSIONS)


# PyG's wheel index (data.pyg.org), per extension: which torch minor x CUDA
# variant has a wheel, with the public source of every row. One row is
# (distribution, torch minor, variants, source, date of the source):
# variants lists the CUDA variants with a wheel; () means a public source says
# there is none; None means no source says either way ("unknown"). The docs'
# install lines are tested against these rows (tests/test_checker_install_truth.py).
WHEEL_TABLE_DATE = "2026-12-01"  # when the rows were last checked against their sources


WHEEL_INDEX = "https://data.pyg.org/whl/torch-{torch}+{variant}.html"


# Where that pattern comes from, and when it was last compared with the source (a fix for a missing pyg-lib
# names both): nothing here fetches the index, so that the URL serves wheels is cited, not tested.
WHEEL_INDEX_SOURCE = ("pyg-team/pyg-lib README and release notes 0.9.0: "
                      "pip install pyg-lib -f https://data.pyg.org/whl/torch-${TORCH}+${CUDA}.html")
WHEEL_INDEX_CHECKED = "2026-12-05"


TORCH_INDEX = "https://download.pytorch.org/whl/{variant}"


_PYG_DOCS = "pyg-team/pytorch_geometric docs/source/install/installation.rst @5c6461b"


_PYG_DOCS_DATE = "2026-08-17"


_PYGLIB_README = "pyg-team/pyg-lib README.md @764e3a4"


_OLD_ROWS = (  # torch minor -> variants, as PyG's installation docs list them for all three
    ("2.8", ("cpu", "cu126", "cu128", "cu129")), ("2.7", ("cpu", "cu118", "cu126", "cu128")),
    ("2.6", ("cpu", "cu118", "cu124", "cu126")), ("2.5", ("cpu", "cu118", "cu121", "cu124")),
    ("2.4", ("cpu", "cu118", "cu121", "cu124")), ("2.3", ("cpu", "cu118", "cu121")),
    ("2.2", ("cpu", "cu118", "cu121")), ("2.1", ("cpu", "cu118", "cu121")), ("2.0", ("cpu", "cu117", "cu118")),
)


_CU132 = ("cpu", "cu126", "cu130", "cu132")


_CU130 = ("cpu", "cu126", "cu128", "cu130")


WHEEL_ROWS = (
    ("pyg-lib", "2.14", _CU132, "pyg-team/pyg-lib release notes 0.9.0 (PR #720 'Support PyTorch 2.14')", "2026-09-03"),
    ("pyg-lib", "2.13", _CU132, _PYGLIB_README + "; CHANGELOG 0.8.0 'Added PyTorch 2.13 support' (#697)", "2026-07-22"),
    ("pyg-lib", "2.12", _CU132, _PYGLIB_README, "2026-07-22"),
    ("pyg-lib", "2.11", _CU130, _PYGLIB_README, "2026-07-22"),
    ("pyg-lib", "2.10", _CU130, _PYG_DOCS, _PYG_DOCS_DATE),
    ("pyg-lib", "2.9", _CU130, _PYG_DOCS, _PYG_DOCS_DATE),
    ("torch-scatter", "2.14", (), "rusty1s/pytorch_scatter#513 (open): wheels only up to torch 2.12", "2026-09-18"),
    ("torch-scatter", "2.13", (), "rusty1s/pytorch_scatter#513; gridfm/gridfm-graphkit#95: no torch_scatter link "
     "on torch-2.13.0+cpu/+cu126", "2026-09-18"),
    ("torch-scatter", "2.12", _CU132, "rusty1s/pytorch_scatter#510 'Add PyTorch 2.12 support'; " + _PYG_DOCS,
     _PYG_DOCS_DATE),
    ("torch-scatter", "2.11", _CU130, "rusty1s/pytorch_scatter#505 'Add PyTorch 2.11 support'; " + _PYG_DOCS,
     _PYG_DOCS_DATE),
    ("torch-scatter", "2.10", _CU130, "rusty1s/pytorch_scatter#504; #506: torch-2.10.0+cpu/cu126/cu128/cu130 pages",
     "2026-04-02"),
    ("torch-scatter", "2.9", _CU130, "rusty1s/pytorch_scatter#504 'Add PyTorch 2.9/2.10 and cu130 support'; "
     + _PYG_DOCS, _PYG_DOCS_DATE),
    ("torch-sparse", "2.14", None, "unknown: no support PR after rusty1s/pytorch_sparse#411 (2.12) was found; its "
     "wheel build takes torch-scatter from data.pyg.org, which has none for 2.13+ (pytorch_scatter#513)", "2026-09-18"),
    ("torch-sparse", "2.13", None, "unknown: as for 2.14", "2026-09-18"),
    ("torch-sparse", "2.12", _CU132, "rusty1s/pytorch_sparse#411 'Add PyTorch 2.12 support'; " + _PYG_DOCS,
     _PYG_DOCS_DATE),
    ("torch-sparse", "2.11", _CU130, "rusty1s/pytorch_sparse#409 'Add PyTorch 2.11 support'; " + _PYG_DOCS,
     _PYG_DOCS_DATE),
    ("torch-sparse", "2.10", _CU130, _PYG_DOCS, _PYG_DOCS_DATE),
    ("torch-sparse", "2.9", _CU130, _PYG_DOCS, _PYG_DOCS_DATE),
) + tuple(
    (dist, minor, variants, _PYG_DOCS, _PYG_DOCS_DATE)
    for dist in ("pyg-lib", "torch-scatter", "torch-sparse") for minor, variants in _OLD_ROWS
) + tuple(
    row for dist, repo, final, notice, readme, port, port_date in (
        ("torch-cluster", "pytorch_cluster", "1.6.3", "#272", "README.md @3d1d9e3",
         "#265 'Add PyTorch 2.9/2.10 and cu130 support'; #261: Linux/macOS wheels out, Windows next day",
         "2026-03-08"),
        ("torch-spline-conv", "pytorch_spline_conv", "1.2.2", "#65", "README.md @050f58a",
         "#62 'Add PyTorch 2.9/2.10 and cu130 support' (merge date unknown); pyg-team/pytorch_geometric#10634",
         "2026-03-09"))
    for row in (
        (dist, "2.14", (), "rusty1s/%s%s (deprecated): %s is the final release, no new wheels" % (repo, notice, final),
         "2026-06-05"),
        (dist, "2.13", (), "rusty1s/%s%s (deprecated): %s is the final release, no new wheels" % (repo, notice, final),
         "2026-06-05"),
        (dist, "2.12", None, "unknown", "2026-06-05"),
        (dist, "2.11", None, "unknown", "2026-06-05"),
        (dist, "2.10", _CU130, "rusty1s/%s%s" % (repo, port), port_date),
        (dist, "2.9", _CU130, "rusty1s/%s%s" % (repo, port), port_date),
        (dist, "2.8", None, "unknown", port_date),
        (dist, "2.7", ("cpu", "cu118", "cu126", "cu128"), "rusty1s/%s %s" % (repo, readme), "2025-05-31"),
    )
)


# Platforms with wheels (pyg-lib README @764e3a4: Linux incl. aarch64 since 0.8.0 (#683),
# Windows, macOS arm64 (#558); the rusty1s READMEs: Linux, Windows, macOS). Elsewhere: unknown.
# macOS wheels are CPU-only everywhere.
WHEEL_PLATFORMS = {
    "pyg-lib": ("linux-x86_64", "linux-aarch64", "win32-amd64", "darwin-arm64"),
    "torch-scatter": ("linux-x86_64", "win32-amd64", "darwin-arm64", "darwin-x86_64"),
    "torch-sparse": ("linux-x86_64", "win32-amd64", "darwin-arm64", "darwin-x86_64"),
    "torch-cluster": ("linux-x86_64", "win32-amd64", "darwin-arm64", "darwin-x86_64"),
    "torch-spline-conv": ("linux-x86_64", "win32-amd64", "darwin-arm64", "darwin-x86_64"),
}


# The newest patch release of a torch minor to pin, where a source names one
# (pyg-team/pyg-lib#687 'Add PyTorch 2.12.1 index', 2026-06-19); otherwise X.Y.0.
TORCH_NEWEST_PATCH = {"2.12": "2.12.1"}


# The extensions PyG's NeighborLoader family can use, in install order.
SAMPLING_DISTS = ("pyg-lib", "torch-scatter", "torch-sparse")


# PyPI has only sdists of these (the newest releases); pyg-lib has none at all.
# Build order matters: torch_sparse imports torch_scatter.
SOURCE_BUILDS = (("torch-scatter", "2.1.2"), ("torch-sparse", "0.6.18"),
                 ("torch-cluster", "1.6.3"), ("torch-spline-conv", "1.2.2"))


SOURCE_BUILD_FLAGS = "--force-reinstall --no-deps --no-cache-dir --no-build-isolation"


# Minutes to build each sdist, measured from .ci/run's build log (`time`, 2 cores, MAX_JOBS=2,
# torch 2.13 CPU, 2026-12-01: 4 min 59 s and 15 min 28 s wall, on a machine shared with other
# builds). torch-cluster and torch-spline-conv were not measured.
SOURCE_BUILD_MINUTES = {"torch-scatter": 5, "torch-sparse": 15}


SOURCE_BUILD_NEEDS = ("a C++ compiler (g++), the Python headers (python3-dev), setuptools and torch in this "
                      "environment, scipy for torch-sparse; CPU kernels only unless a GPU is visible or "
                      "FORCE_CUDA=1 with nvcc on PATH; no METIS")


# What to build from PyPI's sources in place of each extension's wheel.
# pyg-lib has no sdist on PyPI; torch-sparse gives PyG the same neighbour sampling.
SOURCE_BUILD_PACKAGES = {
    "pyg_lib": ("torch-scatter", "torch-sparse"), "torch_scatter": ("torch-scatter",),
    "torch_sparse": ("torch-scatter", "torch-sparse"), "torch_cluster": ("torch-cluster",),
    "torch_spline_conv": ("torch-spline-conv",),
}


# A torch release PyG's wheel table (WHEEL_ROWS: pyg-lib has wheels for it) covers and the tests run
# on; the install fix pins it so pip does not pick a newer torch PyG has no
# wheels for yet.
TORCH_PIN = "2.13.0"


TORCH_PIN_NEEDS_PYTHON = (3, 10)


def platform_key(python_facts):
    system = (python_facts.get("system") or "").lower()
    machine = (python_facts.get("machine") or "").lower()
    if system == "linux":
        return "linux-" + ("aarch64" if machine in ("aarch64", "arm64") else machine)
    if system == "windows":
        return "win32-amd64"
    if system == "darwin":
        return "darwin-" + ("arm64" if machine == "arm64" else "x86_64")
    return system + "-" + machine


def wheel_row(dist, torch_minor):
    for row in WHEEL_ROWS:
        if row[0] == dist and row[1] == torch_minor:
            return row
    return None


def wheel_status(dist, torch_minor, variant, platform_name, python_version):
    """Whether PyG's index has a wheel of `dist` for this combination: True, False or None (unknown)."""
    row = wheel_row(dist, torch_minor)
    answer = {"distribution": dist, "wheel": None, "variants": None,
              "source": row[3] if row else "unknown: no row for torch %s" % torch_minor,
              "source_date": row[4] if row else None}
    if variant == "rocm":
        return dict(answer, wheel=False, reason="PyG publishes no ROCm wheels")
    if row is None or row[2] is None:
        return dict(answer, reason="no public source says whether %s has wheels for torch %s" % (dist, torch_minor))
    answer["variants"] = list(row[2])
    if variant not in row[2]:
        if not row[2]:
            return dict(answer, wheel=False, reason="no %s wheels for torch %s" % (dist, torch_minor))
        return dict(answer, wheel=False, reason="%s wheels for torch %s exist only for %s, not %s" % (
            dist, torch_minor, ", ".join(row[2]), variant))
    if dist == "pyg-lib" and python_version[:2] < (3, 10):
        return dict(answer, wheel=False, reason="pyg-lib wheels need Python >= 3.10")
    if platform_name not in WHEEL_PLATFORMS[dist]:
        return dict(answer, reason="no source lists %s wheels for %s" % (dist, platform_name))
    return dict(answer, wheel=True, reason=None)


def pip_name(dist):
    return dist.replace("-", "_")  # the names PyG's wheel index lists


def pip_command(python, words, uv=False):
    """`python -m pip WORDS`; uv=True: `uv pip VERB --python python ...`, for a venv uv made without pip.
    `python` is the interpreter's path as it is (each word is quoted here)."""
    words = list(words)
    if uv:
        verb, rest = words[0], words[1:]
        if verb == "uninstall" and rest[:1] == ["-y"]:
            rest = rest[1:]  # uv never asks, and uv before astral-sh/uv#19082 (2026-04-20) refuses -y
        return line("uv", "pip", verb, "--python", python, rest)
    return line(python, "-m", "pip", words)


def wheel_command(python, dists, index_url, reinstall=False, uv=False):
    """The wheel install line; --only-binary makes a missing wheel fail fast instead of compiling."""
    flags = ["--force-reinstall", "--no-deps", "--no-cache-dir"] if reinstall else []
    return pip_command(python, ["install"] + flags + ["--only-binary=:all:"] + [pip_name(d) for d in dists]
                       + ["-f", index_url], uv)


def source_build_command(python, dists, uv=False):
    """Rebuild from PyPI's sdists, in build order, ignoring pip's wheel cache (it may hold a wheel
    built against the torch installed earlier, which pip would reinstall unchanged)."""
    wanted = set(dists)
    return " && ".join(pip_command(python, ["install"] + SOURCE_BUILD_FLAGS.split() + ["%s==%s" % (dist, version)],
                                   uv)
                       for dist, version in SOURCE_BUILDS if dist in wanted)


def source_build_time(dists):
    """One time figure for building these sdists, from the measured minutes."""
    unmeasured = [d for d in dists if d not in SOURCE_BUILD_MINUTES]
    if unmeasured:
        return "build time of %s not measured" % ", ".join(unmeasured)
    return "about %d min on 2 cores" % sum(SOURCE_BUILD_MINUTES[d] for d in dists)


def torch_install_command(release, variant, python="python", platform_name="linux-x86_64", uv=False):
    """The exact line that installs torch `release` (e.g. '2.12.1') built for `variant` (cpu, cu126, ...);
    `python` as it is (every word is quoted here).

    The local tag (+cu130) is part of the pin: `torch==2.13.0` alone is already satisfied by an
    installed 2.13.0+cpu, so pip would keep the wrong build. macOS wheels have no tag and come from PyPI.
    """
    if platform_name.startswith("darwin"):
        return pip_command(python, ["install", "torch==%s" % release], uv)
    return pip_command(python, ["install", "torch==%s+%s" % (release, variant), "--index-url",
                                TORCH_INDEX.format(variant=variant)], uv)


def stack_install_command(python, missing, extra=(), platform_name=None):
    """The line that makes the missing ones of torch and torch_geometric importable by `python`: torch
    pinned to its CPU build (PyPI's default Linux torch is a multi-GB CUDA build), then PyG and `extra`."""
    import platform
    if platform_name is None:
        platform_name = platform_key({"system": platform.system(), "machine": platform.machine()})
    parts = []
    if "torch" in missing:
        parts.append(torch_install_command(TORCH_PIN, "cpu", python, platform_name))
    parts.append(pip_command(python, ("install", "torch_geometric") + tuple(extra)))
    return " && ".join(parts)


def newest_torch_with_wheels(variant, platform_name, python_version):
    """The newest torch minor (and the release to pin) with wheels of every sampling extension."""
    minors = sorted({row[1] for row in WHEEL_ROWS}, key=parse_version, reverse=True)
    for minor in minors:
        if all(wheel_status(d, minor, variant, platform_name, python_version)["wheel"] for d in SAMPLING_DISTS):
            return minor, TORCH_NEWEST_PATCH.get(minor, minor + ".0")
    return None, None


# ASCII digits only: \d would also take full-width and other Unicode digits, which int() reads
# but an index URL or a pip line cannot use.
TORCH_SPEC = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?(?:\+(cpu|cu\d{3}|rocm[\d.]*))?", re.ASCII)


def parse_torch_spec(text):
    """'2.14.1+cu126' -> ('2.14.1', '2.14', 'cu126'); no +VARIANT means the CPU build; None if malformed."""
    match = TORCH_SPEC.fullmatch((text or "").strip())
    if not match:
        return None
    major, minor, patch, variant = match.groups()
    variant = "rocm" if variant and variant.startswith("rocm") else (variant or "cpu")
    return "%s.%s.%s" % (major, minor, patch or "0"), "%s.%s" % (major, minor), variant


def wheel_report(torch_release, variant, platform_name, python_version, python="python3"):
    """What --wheels answers: per extension, whether PyG's index has a wheel for this torch/variant,
    the source and date of that row, and the exact install line; then the newest torch with wheels of
    every sampling extension for this variant. Table lookups only: nothing is probed or fetched."""
    major, minor, _ = parse_version(torch_release)
    torch_minor = "%d.%d" % (major, minor)
    index_url = WHEEL_INDEX.format(torch=torch_minor + ".0", variant=variant)
    extensions = []
    for dist in WHEEL_PLATFORMS:
        status = wheel_status(dist, torch_minor, variant, platform_name, python_version)
        extensions.append({
            "distribution": dist, "wheel": status["wheel"], "reason": status["reason"],
            "variants": status["variants"], "source": status["source"], "source_date": status["source_date"],
            "install": wheel_command(python, [dist], index_url) if status["wheel"] else (
                source_build_command(python, [dist]) + "  # no wheel: a source build (%s)" % source_build_time([dist])
                if dist in dict(SOURCE_BUILDS) else None)})
    with_wheels = [e["distribution"] for e in extensions if e["wheel"] and e["distribution"] in SAMPLING_DISTS]
    newest_minor, newest_release = newest_torch_with_wheels(variant, platform_name, python_version)
    newest = None
    if newest_minor:
        newest = {"torch_minor": newest_minor, "release": newest_release,
                  "install": "%s && %s" % (
                      torch_install_command(newest_release, variant, python, platform_name),
                      wheel_command(python, SAMPLING_DISTS, WHEEL_INDEX.format(torch=newest_minor + ".0",
                                                                               variant=variant)))}
    return {
        "torch": torch_release, "torch_minor": torch_minor, "variant": variant, "platform": platform_name,
        "python": "%d.%d" % tuple(python_version[:2]), "index_url": index_url,
        "extensions": extensions,
        # One line for every sampling extension that has a wheel: one missing wheel would fail the whole line.
        "install_command": wheel_command(python, with_wheels, index_url) if with_wheels else None,
        "newest_torch_with_all_sampling_wheels": newest,
        "support_table_date": WHEEL_TABLE_DATE,
    }


def wheel_report_markdown(report):
    """The same answer as a table, for people."""
    lines = ["### PyG wheels for torch %s+%s (%s, Python %s)" % (
        report["torch"], report["variant"], report["platform"], report["python"]), "",
        "| extension | wheel | why / source (date) | install |", "|---|---|---|---|"]
    for entry in report["extensions"]:
        lines.append("| %s | %s | %s | %s |" % (
            entry["distribution"], {True: "yes", False: "no", None: "unknown"}[entry["wheel"]],
            ("%s; " % entry["reason"] if entry["reason"] else "") + "%s (%s)" % (entry["source"], entry["source_date"]),
            "`%s`" % entry["install"] if entry["install"] else "-"))
    newest = report["newest_torch_with_all_sampling_wheels"]
    lines += ["", "all sampling wheels with one line: %s" % (
        "`%s`" % report["install_command"] if report["install_command"] else "none"),
        "newest torch with wheels of pyg-lib, torch-scatter and torch-sparse for %s: %s" % (
            report["variant"], "%s: `%s`" % (newest["release"], newest["install"]) if newest else "none known"),
        "", "wheel table checked against its sources on %s" % report["support_table_date"]]
    return "\n".join(lines) + "\n"
