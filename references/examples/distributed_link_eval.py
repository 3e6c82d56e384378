"""Distributed link-prediction evaluation: MRR and Hits@K summed over ranks, divided once.

Each positive test edge (src, dst) is ranked against NUM_NEGATIVES negative destinations for
the same source (rank = 1 + number of negatives scoring at least as high: ties count against
the positive). Each rank scores an unpadded share of the test edges (`tensor_split`, sizes may
differ: evaluation has no gradient all-reduce), sums reciprocal ranks, hits and the count, and
one all_reduce of that vector gives the exact figures a single process computes. Averaging the
ranks' own MRRs instead is wrong when the shares differ in size; the script shows by how much.

    python distributed_link_eval.py      # 2 gloo ranks on CPU; prints one JSON line
"""

import json
import os
import socket
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

NUM_NODES, DIM, NUM_TEST, NUM_NEGATIVES, HITS_AT = 500, 16, 301, 50, (1, 10)


def make_problem():
    """Fixed embeddings (a trained model's output in real code), test edges and negatives."""
    generator = torch.Generator().manual_seed(0)
    embedding = torch.randn(NUM_NODES, DIM, generator=generator)
    src = torch.randint(0, NUM_NODES, (NUM_TEST,), generator=generator)
    dst = torch.randint(0, NUM_NODES, (NUM_TEST,), generator=generator)
    negatives = torch.randint(0, NUM_NODES, (NUM_TEST, NUM_NEGATIVES), generator=generator)
    return embedding, src, dst, negatives


def ranking_sums(embedding, src, dst, negatives):
    """[sum of 1/rank, hits@k for each k, count] for these test edges."""
    positive = (embedding[src] * embedding[dst]).sum(-1)                  # [n]
    negative = (embedding[src].unsqueeze(1) * embedding[negatives]).sum(-1)  # [n, NUM_NEGATIVES]
    rank = 1 + (negative >= positive.unsqueeze(1)).sum(1)
    hits = [(rank <= k).sum() for k in HITS_AT]
    return torch.stack([(1.0 / rank.double()).sum(), *map(torch.as_tensor, hits),
                        torch.tensor(src.numel())]).double()


def metrics(sums):
    count = sums[-1]
    return {'mrr': float(sums[0] / count),
            **{f'hits@{k}': float(sums[1 + i] / count) for i, k in enumerate(HITS_AT)},
            'count': int(count)}


def run(rank, world_size, port, out_dir):
    dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{port}', rank=rank,
                            world_size=world_size)
    embedding, src, dst, negatives = make_problem()
    share = torch.arange(NUM_TEST).tensor_split(world_size)[rank]  # unpadded, uneven is fine
    sums = ranking_sums(embedding, src[share], dst[share], negatives[share])
    own_mrr = (sums[0] / sums[-1]).reshape(1)
    dist.all_reduce(sums)  # one collective for every metric
    mrrs = [torch.zeros(1, dtype=torch.double) for _ in range(world_size)]
    dist.all_gather(mrrs, own_mrr)  # only to show the wrong way: a mean of per-rank MRRs
    if rank == 0:
        torch.save({'sums': sums, 'mean_of_rank_mrrs': float(torch.cat(mrrs).mean())},
                   os.path.join(out_dir, 'eval.pt'))
    dist.barrier()  # every rank done with the group before any tears it down (gloo's threads)
    dist.destroy_process_group()


def main():
    world_size = 2
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(run, args=(world_size, port, out_dir), nprocs=world_size)
        result = torch.load(os.path.join(out_dir, 'eval.pt'))
    single = metrics(ranking_sums(*make_problem()))
    distributed = metrics(result['sums'])
    print(json.dumps({'world_size': world_size, 'single_process': single,
                      'distributed': distributed,
                      'equal': all(abs(single[k] - distributed[k]) < 1e-12 for k in single),
                      'mean_of_rank_mrrs': result['mean_of_rank_mrrs']}))


if __name__ == '__main__':
    main()
