"""The DDP recipe's /dev/shm diagnosis, in process: torch's and the kernel's words for shared memory running out
(messages recorded from real runs in a 64 MB /dev/shm), the copies of the graph a launch puts there, the size to
ask for, and the finding with its two fixes. Every fix built from a hostile --data path runs nothing when pasted."""

import shlex
import shutil
import subprocess

import pytest

from ddp_recipe import cli, rules, shm

# Recorded in a private 64 MB /dev/shm (torch 2.13): the parent handing a 100 MB graph to spawned ranks, and a
# rank whose loader worker ran out while building a batch.
PARENT = ("RuntimeError: unable to allocate shared memory(shm) for file </torch_17113_3160348159_0>: "
          "No space left on device (28)")
WORKER = ("RuntimeError: Caught RuntimeError in DataLoader worker process 0.\nOriginal Traceback (most recent call "
          "last):\n  File \"torch_geometric/loader/utils.py\", line 66, in index_select\n    storage = "
          "value.untyped_storage()._new_shared(\nRuntimeError: unable to allocate shared memory(shm) for file "
          "</torch_17907_857724066_0>: No space left on device (28)\n")
BUS = ("RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible that dataloader's "
       "workers are out of shared memory. Please try to raise your shared memory limit.")
MIB = 1 << 20


@pytest.mark.parametrize("failure, kind, shown", [
    ({"rank": None, "message": PARENT}, "no-space", "</torch_17113_3160348159_0>"),
    ({"rank": 1, "message": WORKER}, "no-space", "_new_shared"),
    ({"rank": 0, "message": BUS}, "bus-error", "Bus error"),
    ({"rank": 1, "signal": "SIGBUS", "message": "process 1 terminated with signal SIGBUS"}, "bus-error", "SIGBUS"),
    ({"rank": 0, "message": "RuntimeError: unable to open shared memory object </torch_1_2_0> in read-write mode: "
                            "Too many open files (24)"}, "shm-error", "Too many open files"),
])
def test_shared_memory_running_out_is_read_from_torchs_words(failure, kind, shown):
    cause = shm.cause(failure)
    assert cause["kind"] == kind and (shown in cause["line"] or shown == "_new_shared")


@pytest.mark.parametrize("failure", [
    {"rank": 1, "message": "RuntimeError: [gloo] Connection closed by peer [127.0.0.1]:5000"},
    {"rank": 0, "message": "OSError: [Errno 28] No space left on device: '/scratch/ckpt.pt'"},  # a full disk
    {"rank": 1, "signal": "SIGKILL", "message": "process 1 terminated with signal SIGKILL"},
    {"rank": 0, "message": ""},
])
def test_other_failures_are_not_blamed_on_shared_memory(failure):
    assert shm.cause(failure) is None


@pytest.mark.parametrize("launcher, per_rank, workers, ranks, copies", [
    ("spawn", False, 0, 2, 1),  # the parent's graph, handed to the ranks once
    ("spawn", False, 4, 2, 1),  # the ranks' workers get the shared copy
    ("spawn", True, 0, 2, 0),  # nothing through /dev/shm
    ("spawn", True, 2, 3, 3),  # each rank pickles its own graph to its workers
    ("torchrun", False, 2, 4, 4),
    ("torchrun", False, 0, 4, 0),
])
def test_the_graphs_copies_in_shared_memory_follow_the_launch(launcher, per_rank, workers, ranks, copies):
    assert shm.graph_copies(launcher, per_rank, workers, ranks) == copies


@pytest.mark.parametrize("needed, size", [(0, "128m"), (41 * MIB, "128m"), (64 * MIB, "128m"), (65 * MIB, "256m"),
                                          (102 * MIB, "256m"), (600 * MIB, "2g"), (3 << 30, "8g")])
def test_the_size_to_ask_for_has_room_for_twice_the_copies(needed, size):
    assert shm.suggested_size(needed) == size


def shm_facts(argv, failure, launcher="spawn", graph_bytes=100 * MIB):
    job = {"ok": False, "launcher": launcher, "world_size": 2, "graph": {"tensor_bytes": graph_bytes},
           "error": failure, "failed_ranks": [failure]}
    return {"job": job, "argv": argv, "python": "/venv/bin/python",
            "shm": {"path": "/dev/shm", "size_bytes": 64 * MIB, "free_bytes_at_start": 64 * MIB,
                    "free_bytes_at_end": 64 * MIB}}


def decide(facts):
    options = cli.build_parser().parse_args(facts["argv"])
    return [finding for rule in rules.RULES for finding in rule(facts, options)]


def test_the_mount_is_measured_at_a_named_moment(tmp_path):
    measured = shm.state("free_bytes_at_start", path=str(tmp_path))
    assert sorted(measured) == ["free_bytes_at_start", "path", "size_bytes"] and measured["size_bytes"] > 0
    assert shm.state(path=str(tmp_path / "absent")) == {"path": str(tmp_path / "absent"), "size_bytes": None,
                                                        "free_bytes": None}


def test_a_parent_that_cannot_hand_the_graph_over_is_ddp_shm_too_small_with_sizes():
    argv = ["--nprocs", "2", "--data", "/data/graph.pt"]
    [found] = decide(shm_facts(argv, {"rank": None, "pid": 7, "while": "starting the ranks", "message": PARENT}))
    evidence = found["evidence"]
    assert found["id"] == "ddp-shm-too-small" and found["severity"] == "error"
    assert evidence["dev_shm"]["size_bytes"] == 64 * MIB and evidence["graph_bytes"] == 100 * MIB
    assert evidence["needed_bytes_at_least"] == 100 * MIB and evidence["suggested_shm_size"] == "256m"
    assert evidence["failures"] == [{"kind": "no-space", "line": PARENT, "rank": None, "pid": 7,
                                     "while": "starting the ranks"}]
    assert "docker run --shm-size=256m" in found["fix"]
    assert found["fix"].endswith("ddp_neighbor_training.py --nprocs 2 --data /data/graph.pt --load-per-rank "
                                 "--num-workers 0")


