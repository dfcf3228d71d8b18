"""A correct fine-tuning script written unlike the lab's reference: the learning rate set by hand from the
step count (no LambdaLR), get/set_model_state_dict and get/set_optimizer_state_dict, checkpoints in
``ckpt-<step>`` folders completed by a marker file rank 0 writes after a barrier, each epoch's batches
listed once and sliced when resuming, the loss summed with all_reduce then divided."""

import json
import math
import os
import sys

import task
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def learning_rate(i: int, peak: float, total: int) -> float:
    if i < task.WARMUP_STEPS:
        return peak * (i + 1) / task.WARMUP_STEPS
    t = (i - task.WARMUP_STEPS) / (total - 1 - task.WARMUP_STEPS)
    return peak * (task.MIN_LR_RATIO + (1 - task.MIN_LR_RATIO) * (1 + math.cos(math.pi * t)) / 2)


def newest(folder: str) -> int:
    done = [int(n.split("-")[1]) for n in os.listdir(folder) if n.startswith("ckpt-")]
    done = [s for s in done if os.path.exists(os.path.join(folder, f"ckpt-{s}", "COMPLETE"))]
    return max(done, default=0)


def run() -> int:
    dist.init_process_group(backend="gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    seed = int(os.environ["SEED"])
    folder = os.environ["CHECKPOINT_DIR"]
    every = int(os.environ["CHECKPOINT_EVERY"])

    model = task.build_model()
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.blocks:
        fully_shard(block, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    peak = task.BASE_LR * n
    opt = torch.optim.AdamW(model.parameters(), lr=peak, betas=task.BETAS, weight_decay=task.WEIGHT_DECAY)

    data = TensorDataset(task.corpus(seed, int(os.environ["CORPUS_SIZE"])))
    sampler = DistributedSampler(data, num_replicas=n, rank=rank, shuffle=True, seed=seed)
    loader = DataLoader(data, batch_size=task.LOCAL_BATCH, sampler=sampler)
    per_epoch = len(loader) // task.ACCUMULATION
    total = task.EPOCHS * per_epoch

    os.makedirs(folder, exist_ok=True)
    done = newest(folder)
    if done:
        state = {"model": get_model_state_dict(model), "optim": get_optimizer_state_dict(model, opt)}
        dcp.load(state, checkpoint_id=os.path.join(folder, f"ckpt-{done}"))
        set_model_state_dict(model, state["model"])
        set_optimizer_state_dict(model, opt, state["optim"])

    out = open(os.environ["METRICS_PATH"], "a") if rank == 0 else None  # noqa: SIM115
    step = done
    while step < total:
        epoch = step // per_epoch
        sampler.set_epoch(epoch)
        batches = [b for (b,) in loader]
        start = (step - epoch * per_epoch) * task.ACCUMULATION
        for j in range(start, len(batches), task.ACCUMULATION):
            lr = learning_rate(step, peak, total)
            for group in opt.param_groups:
                group["lr"] = lr
            summed = torch.tensor(0.0)
            for batch in batches[j : j + task.ACCUMULATION]:
                loss = task.loss_fn(model, batch) / task.ACCUMULATION
                loss.backward()
                summed += loss.detach()
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            dist.all_reduce(summed, op=dist.ReduceOp.SUM)
            if out is not None:
                value = summed.item() / n
                sys.stdout.write(f"step {step}/{total} loss={value:.5f}\n")
                sys.stdout.flush()
                out.write(json.dumps({"step": step, "loss": value, "lr": lr}) + "\n")
                out.flush()
            if step % every == 0:
                where = os.path.join(folder, f"ckpt-{step}")
                state = {"model": get_model_state_dict(model), "optim": get_optimizer_state_dict(model, opt)}
                dcp.save(state, checkpoint_id=where)
                dist.barrier()
                if rank == 0:
                    open(os.path.join(where, "COMPLETE"), "w").close()

    model.eval()
    with torch.no_grad():
        held = task.loss_fn(model, task.held_out(seed))
    if out is not None:
        out.write(json.dumps({"perplexity": math.exp(held.item())}) + "\n")
        out.close()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(run())
