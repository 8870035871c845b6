"""One rank of a two-rank torch.distributed (gloo, CPU) job that checkpoints with the SDK.

Run by tests/sdk/test_real_libraries.py with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and the
Tessera variables set per rank: argv = checkpoint folder, total steps, step at which rank 1 gets
SIGTERM (0: never). Prints "start <n>", then "saved <step>" per checkpoint, then "done".
"""

import os
import signal
import sys

import torch
import torch.distributed as dist

import tessera_checkpoint.torch as tc
from tessera_checkpoint import Checkpointer


def main() -> None:
    folder, total, sigterm_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    parallel = torch.nn.parallel.DistributedDataParallel(model)
    ckpt = Checkpointer.from_env(dir=folder, coordinator=tc.distributed())
    start = tc.resume(ckpt, model=model, optimizer=optimizer)
    print(f"start {start}", flush=True)
    for step in range(start + 1, total + 1):
        loss = parallel(torch.full((2, 4), float(step))).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if rank == 1 and step == sigterm_at:
            os.kill(os.getpid(), signal.SIGTERM)  # the other rank is not told: the SDK makes them agree
        try:
            if tc.checkpoint_step(ckpt, step, model=model, optimizer=optimizer):
                print(f"saved {step}", flush=True)
        except SystemExit:
            print(f"saved {step}", flush=True)
            dist.destroy_process_group()
            raise
    print(f"done {model.weight.sum().item():.6f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
