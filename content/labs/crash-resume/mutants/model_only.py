# checkpoints the model but not the optimizer: SGD's momentum restarts from zero after a crash
"""A torchrun training script with checkpoints."""

import os
import re
import sys

import task
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

REQUIRED = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "SEED",
    "INIT_SEED",
    "TOTAL_STEPS",
    "CHECKPOINT_EVERY",
    "CHECKPOINT_DIR",
    "FINAL_MODEL_PATH",
)
CHECKPOINT = re.compile(r"^step-(\d+)\.pt$")


def read_environment() -> dict[str, str]:
    missing = [name for name in REQUIRED if not os.environ.get(name)]
    if missing:
        print(
            f"error: environment variable(s) {', '.join(missing)} not set; launch this script with torchrun",
            file=sys.stderr,
        )
        sys.exit(2)
    return {name: os.environ[name] for name in REQUIRED}


def save_atomically(obj: object, path: str) -> None:
    """Write to a temporary name, flush it to disk, then rename: a reader sees the old file or the whole new one."""
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    folder = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def latest_checkpoint(folder: str) -> str | None:
    steps = [(int(m.group(1)), name) for name in os.listdir(folder) if (m := CHECKPOINT.match(name))]
    return os.path.join(folder, max(steps)[1]) if steps else None


def main() -> None:
    env = read_environment()
    rank, world_size = int(env["RANK"]), int(env["WORLD_SIZE"])
    seed, total, every = int(env["SEED"]), int(env["TOTAL_STEPS"]), int(env["CHECKPOINT_EVERY"])
    folder = env["CHECKPOINT_DIR"]
    dist.init_process_group("gloo")  # env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    try:
        model = task.build_model(int(env["INIT_SEED"]))
        optimizer = task.make_optimizer(model)
        start = 0
        os.makedirs(folder, exist_ok=True)
        path = latest_checkpoint(folder)
        if path is not None:
            state = torch.load(path, weights_only=True)
            model.load_state_dict(state["model"])
            start = int(state["step"])
        ddp = DistributedDataParallel(model)
        for step in range(start, total):
            x, y = task.batch(seed, step, rank, world_size)
            optimizer.zero_grad()
            task.loss_fn(ddp, x, y).backward()
            optimizer.step()
            done = step + 1
            if done % every == 0 and rank == 0:
                state = {"step": done, "model": model.state_dict()}
                save_atomically(state, os.path.join(folder, f"step-{done:06d}.pt"))
        if rank == 0:
            save_atomically(model.state_dict(), env["FINAL_MODEL_PATH"])
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
