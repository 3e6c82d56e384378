"""The DDP recipe's reading of its launch, in process: the launcher's variables (RANK, WORLD_SIZE, LOCAL_*,
MASTER_*), a half-set launch, the local rank count, threads per rank, the backend for the visible GPUs, and
the arithmetic that shards the training seeds."""

import pytest

import ddp_neighbor_training as recipe

MASTER = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


def launch(**variables):
    return dict(MASTER, **variables)


@pytest.mark.parametrize("environ, expected", [
    (launch(RANK="0", WORLD_SIZE="1"), (0, 1, 0)),
    (launch(RANK="3", WORLD_SIZE="4", LOCAL_RANK="1", LOCAL_WORLD_SIZE="2"), (3, 4, 1)),
    (launch(RANK="5", WORLD_SIZE="8", LOCAL_RANK="5"), (5, 8, 5)),  # no LOCAL_WORLD_SIZE: bounded by the world
])
def test_a_torchrun_launch_is_read(environ, expected):
    assert recipe.launched(environ) and recipe.launch_variables(environ) == expected


@pytest.mark.parametrize("environ, named", [
    (launch(RANK="abc", WORLD_SIZE="2"), "RANK='abc' is not a whole number"),
    (launch(RANK="\uff10", WORLD_SIZE="2"), "RANK='\uff10' is not a whole number"),  # full-width zero
    (launch(RANK="", WORLD_SIZE="2"), "RANK='' is not a whole number"),
    (launch(RANK="5", WORLD_SIZE="2"), "RANK=5 is outside 0..1"),
    (launch(RANK="0", WORLD_SIZE="2", LOCAL_RANK="3", LOCAL_WORLD_SIZE="2"), "LOCAL_RANK=3 is outside 0..1"),
    (launch(RANK="0", WORLD_SIZE="2", LOCAL_RANK="3"), "LOCAL_RANK=3 is outside 0..1"),
    (launch(RANK="0", WORLD_SIZE="2", LOCAL_WORLD_SIZE="3"), "LOCAL_WORLD_SIZE=3 is outside 1..2"),
    (launch(RANK="0", WORLD_SIZE="0"), "WORLD_SIZE=0 is outside 1.."),
    (launch(RANK="0", WORLD_SIZE=str(2 ** 66)), "WORLD_SIZE=%d is outside 1.." % 2 ** 66),
    (launch(RANK="0", WORLD_SIZE="9" * 5000), "characters cut"),  # int() refuses 4,300+ digits
    (launch(RANK="0", WORLD_SIZE="1", MASTER_PORT="70000"), "MASTER_PORT=70000 is outside 1..65535"),
    (launch(RANK="0", WORLD_SIZE="1", MASTER_PORT="0"), "MASTER_PORT=0 is outside 1..65535"),
    (launch(RANK="0", WORLD_SIZE="1", MASTER_ADDR=""), "MASTER_ADDR is not"),
    ({"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "h"}, "MASTER_PORT is not"),
])
def test_a_bad_launch_variable_is_refused_naming_it(environ, named):
    with pytest.raises(recipe.UsageError) as refused:
        recipe.launch_variables(environ)
    message = str(refused.value)
    assert named in message and len(message) < 1000 and "\n" not in message


@pytest.mark.parametrize("environ, present, absent", [
    (launch(RANK="0"), "RANK=0", "WORLD_SIZE"),
    (launch(WORLD_SIZE="2"), "WORLD_SIZE=2", "RANK"),
    ({"RANK": "1"}, "RANK=1", "WORLD_SIZE"),
])
def test_half_a_launch_is_refused_not_ignored(environ, present, absent):
    """A stray RANK (or WORLD_SIZE) makes the process a launched rank that cannot run: refused, saying why it is
    not ignored and both ways out."""
    assert recipe.launched(environ)
    with pytest.raises(recipe.UsageError) as refused:
        recipe.launch_variables(environ)
    message = str(refused.value)
    assert message.startswith("%s is set but %s is not" % (present, absent))
    assert "Refused rather than ignored" in message and "unset %s to self-spawn" % present.split("=")[0] in message


@pytest.mark.parametrize("environ", [{}, {"LOCAL_RANK": "0", "MASTER_ADDR": "x"}, {"SLURM_PROCID": "0"}])
def test_without_rank_or_world_size_the_recipe_spawns_its_own_ranks(environ):
    assert not recipe.launched(environ)


@pytest.mark.parametrize("environ, world_size, expected", [
    ({"LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1"}, 8, 4),
    ({"SLURM_NTASKS_PER_NODE": "4", "SLURM_JOB_NUM_NODES": "2"}, 8, 4),
    ({"SLURM_JOB_NUM_NODES": "1"}, 2, 2),
    ({}, 3, 3),
    ({"LOCAL_WORLD_SIZE": "0", "SLURM_NNODES": "1"}, 2, 2),  # a zero is no count
])
def test_the_local_rank_count_comes_from_the_launcher(environ, world_size, expected):
    assert recipe.local_world_size_from_env(environ, world_size) == expected


@pytest.mark.parametrize("environ", [{"GROUP_RANK": "1"}, {"SLURM_JOB_NUM_NODES": "2"}, {"SLURM_NNODES": "3"}])
def test_an_unknown_local_count_on_several_nodes_is_refused(environ):
    with pytest.raises(recipe.UsageError) as refused:
        recipe.local_world_size_from_env(environ, 8)
    assert "LOCAL_WORLD_SIZE is not set and this job spans several nodes" in str(refused.value)
    assert "LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE" in str(refused.value)


@pytest.mark.parametrize("requested, local_ranks, environ, cores, expected", [
    (3, 2, {}, 16, 3),
    (0, 2, {}, 16, 8),
    (0, 3, {}, 16, 5),
    (0, 8, {}, 2, 1),  # never zero threads
    (0, 2, {"OMP_NUM_THREADS": "1"}, 16, None),  # torch reads OMP_NUM_THREADS itself
    (4, 2, {"OMP_NUM_THREADS": "1"}, 16, 4),  # --threads wins
])
def test_threads_per_cpu_rank(requested, local_ranks, environ, cores, expected):
    assert recipe.threads_per_rank(requested, local_ranks, environ, cores) == expected


@pytest.mark.parametrize("requested, local_ranks, gpus, expected", [
    ("auto", 4, 4, "nccl"), ("auto", 2, 0, "gloo"), ("gloo", 8, 4, "gloo"), ("nccl", 2, 2, "nccl"),
    ("auto", 8, 4, "UsageError: --backend auto: 4 GPU(s) visible but 8 ranks"),
    ("nccl", 2, 0, "UsageError: --backend nccl needs one GPU per local rank: 2 ranks, 0 GPUs"),
])
def test_the_backend_for_the_visible_gpus(requested, local_ranks, gpus, expected):
    try:
        chosen = recipe.choose_backend(requested, local_ranks, gpus)
    except recipe.UsageError as error:
        chosen = "UsageError: %s" % error
    assert chosen.startswith(expected)


@pytest.mark.parametrize("count, world_size", [(241, 2), (181, 2), (10, 3), (7, 7), (3, 5), (0, 2), (1000, 6)])
def test_shards_are_disjoint_cover_the_seeds_and_differ_by_at_most_one(count, world_size):
    bounds = [recipe.shard_bounds(count, rank, world_size) for rank in range(world_size)]
    assert bounds[0][0] == 0 and bounds[-1][1] == count
    assert all(stop == start for (_, stop), (start, _) in zip(bounds, bounds[1:]))  # contiguous, no gap or overlap
    sizes = [stop - start for start, stop in bounds]
    assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)  # the larger ones first


def test_shards_cut_as_torch_tensor_split_does():
    """241 seeds on 2 ranks: 121 and 120, so rank 0 takes one more batch of 30 (the uneven-step path)."""
    assert [recipe.shard_bounds(241, rank, 2) for rank in range(2)] == [(0, 121), (121, 241)]
    assert [recipe.shard_bounds(10, rank, 4) for rank in range(4)] == [(0, 3), (3, 6), (6, 8), (8, 10)]


@pytest.mark.parametrize("base, expected", [
    ("/tmp", "/tmp"),
    ("/scratch/job-1234/tmp", "/scratch/job-1234/tmp"),
    ("/" + "t" * 61, "/" + "t" * 61),  # the longest whose loader sockets still fit
    ("/" + "t" * 62, "/tmp"),
    ("/tmp/pytest-of-someone/pytest-123/test_copied_alone_it_trains_an0/tmp", "/tmp"),
])
def test_a_temp_dir_too_long_for_loader_sockets_moves_to_tmp(base, expected):
    """<folder>/pymp-XXXXXXXX/listener-XXXXXXXX must fit AF_UNIX's 107 characters, or loader workers hang."""
    assert recipe.temp_base(base) == expected
    folder = recipe.temp_base(base) + "/ddp-12345678"
    assert len(folder + "/pymp-12345678/listener-12345678") <= 107
