"""Uneven shares under Join, a checkpoint written by rank 0, and a resume on every rank.

Rank 0 runs one step more per epoch than rank 1; inside `Join([model])` the finished rank shadows
the other's extra all-reduce with zero gradients instead of hanging. After each epoch rank 0 saves
the unwrapped module (`model.module.state_dict()`, no `module.` prefix), the optimizer and the epoch;
the others wait at a barrier. To resume, every rank builds the same model, loads the checkpoint with
map_location before wrapping it in DDP, and continues from the saved epoch + 1 (calling
sampler.set_epoch(epoch) from there when a DistributedSampler orders the batches).

    python ddp_join_checkpoint.py      # 2 gloo ranks on CPU; prints one JSON line
"""
import json
import os
import socket
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel


def make_model():
    torch.manual_seed(0)
    return torch.nn.Linear(4, 1)


def run(rank, world_size, port, path, results):
    dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{port}', rank=rank,
                            world_size=world_size)
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    steps = 3 if rank == 0 else 2  # uneven shares: rank 0 has one batch more
    for epoch in range(2):
        with Join([model]):
            for _ in range(steps):
                optimizer.zero_grad()
                model(torch.randn(8, 4)).pow(2).mean().backward()
                optimizer.step()
        if rank == 0:
            torch.save({'model': model.module.state_dict(), 'optimizer': optimizer.state_dict(),
                        'epoch': epoch}, path)
        dist.barrier()  # nobody reads the file before rank 0 has written it
    trained = model.module.state_dict()
    del model, optimizer

    checkpoint = torch.load(path, map_location='cpu')  # this rank's device in GPU code
    restored = make_model()
    restored.load_state_dict(checkpoint['model'])
    model = DistributedDataParallel(restored)
    assert all(torch.equal(trained[k], v) for k, v in model.module.state_dict().items())
    results.put({'rank': rank, 'steps_per_epoch': steps, 'start_epoch': checkpoint['epoch'] + 1})
    del model
    dist.destroy_process_group()


if __name__ == '__main__':
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    results = mp.get_context('spawn').SimpleQueue()
    with tempfile.TemporaryDirectory() as folder:
        mp.spawn(run, args=(2, port, os.path.join(folder, 'checkpoint.pt'), results), nprocs=2)
    print(json.dumps({'ranks': sorted((results.get() for _ in range(2)), key=lambda r: r['rank'])}))
