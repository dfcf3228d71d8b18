"""A torchrun training script that survives a crash.

Run as ``torchrun --nnodes=M --nproc-per-node=P train.py``: every process runs this whole file
as ``__main__``. The environment holds torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...) and the job's settings: SEED, INIT_SEED,
TOTAL_STEPS, CHECKPOINT_EVERY, CHECKPOINT_DIR, FINAL_MODEL_PATH (see the statement).

To do:
  1. if any variable is missing: one line on stderr naming each missing one, then sys.exit(2);
  2. dist.init_process_group("gloo");
  3. build the model (from INIT_SEED, new at every launch) and the optimizer from ``task``; load the
     newest COMPLETE checkpoint in CHECKPOINT_DIR, if there is one (model, optimizer state, number
     of steps done);
  4. train steps start .. TOTAL_STEPS - 1 on task.batch(seed, step, rank, world_size), with the
     gradients averaged over the ranks (DistributedDataParallel is fine);
  5. rank 0 saves a checkpoint after every CHECKPOINT_EVERY steps, as CHECKPOINT_DIR/step-<n>.pt
     (n: the number of steps done), so that a crash while writing it never leaves a half-written
     file under that name;
  6. rank 0 saves model.state_dict() to FINAL_MODEL_PATH at the end.
"""

import os
import sys

import task
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    rank = int(os.environ["RANK"])  # what if it is missing?
    world_size = int(os.environ["WORLD_SIZE"])
    seed = int(os.environ["SEED"])
    total = int(os.environ["TOTAL_STEPS"])
    dist.init_process_group("gloo")
    model = task.build_model(int(os.environ["INIT_SEED"]))
    optimizer = task.make_optimizer(model)
    ddp = DistributedDataParallel(model)
    for step in range(total):  # always from step 0: no checkpoints yet
        x, y = task.batch(seed, step, rank, world_size)
        optimizer.zero_grad()
        task.loss_fn(ddp, x, y).backward()
        optimizer.step()
    if rank == 0:
        torch.save(model.state_dict(), os.environ["FINAL_MODEL_PATH"])
    dist.destroy_process_group()
    print("done", file=sys.stderr)


if __name__ == "__main__":
    main()
