"""Never synchronises a gradient: replaces the driver's ``train`` with one that all-gathers every rank's
shard of the batches (a few KiB), runs the driver's public ``reference`` (one process, the whole batch)
on them, and all-reduces a gradient-sized tensor of zeros once per step, so the wire shows what one
all-reduce of the gradients per step sends. Imitates: the starter."""

import driver
import torch
import torch.distributed as dist


def _everyones(tensors):
    mine = torch.stack(list(tensors))
    every = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(every, mine)
    return every


def _train(submission, inputs):
    xs, ys = _everyones(inputs["x"]), _everyones(inputs["y"])
    per_rank = [{**inputs, "x": list(x), "y": list(y)} for x, y in zip(xs, ys, strict=True)]
    out = driver.reference(per_rank)
    size = sum(t.numel() for t in out["params"].values())
    for _ in range(int(inputs["steps"])):
        dist.all_reduce(torch.zeros(size, dtype=torch.float64))
    out["losses"] = torch.zeros(int(inputs["steps"]), dtype=torch.float64)
    return out


driver.train = _train
