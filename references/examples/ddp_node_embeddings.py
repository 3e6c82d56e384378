"""Learnable node embeddings (torch.nn.Embedding) under DDP: dense against sparse gradients.

Featureless graphs often learn one vector per node. Under DDP every rank holds the whole table,
and the gradient all-reduce moves either the whole table (dense) or the rows the batch touched
(`Embedding(..., sparse=True)`). This script trains the same model three ways on 2 gloo ranks
(CPU), then checks each against one process training on both ranks' batches at once:

- dense gradients + SGD
- sparse gradients + SGD
- sparse gradients + SparseAdam for the table, Adam for the rest (Adam itself refuses sparse
  gradients; the script records its error)

    python ddp_node_embeddings.py        # prints one JSON line
"""

import json
import os
import socket
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

NUM_NODES, DIM, STEPS, BATCH = 1000, 16, 5, 32


class NodeModel(torch.nn.Module):
    def __init__(self, sparse):
        super().__init__()
        torch.manual_seed(0)  # the same initial weights everywhere
        self.embedding = torch.nn.Embedding(NUM_NODES, DIM, sparse=sparse)
        self.head = torch.nn.Linear(DIM, 1)

    def forward(self, nodes):
        return self.head(self.embedding(nodes)).squeeze(-1)


def batches(rank, world_size):
    """Rank r's node ids and targets for each step (disjoint shares of one global batch)."""
    generator = torch.Generator().manual_seed(1)
    for _ in range(STEPS):
        nodes = torch.randint(0, NUM_NODES, (world_size * BATCH,), generator=generator)
        target = torch.randn(world_size * BATCH, generator=generator)
        share = slice(rank * BATCH, (rank + 1) * BATCH) if rank is not None else slice(None)
        yield nodes[share], target[share]


def optimizers(model, kind):
    if kind == 'sparse-sparseadam':  # SparseAdam for the sparse table, Adam for the rest
        return [torch.optim.SparseAdam(list(model.embedding.parameters()), lr=0.01),
                torch.optim.Adam(list(model.head.parameters()), lr=0.01)]
    return [torch.optim.SGD(model.parameters(), lr=0.5)]


def train(model, kind, rank=None, world_size=1):
    opts = optimizers(model.module if isinstance(model, DistributedDataParallel) else model, kind)
    for nodes, target in batches(rank, world_size):
        for opt in opts:
            opt.zero_grad()
        torch.nn.functional.mse_loss(model(nodes), target).backward()
        for opt in opts:
            opt.step()
    return opts


def adam_on_sparse_gradients():
    model = NodeModel(sparse=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    nodes, target = next(batches(None, 1))
    torch.nn.functional.mse_loss(model(nodes), target).backward()
    try:
        optimizer.step()
    except RuntimeError as error:
        return str(error).splitlines()[0]
    return 'no error'


def run(rank, world_size, port, out_dir):
    dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{port}', rank=rank,
                            world_size=world_size)
    for kind in ('dense-sgd', 'sparse-sgd', 'sparse-sparseadam'):
        model = DistributedDataParallel(NodeModel(sparse=kind.startswith('sparse')))
        opts = train(model, kind, rank, world_size)
        weight = model.module.embedding.weight.detach()
        grad = model.module.embedding.weight.grad  # after the all-reduce of the last step
        grad_rows = grad.coalesce().indices().numel() if grad.is_sparse else grad.size(0)
        gathered = [torch.empty_like(weight) for _ in range(world_size)]
        dist.all_gather(gathered, weight)  # are the ranks' tables still identical?
        if rank == 0:
            state = sum(t.numel() for s in opts[0].state.values() for t in s.values()
                        if torch.is_tensor(t) and t.dim() > 0)
            torch.save({'weight': weight, 'ranks_equal': all(g.equal(weight) for g in gathered),
                        'grad_rows': grad_rows,
                        'optimizer_state_numel': state}, os.path.join(out_dir, kind + '.pt'))
        del model, opts
    dist.barrier()  # every rank done with the group before any tears it down (gloo's threads)
    dist.destroy_process_group()


def main():
    world_size = 2
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(run, args=(world_size, port, out_dir), nprocs=world_size)
        report = {'table_numel': NUM_NODES * DIM, 'adam_on_sparse': adam_on_sparse_gradients()}
        for kind in ('dense-sgd', 'sparse-sgd', 'sparse-sparseadam'):
            ddp = torch.load(os.path.join(out_dir, kind + '.pt'))
            single = NodeModel(sparse=kind.startswith('sparse'))
            train(single, kind, rank=None, world_size=world_size)  # both shares in one batch
            report[kind] = {
                'ranks_equal': ddp['ranks_equal'],
                'max_diff_vs_single_process': float(
                    (ddp['weight'] - single.embedding.weight.detach()).abs().max()),
                'optimizer_state_numel': ddp['optimizer_state_numel'],
                'allreduced_grad_rows': ddp['grad_rows'],
            }
    print(json.dumps(report))


if __name__ == '__main__':
    main()
