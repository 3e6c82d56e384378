"""The DDP recipe on the cases no other test reproduces: a missing torch stack, an unreadable --data file
and the launcher's internal-error path.
"""

import os
import sys

import pytest

from conftest import ROOT, pyenv_python
from support.helpers import ids, run


RECIPE = str(ROOT / "scripts" / "ddp_neighbor_training.py")


def test_recipe_without_torch_is_ddp_stack_missing():
    python = pyenv_python("3.12")
    completed, document = run([str(python), RECIPE, "--nprocs", "2"])
    assert completed.returncode == 2 and ids(document) == ["ddp-stack-missing"]
    assert document["findings"][0]["fix"].startswith("%s -m pip install torch==2.13.0" % python)


@pytest.mark.finding("ddp-usage-error")
def test_recipe_with_an_unreadable_data_file_is_ddp_usage_error(tmp_path):
    bad = tmp_path / "graph.pt"
    bad.write_bytes(b"not a torch file")
    completed, document = run([sys.executable, RECIPE, "--nprocs", "2", "--data", str(bad)],
                              env=dict(os.environ, TMPDIR=str(tmp_path)))
    assert completed.returncode == 2 and ids(document) == ["ddp-usage-error"]
    assert str(bad) in document["findings"][0]["evidence"]["message"]


@pytest.mark.finding("ddp-internal-error")
def test_recipe_internal_error_in_the_launcher_is_exit_3_with_json():
    code = ("import sys; sys.argv = [%r, '--nprocs', '2']; sys.path.insert(0, %r); import ddp_neighbor_training as tool\n"
            "def broken(args):\n    raise KeyError('launcher bug')\n"
            "tool.main_spawn = broken\n"
            "sys.exit(tool.main(sys.argv[1:]))" % (RECIPE, str(ROOT / "scripts")))
    completed, document = run([sys.executable, "-c", code], env=dict(os.environ, **{
        k: "" for k in ()}))
    assert completed.returncode == 3 and document["status"] == "internal-error"
    assert ids(document) == ["ddp-internal-error"] and "launcher bug" in document["findings"][0]["evidence"]["error"]
