"""The DDP recipe's command line before torch loads: --help and refusals without torch.
"""


import json

from conftest import ROOT, plain_run, pyenv_python


DDP = ROOT / "scripts" / "ddp_neighbor_training.py"


def test_ddp_recipe_help_and_refusal_without_torch():
    python = pyenv_python("3.12")
    helped = plain_run([python, DDP, "--help"])
    assert helped.returncode == 0 and helped.stdout.startswith("usage: ddp_neighbor_training.py")
    refused = plain_run([python, DDP, "--nprocs", "2"])
    assert refused.returncode == 2
    assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
    assert "No module named 'torch'" in refused.stderr and "-m pip install torch==2.13.0" in refused.stderr
    document = json.loads(refused.stdout)
    assert [f["id"] for f in document["findings"]] == ["ddp-stack-missing"]
    assert document["findings"][0]["fix"].startswith("%s -m pip install torch==2.13.0" % python)


def test_ddp_recipe_parses_its_arguments_before_importing_torch():
    import ast
    tree = ast.parse(DDP.read_text())
    top_imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    names = {alias.name.split(".")[0] for node in top_imports for alias in getattr(node, "names", [])}
    modules = {node.module.split(".")[0] for node in top_imports if isinstance(node, ast.ImportFrom)}
    assert not ({"torch", "torch_geometric"} & (names | modules))
