"""A fix is a value, in every tool: each tool is run as an agent runs it on inputs whose names and text carry
shell injections (command substitution, backticks, ;, |, &&, quotes, a newline), and every fix it prints is
pasted into bash, with an empty PATH, from a throwaway folder. Nothing from the input may run: no marker
appears (a redirection the tool itself wrote may still create its file)."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, clean_env, skill_tools, strict_json

SCRIPTS = ROOT / "scripts"
BASH = shutil.which("bash")
# One name carrying every way a pasted line could run text: each writes its own marker in the shell's folder.
HOSTILE = "h$(:>m1)`:>m2`;:>m3|:>m4&&:>m5'\":>m6\n:>m7 $HOME"
MARKERS = ["m%d" % n for n in range(1, 8)]


def fixes_of(document):
    found = []

    def walk(value):
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "fix" and isinstance(item, str):
                    found.append(item)
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
    walk(document.get("findings") or [])
    return found


def paste(fix, folder):
    """The fix as an agent pastes it: bash -c, an empty PATH (a command it names is not found; only the shell
    itself could write a marker), from `folder`; -> the markers found there afterwards."""
    subprocess.run([BASH, "-c", fix], cwd=folder, env={"PATH": str(folder / "no-commands"), "HOME": str(folder)},
                   capture_output=True, timeout=20, stdin=subprocess.DEVNULL)
    return sorted(p.name for p in folder.iterdir() if p.name in MARKERS)


def hostile_inputs(tmp_path):
    """{tool: command-line words}: inputs named (and filled) with HOSTILE, one command line per tool."""
    home = tmp_path / HOSTILE
    home.mkdir()
    python = home / "python3"
    python.symlink_to(sys.executable)
    stores = home / "stores.py"
    stores.write_text("def make_stores():\n    raise RuntimeError(%r)\n" % HOSTILE)
    parts = home / "parts"
    parts.mkdir()
    (parts / "META.json").write_text(json.dumps({"num_parts": 2, "is_hetero": False, "node_types": None,
                                                 "edge_types": None, "is_sorted": False, "node_offset": None}))
    job = home / "job.sbatch"
    job.write_text("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=4\n"
                   "srun torchrun --nnodes=2 --nproc-per-node=4 --rdzv-backend=c10d --rdzv-id=x "
                   "--rdzv-endpoint=n1:29500 train.py %s\n" % HOSTILE.replace("\n", " "))
    data = home / "graph.pt"
    data.write_bytes(b"not a pickle")
    report = home / "node.json"
    report.write_text("{")
    return {"check_sampling_backends": ["--static-only", "--python", str(python)],
            "check_store_contract": ["%s:make_stores" % stores],
            "check_partition": [str(parts), "--labels", str(data)],
            "compare_reports": [str(report), str(report)],
            "ddp_neighbor_training": ["--data", str(data), "--nprocs", "1", "--epochs", "1"],
            "profile_loader": ["--data", str(data), "--budget", "5"],
            "plan_capacity": ["--data", str(data), "--num-workers", "2"],
            "check_launch": [str(job), "--log", str(data)]}


def test_every_tool_is_tried_here(tmp_path):
    assert sorted(hostile_inputs(tmp_path)) == sorted(dict(skill_tools()))


@pytest.mark.parametrize("tool", sorted(dict(skill_tools())))
def test_no_printed_fix_runs_text_from_the_input(tool, tmp_path):
    args = hostile_inputs(tmp_path)[tool]
    completed = subprocess.run([sys.executable, str(SCRIPTS / (tool + ".py"))] + args, capture_output=True,
                               timeout=300, env=clean_env(), cwd=tmp_path, stdin=subprocess.DEVNULL)
    document = strict_json(completed.stdout)
    fixes = fixes_of(document)
    assert fixes, (tool, [f["id"] for f in document["findings"]])
    for fix in fixes:
        folder = tmp_path / "paste"
        folder.mkdir()
        assert paste(fix, folder) == [], fix
        shutil.rmtree(folder)
    assert os.listdir(tmp_path / HOSTILE)  # the inputs are still there: nothing the tool ran removed them
