"""--wheels: PyG's wheel table answered without probing, with the install line and its public source.
"""

import json
import sys

import pytest

from conftest import CHECKER, ROOT, clean_env, invoke_checker, plain_run


def test_wheels_answers_for_a_torch_build_without_probing():
    completed = plain_run([sys.executable, CHECKER, "--wheels", "2.14.1+cu126"])
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    assert (report["torch"], report["torch_minor"], report["variant"]) == ("2.14.1", "2.14", "cu126")
    rows = {e["distribution"]: e for e in report["extensions"]}
    assert sorted(rows) == ["pyg-lib", "torch-cluster", "torch-scatter", "torch-sparse", "torch-spline-conv"]
    assert rows["pyg-lib"]["wheel"] is True and rows["pyg-lib"]["source"] and rows["pyg-lib"]["source_date"]
    assert rows["pyg-lib"]["install"] == ("python3 -m pip install --only-binary=:all: pyg_lib -f "
                                          "https://data.pyg.org/whl/torch-2.14.0+cu126.html")
    assert rows["torch-scatter"]["wheel"] is False and "pytorch_scatter#513" in rows["torch-scatter"]["source"]
    assert "--no-build-isolation torch-scatter==2.1.2" in rows["torch-scatter"]["install"]
    assert rows["torch-sparse"]["wheel"] is None
    newest = report["newest_torch_with_all_sampling_wheels"]
    assert newest["release"] == "2.12.1"
    assert newest["install"].startswith("python3 -m pip install torch==2.12.1+cu126 --index-url "
                                        "https://download.pytorch.org/whl/cu126 && ")
    # The same answer as the checker's own wheel table (one table, two readers).
    checker = load_checker_wheels()
    assert rows["torch-scatter"]["reason"] == checker.wheel_status("torch-scatter", "2.14", "cu126", report["platform"],
                                                                   (3, 11))["reason"]
    markdown = plain_run([sys.executable, CHECKER, "--wheels", "2.14.1+cu126", "--format", "markdown"]).stdout
    assert "| pyg-lib | yes |" in markdown and "| torch-scatter | no |" in markdown and "2.12.1" in markdown


def load_checker_wheels():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from diagnostics_core import wheels
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return wheels


def test_wheels_is_a_metadata_command_that_imports_nothing_heavy():
    code = ("import sys; sys.path.insert(0, %r); import check_sampling_backends as c; "
            "code = c.main(['--wheels', '2.13.0+cpu']); "
            "sys.stderr.write(repr(sorted(m for m in sys.modules if m.startswith(('sampling_checker', 'torch')))))"
            "; sys.exit(code)" % str(ROOT / "scripts"))
    completed = plain_run([sys.executable, "-B", "-c", code])
    assert completed.returncode == 0, completed.stderr
    loaded = eval(completed.stderr.strip().splitlines()[-1])
    assert not [m for m in loaded if m.startswith("torch")]
    assert not set(loaded) & {"sampling_checker.run", "sampling_checker.probe", "sampling_checker.render",
                              "sampling_checker.rules"}, loaded


def test_wheels_without_a_value_reads_the_probed_torch_and_refuses_nonsense():
    mine = json.loads(plain_run([sys.executable, CHECKER, "--wheels"]).stdout)
    code = "import torch, json; print(json.dumps([torch.__version__, torch.version.cuda]))"
    version, cuda = json.loads(plain_run([sys.executable, "-c", code]).stdout)
    assert mine["torch"] == version.split("+")[0]
    assert mine["variant"] == ("cu" + cuda.replace(".", "") if cuda else "cpu")
    refused = plain_run([sys.executable, CHECKER, "--wheels", "latest"])
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert json.loads(refused.stdout)["findings"][0]["fix"].endswith("--wheels 2.14.1+cu126")


def test_help_and_skill_route_to_wheels():
    assert "--wheels 2.14.1+cu126" in plain_run([sys.executable, CHECKER, "--help"]).stdout
    skill = (ROOT / "SKILL.md").read_text()
    assert "scripts/check_sampling_backends.py --wheels 2.14.1+cu126" in skill


def fake_torch(root, version, cuda):
    (root / "torch").mkdir(parents=True)
    (root / "torch" / "__init__.py").write_text("raise ImportError('static runs never import this')\n")
    (root / "torch" / "version.py").write_text("__version__ = %r\ncuda = %r\nhip = None\n" % (version, cuda))


def listed(finding_id):
    listing = json.loads(plain_run([sys.executable, CHECKER, "--list-findings"]).stdout)
    return next(item for item in listing if item["id"] == finding_id)


@pytest.mark.finding("no-scatter-sparse-wheels")
def test_no_scatter_sparse_wheels_is_its_own_id(tmp_path):
    """torch 2.13 (CPU): pyg-lib has a wheel, torch-scatter none; the finding says exactly that."""
    fake_torch(tmp_path, "2.13.0+cpu", None)
    result = invoke_checker("--static-only", env=clean_env({"PYTHONPATH": str(tmp_path)}))
    found = result.only("no-scatter-sparse-wheels")
    assert "no-prebuilt-wheels" not in result.ids()
    entry = listed("no-scatter-sparse-wheels")
    assert (found["severity"], found["title"]) == (entry["severity"], entry["title"]) == (
        "info", "PyG publishes no torch-scatter/torch-sparse wheel for this torch/CUDA")
    assert "torch-scatter" in found["evidence"]["missing"] and "pyg-lib" not in found["evidence"]["missing"]


def test_no_prebuilt_wheels_always_means_pyg_lib(tmp_path):
    fake_torch(tmp_path, "2.13.0+cu121", "12.1")  # no pyg-lib wheel for cu121 on torch 2.13
    found = invoke_checker("--static-only", env=clean_env({"PYTHONPATH": str(tmp_path)})).only("no-prebuilt-wheels")
    entry = listed("no-prebuilt-wheels")
    assert (found["severity"], found["title"]) == (entry["severity"], entry["title"])
    assert found["evidence"]["missing"][0] == "pyg-lib" and "pyg-lib" in entry["title"]
