"""Mid-epoch resume: checkpoint the shuffle (seed, epoch, next batch), skip the finished batches.

The loader's order comes from a torch Sampler seeded by (seed, epoch, rank), so after a crash
`set_epoch(epoch, start_step)` replays the same order from the first unfinished step. After every step rank 0
writes model, optimizer and position atomically (temporary file + os.replace), so a kill at
any moment leaves the last finished step on disk. The same Sampler works as `sampler=` of
NeighborLoader (used when pyg-lib or torch-sparse is installed) or of a plain DataLoader.

For the check only, the checkpoint also counts how often each seed was trained on; a run that
resumes correctly ends with every seed an epoch uses counted once ("seen_once": true). Equal steps
per rank leave NUM_NODES % (world_size * batch_size) seeds out of each epoch ("seeds_left_out_per_epoch");
ResumableSampler(..., pad=True) keeps them by repeating the first few seeds of the epoch's order.

    python resumable_epoch.py CKPT_DIR --epochs 2               # kill it, run it again: resumes
    # Elastic: the worker exits hard once at step 3, torchrun restarts it, it resumes there.
    torchrun --standalone --nproc_per_node 1 --max-restarts 1 resumable_epoch.py CKPT_DIR --crash-at-step 3
    torchrun --nproc_per_node 2 resumable_epoch.py CKPT_DIR      # DDP (gloo), same resume logic

Each step prints one line to stderr; the end prints one JSON line on stdout (rank 0).
"""

import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

import torch_geometric.typing
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader
from torch_geometric.nn import GraphSAGE

NUM_NODES, NUM_FEATURES, NUM_CLASSES = 240, 8, 3


