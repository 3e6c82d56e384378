"""PyG's wheel table (diagnostics_core.wheels) and the install lines built from it, in process: lookups, the
rows' sources and dates, the index URL pattern, and every word of a pip line quoted (the interpreter's path is
input). The docs' agreement with the table and the real rebuild: tests/test_checker_install_truth.py."""

import re
import shlex

import pytest

from diagnostics_core import wheels
from sampling_checker.parsing import cuda_variant, parse_local_tag


def test_every_row_has_a_source_a_date_and_known_variants():
    seen = set()
    for dist, minor, variants, source, date in wheels.WHEEL_ROWS:
        assert dist in wheels.WHEEL_PLATFORMS, dist
        assert (dist, minor) not in seen, ("two rows for", dist, minor)
        seen.add((dist, minor))
        assert re.fullmatch(r"\d+\.\d+", minor)
        assert source and (source.startswith("unknown") or re.search(r"[\w-]+/[\w-]+", source)), source
        assert re.fullmatch(r"20\d\d-\d\d-\d\d", date) and date <= wheels.WHEEL_TABLE_DATE, date
        # None: no source says; (): a source says there is none; else real CUDA variant names.
        assert variants is None or all(re.fullmatch(r"cpu|cu1\d\d", v) for v in variants), variants
        if variants is None:
            assert source.startswith("unknown"), (dist, minor, "an unknown row says so")
    for dist in wheels.WHEEL_PLATFORMS:
        for minor in ("2.9", "2.10", "2.11", "2.12", "2.13", "2.14"):
            assert (dist, minor) in seen, ("no row", dist, minor)


@pytest.mark.parametrize("dist, minor, variant, platform, python, wheel", [
    # rusty1s/pytorch_scatter#513: torch-scatter wheels stop at torch 2.12
    ("torch-scatter", "2.12", "cu130", "linux-x86_64", (3, 11, 0), True),
    ("torch-scatter", "2.13", "cpu", "linux-x86_64", (3, 11, 0), False),
    ("torch-scatter", "2.14", "cu130", "linux-x86_64", (3, 11, 0), False),
    # pyg-lib 0.8.0 added torch 2.13; 0.9.0 torch 2.14; no cu128 wheels for either
    ("pyg-lib", "2.13", "cpu", "linux-x86_64", (3, 11, 0), True),
    ("pyg-lib", "2.14", "cu130", "linux-x86_64", (3, 11, 0), True),
    ("pyg-lib", "2.13", "cu128", "linux-x86_64", (3, 11, 0), False),
    ("pyg-lib", "2.13", "cpu", "linux-x86_64", (3, 9, 0), False),        # pyg-lib wheels need Python 3.10+
    ("pyg-lib", "2.13", "cpu", "linux-aarch64", (3, 11, 0), True),
    ("pyg-lib", "2.13", "cpu", "freebsd-amd64", (3, 11, 0), None),       # no source lists that platform
    ("pyg-lib", "2.13", "rocm", "linux-x86_64", (3, 11, 0), False),      # PyG publishes no ROCm wheels
    ("pyg-lib", "1.13", "cpu", "linux-x86_64", (3, 11, 0), None),        # no row at all
    # no source says either way for torch-sparse after 2.12: unknown, never named in a fix
    ("torch-sparse", "2.13", "cpu", "linux-x86_64", (3, 11, 0), None),
    ("torch-sparse", "2.8", "cu128", "linux-x86_64", (3, 11, 0), True),
    ("torch-cluster", "2.13", "cpu", "linux-x86_64", (3, 11, 0), False),
    ("torch-spline-conv", "2.10", "cu130", "win32-amd64", (3, 11, 0), True),
])
def test_the_table_holds_the_public_facts(dist, minor, variant, platform, python, wheel):
    status = wheels.wheel_status(dist, minor, variant, platform, python)
    assert status["wheel"] is wheel, status
    assert (status["reason"] is None) == (wheel is True)
    assert status["source"] and (status["source_date"] or status["source"].startswith("unknown"))


@pytest.mark.parametrize("variant, newest", [("cu130", ("2.12", "2.12.1")), ("cu128", ("2.11", "2.11.0")),
                                             ("cpu", ("2.12", "2.12.1")), ("cu121", ("2.5", "2.5.0")),
                                             ("cu999", (None, None))])
def test_the_newest_torch_with_every_sampling_wheel(variant, newest):
    assert wheels.newest_torch_with_wheels(variant, "linux-x86_64", (3, 11, 0)) == newest


@pytest.mark.parametrize("release, variant, python, platform, expected", [
    # `torch==2.13.0` alone is satisfied by an installed 2.13.0+cpu: the tag must be in the pin
    ("2.13.0", "cu130", "python", "linux-x86_64",
     "python -m pip install torch==2.13.0+cu130 --index-url https://download.pytorch.org/whl/cu130"),
    ("2.12.1", "cpu", "py", "darwin-arm64", "py -m pip install torch==2.12.1"),
    ("2.13.0", "cpu", "/opt/my env/bin/python", "linux-x86_64",
     "'/opt/my env/bin/python' -m pip install torch==2.13.0+cpu --index-url https://download.pytorch.org/whl/cpu"),
])
def test_torch_install_command_pins_the_build_and_quotes_the_interpreter(release, variant, python, platform, expected):
    assert wheels.torch_install_command(release, variant, python, platform) == expected