def test_a_rank_whose_workers_ran_out_is_ddp_shm_too_small_and_its_peers_still_failed():
    argv = ["--data", "/g.pt", "--num-workers", "2"]
    facts = shm_facts(argv, {"rank": 1, "pid": 9, "time": 1.0, "message": WORKER})
    peer = {"rank": 0, "pid": 8, "time": 2.0, "message": "RuntimeError: Connection closed by peer"}
    facts["job"]["failed_ranks"].append(peer)
    found = decide(facts)
    assert [f["id"] for f in found] == ["ddp-shm-too-small", "ddp-rank-failed"]
    assert found[0]["evidence"]["failures"][0]["rank"] == 1 and found[1]["evidence"] == peer


def test_under_torchrun_the_fix_is_the_recipes_arguments_without_workers():
    facts = shm_facts(["--data", "/g.pt", "--num-workers", "4"], {"rank": 0, "message": BUS}, launcher="torchrun")
    [found] = decide(facts)
    assert found["evidence"]["graph_copies_in_shm"] == 2 and found["evidence"]["needed_bytes_at_least"] == 200 * MIB
    assert found["fix"].endswith("relaunch with these recipe arguments: --data /g.pt --num-workers 0")


def test_with_nothing_of_its_own_in_shared_memory_only_more_room_is_offered():
    facts = shm_facts(["--load-per-rank"], {"rank": 0, "message": BUS})
    [found] = decide(facts)
    assert "--load-per-rank" not in found["fix"] and found["fix"].startswith("give the job a bigger /dev/shm")


def test_a_graph_loaded_in_the_ranks_is_sized_by_its_file():
    facts = shm_facts(["--load-per-rank", "--num-workers", "1", "--data", "/g.pt"], {"rank": 0, "message": BUS})
    facts["job"]["graph"] = None
    facts["data_file_bytes"] = 30 * MIB
    [found] = decide(facts)
    assert (found["evidence"]["graph_bytes"], found["evidence"]["graph_bytes_from"]) == (30 * MIB, "file")
    assert found["evidence"]["needed_bytes_at_least"] == 60 * MIB


BASH = shutil.which("bash")
HOSTILE = ["$(:>marker)", "`:>marker`", "a;:>marker", "a'; :>marker; '", 'a"; :>marker; "', "a\n:>marker",
           "a|:>marker", "x' $(:>marker) 'y", "-- ;:>marker", "a&&:>marker"]


def every_fix(data):
    """Every fix the recipe's diagnostics build from a run whose --data names `data`, and the command each
    /dev/shm fix ends with, alone (pasted whole, the prose before it is no valid shell)."""
    argv = ["--nprocs", "2", "--data", data, "--num-workers", "2"]
    fixes = [found["fix"] for found in decide(shm_facts(argv, {"rank": None, "message": PARENT}))]
    fixes += [found["fix"] for found in decide(shm_facts(argv, {"rank": 0, "message": BUS}, launcher="torchrun"))]
    fixes += [fixes[0].split("without loader workers: ", 1)[1], fixes[1].split("recipe arguments: ", 1)[1]]
    return fixes + [cli.refusal("--data %s: no such file" % data).fix]


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_data_path_runs_nothing_when_a_fix_is_pasted(name, tmp_path):
    data = str(tmp_path / name / "graph.pt")
    paste = tmp_path / "elsewhere"
    paste.mkdir()
    fixes = every_fix(data)
    assert len(fixes) == 5
    for fix in fixes:
        subprocess.run([BASH, "-c", fix], cwd=paste, env={"PATH": str(paste / "no-commands")}, capture_output=True,
                       timeout=20)
        assert not list(tmp_path.rglob("marker")), fix


@pytest.mark.parametrize("name", HOSTILE[:5])
def test_the_per_rank_command_carries_each_word_whole(name, tmp_path):
    data = str(tmp_path / name / "graph.pt")
    fix = every_fix(data)[0]
    command = fix.split("without loader workers: ", 1)[1]
    assert shlex.split(command)[2:] == ["--nprocs", "2", "--data", data, "--load-per-rank", "--num-workers", "0"]


@pytest.mark.parametrize("argv, kept", [
    (["--nprocs", "2", "--data", "g.pt", "--num-workers", "4", "--epochs", "1"], ["--nprocs", "2", "--epochs", "1"]),
    (["--data=g.pt", "--num-workers=4", "--load-per-rank", "--store"], ["--store"]),
    (["--num-neighbors", "5,5"], ["--num-neighbors", "5,5"]),
])
def test_a_rerun_sets_the_data_and_workers_anew_and_keeps_every_other_word(argv, kept):
    assert rules.rerun_words(argv, dict.fromkeys(("--data", "--num-workers", "--load-per-rank"))) == kept


def test_a_relative_data_path_is_made_absolute_in_the_fix(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    [found] = decide(shm_facts(["--data", "graph.pt"], {"rank": None, "message": PARENT}))
    assert found["fix"].endswith("--data %s --load-per-rank --num-workers 0" % (tmp_path / "graph.pt"))