class ResumableSampler(torch.utils.data.Sampler):
    """Rank `rank`'s seed positions for one epoch, from step `start_step` on.

    Like DistributedSampler.set_epoch, set_epoch(epoch, start_step) changes what the next
    iteration yields, so the loader is built once (NeighborLoader copies the edges when built).
    """

    def __init__(self, num_seeds, batch_size, seed, rank=0, world_size=1, pad=False):
        self.num_seeds, self.batch_size, self.seed = num_seeds, batch_size, seed
        self.rank, self.world_size = rank, world_size
        per_step = world_size * batch_size
        # Equal on every rank: drop the remainder, or (pad) fill the last step with repeated seeds.
        self.steps = -(-num_seeds // per_step) if pad else num_seeds // per_step
        self.set_epoch(0)

    def set_epoch(self, epoch, start_step=0):
        generator = torch.Generator().manual_seed(self.seed + epoch)
        order = torch.randperm(self.num_seeds, generator=generator)
        total = self.steps * self.world_size * self.batch_size
        used = torch.cat([order, order[:max(0, total - self.num_seeds)]])[:total]
        share = used.view(self.steps, self.world_size, self.batch_size)
        self.indices = share[start_step:, self.rank].reshape(-1).tolist()

    def __iter__(self):
        return iter(self.indices)

    def __len__(self):
        return len(self.indices)


def make_data():
    generator = torch.Generator().manual_seed(0)
    return Data(x=torch.randn(NUM_NODES, NUM_FEATURES, generator=generator),
                edge_index=torch.randint(0, NUM_NODES, (2, 4 * NUM_NODES), generator=generator),
                y=torch.randint(0, NUM_CLASSES, (NUM_NODES,), generator=generator))


def make_loader(data, sampler, batch_size):
    if torch_geometric.typing.WITH_PYG_LIB or torch_geometric.typing.WITH_TORCH_SPARSE:
        return NeighborLoader(data, num_neighbors=[5, 5], batch_size=batch_size,
                              sampler=sampler)  # input_nodes=None: position i is node i
    # No sampling backend: the same order over seed ids alone (the model then sees no edges).
    seeds = torch.utils.data.TensorDataset(torch.arange(data.num_nodes))
    return torch.utils.data.DataLoader(seeds, batch_size=batch_size, sampler=sampler)


def forward(model, data, batch):
    if isinstance(batch, Data):
        out = model(batch.x, batch.edge_index)[:batch.batch_size]
        return out, batch.y[:batch.batch_size], batch.n_id[:batch.batch_size]
    (nodes,) = batch
    empty = torch.empty((2, 0), dtype=torch.long)
    return model(data.x[nodes], empty), data.y[nodes], nodes


def save_atomically(state, path):
    tmp = path + '.tmp'
    torch.save(state, tmp)
    os.replace(tmp, path)  # a reader sees the old file or the new one, never half of one


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('checkpoint_dir')
    parser.add_argument('--epochs', type=int, default=2)
    parser.add_argument('--batch-size', type=int, default=16)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--crash-at-step', type=int, help='exit hard at this global step, once')
    args = parser.parse_args(argv)

    distributed = 'WORLD_SIZE' in os.environ  # set by torchrun
    if distributed:
        dist.init_process_group('gloo')
    rank, world_size = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    os.makedirs(args.checkpoint_dir, exist_ok=True)  # every rank: any of them may save first
    path = os.path.join(args.checkpoint_dir, 'checkpoint.pt')

    data = make_data()
    torch.manual_seed(0)
    model = GraphSAGE(NUM_FEATURES, hidden_channels=16, num_layers=2, out_channels=NUM_CLASSES)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    state = {'epoch': 0, 'step': 0, 'seen': torch.zeros(args.epochs, NUM_NODES, dtype=torch.long)}
    if os.path.exists(path):  # every rank loads the same file
        checkpoint = torch.load(path, map_location='cpu')
        model.load_state_dict(checkpoint['model'])
        optimizer.load_state_dict(checkpoint['optimizer'])
        state = checkpoint['state']
        print(f'rank {rank}: resuming at epoch {state["epoch"]} step {state["step"]}',
              file=sys.stderr)
    if distributed:
        model = DistributedDataParallel(model)
    module = model.module if distributed else model
    restart = int(os.environ.get('TORCHELASTIC_RESTART_COUNT', '0'))

    sampler = ResumableSampler(NUM_NODES, args.batch_size, args.seed, rank, world_size)
    loader = make_loader(data, sampler, args.batch_size)  # built once
    for epoch in range(state['epoch'], args.epochs):
        start_step = state['step'] if epoch == state['epoch'] else 0
        sampler.set_epoch(epoch, start_step)  # skips the steps the checkpoint has done
        step = start_step
        for batch in loader:
            if (args.crash_at_step == step + epoch * sampler.steps and restart == 0
                    and rank == world_size - 1 and not os.path.exists(path + '.crashed')):
                open(path + '.crashed', 'w').close()
                os._exit(17)  # as abrupt as a kill: no cleanup, no final save
            optimizer.zero_grad()
            out, target, seeds = forward(model, data, batch)
            F.cross_entropy(out, target).backward()
            optimizer.step()
            seen = torch.zeros(NUM_NODES, dtype=torch.long).index_add_(
                0, seeds, torch.ones_like(seeds))
            if distributed:
                dist.all_reduce(seen)  # bookkeeping for the check: every rank's seeds
            state['seen'][epoch] += seen
            step += 1
            state.update(epoch=epoch, step=step)
            if step == sampler.steps:
                state.update(epoch=epoch + 1, step=0)
            if rank == 0:
                save_atomically({'model': module.state_dict(),
                                 'optimizer': optimizer.state_dict(), 'state': state}, path)
            if distributed:
                dist.barrier()  # nobody runs ahead of the saved step
            print(f'rank {rank}: epoch {epoch} step {step}/{sampler.steps} done', file=sys.stderr,
                  flush=True)

    if rank == 0:
        counted = state['seen']
        usable = sampler.steps * world_size * args.batch_size  # seeds used per epoch
        print(json.dumps({'epochs': args.epochs, 'steps_per_epoch': sampler.steps,
                          'world_size': world_size, 'seeds_per_epoch': usable,
                          'seeds_left_out_per_epoch': NUM_NODES - usable,
                          'seen_once': bool(((counted == 0) | (counted == 1)).all()
                                            and (counted.sum(1) == usable).all()),
                          'seen_twice_or_more': int((counted > 1).sum())}))
    if distributed:
        del model, optimizer  # free DDP before its process group
        dist.destroy_process_group()


if __name__ == '__main__':
    main()