@pytest.mark.parametrize("python, uv, expected", [
    ("/v/bin/python", False, "/v/bin/python -m pip install --only-binary=:all: pyg_lib torch_sparse -f URL"),
    ("/v/bin/python", True, "uv pip install --python /v/bin/python --only-binary=:all: pyg_lib torch_sparse -f URL"),
    ("/it's/python", False, "'/it'\"'\"'s/python' -m pip install --only-binary=:all: pyg_lib torch_sparse -f URL"),
])
def test_wheel_command_quotes_each_word(python, uv, expected):
    assert wheels.wheel_command(python, ["pyg-lib", "torch-sparse"], "URL", uv=uv) == expected


@pytest.mark.parametrize("uv, expected", [
    (False, "p -m pip install --force-reinstall --no-deps --no-cache-dir --no-build-isolation torch-scatter==2.1.2 && "
            "p -m pip install --force-reinstall --no-deps --no-cache-dir --no-build-isolation torch-sparse==0.6.18"),
    (True, "uv pip install --python p --force-reinstall --no-deps --no-cache-dir --no-build-isolation "
           "torch-scatter==2.1.2 && uv pip install --python p --force-reinstall --no-deps --no-cache-dir "
           "--no-build-isolation torch-sparse==0.6.18"),
])
def test_source_builds_go_in_build_order(uv, expected):
    assert wheels.source_build_command("p", ["torch-sparse", "torch-scatter"], uv=uv) == expected


@pytest.mark.parametrize("words, expected", [
    (["uninstall", "-y", "torch-cluster"], "uv pip uninstall --python p torch-cluster"),  # uv refuses -y
    (["install", "x"], "uv pip install --python p x"),
])
def test_uv_pip_lines(words, expected):
    assert wheels.pip_command("p", words, uv=True) == expected


@pytest.mark.parametrize("text, parsed", [
    ("2.14.1+cu126", ("2.14.1", "2.14", "cu126")), ("2.13", ("2.13.0", "2.13", "cpu")),
    ("2.13.0+cpu", ("2.13.0", "2.13", "cpu")), ("2.12.0+rocm6.3", ("2.12.0", "2.12", "rocm")),
    (" 2.11.0 ", ("2.11.0", "2.11", "cpu")), ("latest", None), ("2.14.1+cu\uff11\uff12\uff16", None),
    ("\uff12.14.1", None), ("2.14.\u0661", None), ("2.14.1+cu12", None), ("", None)])
def test_torch_specs_are_ascii_digits_only(text, parsed):
    assert wheels.parse_torch_spec(text) == parsed


@pytest.mark.parametrize("cuda, variant", [(None, "cpu"), ("", "cpu"), ("12.6", "cu126"), ("13.0", "cu130"),
                                           ("11.8", "cu118"), ("12", "cu120"),
                                           ("12.6$(:>x)", "cu126"), ("1\n2", "cu12")])
def test_a_cuda_variant_is_rebuilt_from_its_numbers(cuda, variant):
    assert cuda_variant(cuda) == variant


@pytest.mark.parametrize("version, tag", [
    ("0.6.18+pt213cu126", {"raw": "pt213cu126", "torch": "2.13", "variant": "cu126"}),
    ("2.1.2+pt28cpu", {"raw": "pt28cpu", "torch": "2.8", "variant": "cpu"}),
    ("2.1.2", None), (None, None), ("1.0+local", {"raw": "local", "torch": None, "variant": None})])
def test_pyg_local_tags(version, tag):
    assert parse_local_tag(version) == tag


def test_the_index_pattern_is_the_one_pyg_lib_documents_and_says_when_it_was_checked():
    assert wheels.WHEEL_INDEX.format(torch="2.13.0", variant="cpu") == "https://data.pyg.org/whl/torch-2.13.0+cpu.html"
    documented = wheels.WHEEL_INDEX_SOURCE.split("-f ", 1)[1]
    assert documented == wheels.WHEEL_INDEX.replace("{torch}", "${TORCH}").replace("{variant}", "${CUDA}")
    assert re.fullmatch(r"20\d\d-\d\d-\d\d", wheels.WHEEL_INDEX_CHECKED)
    assert wheels.WHEEL_INDEX_CHECKED >= wheels.WHEEL_TABLE_DATE


def test_the_wheel_report_gives_a_line_per_extension():
    report = wheels.wheel_report("2.14.1", "cu126", "linux-x86_64", (3, 11, 0))
    rows = dict((e["distribution"], e) for e in report["extensions"])
    assert rows["pyg-lib"]["install"] == ("python3 -m pip install --only-binary=:all: pyg_lib -f "
                                          "https://data.pyg.org/whl/torch-2.14.0+cu126.html")
    assert "--no-build-isolation torch-scatter==2.1.2" in rows["torch-scatter"]["install"]
    assert shlex.split(report["newest_torch_with_all_sampling_wheels"]["install"])[4] == "torch==2.12.1+cu126"
    markdown = wheels.wheel_report_markdown(report)
    assert "| pyg-lib | yes |" in markdown and "| torch-scatter | no |" in markdown
