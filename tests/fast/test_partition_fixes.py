"""Every fix the partition checker prints is a value: a partition root, a --labels path or a --label-node-type
that carries shell syntax ($(...), backticks, ;, quotes, a newline) enters a fix only as a quoted word. Each
fix built from such input runs in bash with an empty PATH from another folder, and no marker appears; a rerun
command keeps every option of the run, by absolute path."""

import argparse
import os
import shlex
from pathlib import Path

import pytest

from support import recorded_facts
from support.hostile_fakes import HOSTILE_NAMES as HOSTILE, hostile_folder, markers, run_pasted
from partition_checker import cli, run


def damaged(facts, root, name):
    """Facts whose findings each print a fix naming the folder: a file PyG would unpickle (--allow-pickle
    rerun), defaultdict edge features (the rewrite), a load past its bound (--timeout rerun), parts not
    examined (--max-parts rerun)."""
    facts["root"] = str(root)
    parts = facts["parts"]
    parts[0]["files"]["node_feats.pt"].update(status="pickle-fallback-not-run", error="add_safe_globals",
                                              scan={"safe": True, "refused": [], "error": None})
    parts[1]["files"]["edge_feats.pt"].update(status="error", error="SETITEMS defaultdict",
                                              cause="defaultdict-weights-only", path="part_1/%s.pt" % name,
                                              scan={"safe": True, "refused": [], "error": None})
    facts["caller"]["timed_out"] = {"call": "torch.load(%s)" % root, "timeout_s": 5.0}
    facts["examined"] = {"parts": 9, "examined": 2, "not_examined": 7, "max_parts": 2}
    return facts


def hostile_run(tmp_path, name):
    """A partition root, a labels file and a node type all named `name`; -> (options, root, paste folder)."""
    root, labels, paste = (Path(path) for path in hostile_folder(tmp_path, name, ".pt"))
    options = cli.build_parser().parse_args([str(root), "--labels", str(labels), "--label-node-type=" + name,
                                             "--timeout", "5", "--max-parts", "2"])
    return options, root, paste


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_root_labels_and_node_type_run_nothing_when_pasted(name, tmp_path):
    options, root, paste = hostile_run(tmp_path, name)
    facts = damaged(recorded_facts.load("partition_checker")["homo"], root, name)
    found = recorded_facts.findings_of(cli.SPEC, facts, options)
    assert {"partition-pickle-fallback", "partition-edge-feats-unloadable", "partition-load-timeout",
            "partition-output-capped"} <= {f["id"] for f in found}
    fixes = [f["fix"] for f in found]
    fixes.append(cli.SPEC.interrupted(argparse.Namespace(options=options), {"signal": "SIGINT"}))
    for fix in fixes:
        run_pasted(fix, paste)
        assert markers(tmp_path) == [], fix


@pytest.mark.parametrize("name", HOSTILE[:5])
def test_the_rerun_command_carries_each_word_whole(name, tmp_path):
    options, root, _ = hostile_run(tmp_path, name)
    words = shlex.split(cli.SPEC.interrupted(argparse.Namespace(options=options), {}).split("  # ")[0])
    assert words[2:] == [str(root), "--labels", str(root / (name + ".pt")), "--label-node-type=" + name,
                         "--timeout", "5", "--max-parts", "2"]


@pytest.mark.parametrize("name", HOSTILE[:5])
def test_the_rewrite_names_every_file_as_one_word(name, tmp_path):
    from partition_checker.rules import edge_feats_fix
    words = shlex.split(edge_feats_fix(str(tmp_path / name), ["part_0/edge_feats.pt", "part_1/%s.pt" % name]))
    backup = str(tmp_path / name) + ".bak"
    assert words[:9] == ["test", "!", "-e", backup, "&&", "cp", "-a", str(tmp_path / name), backup]
    assert words[9] == "&&"
    assert words[-2:] == [str(tmp_path / name / "part_0" / "edge_feats.pt"), str(tmp_path / name / "part_1" /
                                                                                  (name + ".pt"))]


@pytest.mark.parametrize("argv, changed, words", [
    (["parts"], {}, ["{cwd}/parts"]),
    (["parts", "--labels", "y.pt"], {"allow_pickle": True}, ["{cwd}/parts", "--labels", "{cwd}/y.pt",
                                                              "--allow-pickle"]),
    (["parts", "--label-node-type=-paper", "--timeout", "120"], {"timeout": 360},
     ["{cwd}/parts", "--label-node-type=-paper", "--timeout", "360"]),
    (["parts", "--allow-pickle", "--max-parts", "4"], {"max_parts": 9}, ["{cwd}/parts", "--allow-pickle",
                                                                          "--max-parts", "9"]),
])
def test_a_rerun_keeps_the_runs_options_and_works_from_any_folder(argv, changed, words, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    options = cli.build_parser().parse_args(argv)
    assert run.rerun_words(options, **changed) == [word.replace("{cwd}", os.getcwd()) for word in words]
