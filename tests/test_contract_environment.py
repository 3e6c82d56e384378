"""The user's environment, the same in every tool (the one runner): warnings turned into errors
(PYTHONWARNINGS=error, python -W error -X dev) and a stray torch/ package shadowing the installed one on
PYTHONPATH. Each tool, run as an agent runs it, prints its one document and names the cause."""

import json
import subprocess
import sys

import pytest

from conftest import ROOT, clean_env, skill_tools, strict_json

SCRIPTS = ROOT / "scripts"
TOOLS = dict(skill_tools())


def command_lines(tmp_path):
    """A quick, valid command line per tool (a few seconds each)."""
    report = tmp_path / "node.json"
    report.write_text(subprocess.run([sys.executable, str(SCRIPTS / "check_sampling_backends.py"), "--static-only"],
                                     capture_output=True, text=True, env=clean_env(), timeout=120).stdout)
    parts = tmp_path / "parts"
    parts.mkdir()
    return {"check_sampling_backends": ["--static-only"],
            "check_store_contract": ["%s:reference_homo" % (ROOT / "tests" / "support" / "store_fixtures.py"),
                                     "--skip-sampling"],
            "check_partition": [str(parts)],
            "compare_reports": [str(report), str(report)],
            "ddp_neighbor_training": ["--nprocs", "1", "--epochs", "1", "--num-nodes", "400"],
            "profile_loader": ["--synthetic", "2000,10000,8", "--budget", "8", "--loader-only"],
            "plan_capacity": ["--nodes", "100000", "--edges", "1000000"],
            "check_launch": ["--command", "srun python train.py"]}


def run(tool, args, env, flags=()):
    completed = subprocess.run([sys.executable] + list(flags) + [str(SCRIPTS / (tool + ".py"))] + args,
                               capture_output=True, timeout=300, env=env, stdin=subprocess.DEVNULL)
    document = strict_json(completed.stdout)  # exactly one document, whatever the environment
    assert document["exit_code"] == completed.returncode, completed.stderr[-2000:]
    assert b"Traceback" not in completed.stderr, completed.stderr[-2000:]
    return document


def test_every_tool_has_a_quick_command_line_here(tmp_path):
    assert sorted(command_lines(tmp_path)) == sorted(dict(skill_tools()))


@pytest.mark.finding("environment-warnings-as-errors")
@pytest.mark.parametrize("how", ["PYTHONWARNINGS=error", "-W error -X dev"])
@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_warnings_made_errors_are_named_and_the_tool_still_runs(tool, how, tmp_path):
    args = command_lines(tmp_path)[tool]
    if how.startswith("PYTHONWARNINGS"):
        document = run(tool, args, clean_env({"PYTHONWARNINGS": "error"}))
    else:
        document = run(tool, args, clean_env(), flags=("-W", "error", "-X", "dev"))
    ids = [f["id"] for f in document["findings"]]
    assert "environment-warnings-as-errors" in ids, ids
    assert document["status"] not in ("internal-error", "usage-error"), document["findings"]
    [named] = [f for f in document["findings"] if f["id"] == "environment-warnings-as-errors"]
    assert named["evidence"]["as_errors"] and named["fix"]


@pytest.mark.finding("environment-package-shadowed")
@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_a_stray_torch_on_pythonpath_is_named(tool, tmp_path):
    stray = tmp_path / "vendor"
    (stray / "torch").mkdir(parents=True)
    (stray / "torch" / "__init__.py").write_text("raise ImportError('a stray torch, not the installed one')\n")
    document = run(tool, command_lines(tmp_path)[tool], clean_env({"PYTHONPATH": str(stray)}))
    assert document["status"] != "internal-error", document["findings"]
    assert str(stray) in json.dumps(document["findings"]), [f["id"] for f in document["findings"]]
    shadowed = [f for f in document["findings"] if f["id"] == "environment-package-shadowed"]
    if shadowed:
        [finding] = shadowed
        assert finding["evidence"]["shadowed"][0]["package"] == "torch"
        assert finding["fix"].startswith("unset PYTHONPATH")
