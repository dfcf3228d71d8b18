"""Reference solution for param-sync (the project's tests only; never shown to students)."""

import hashlib

import torch
import torch.distributed as dist


def params_in_sync(model: torch.nn.Module) -> bool:
    digest = hashlib.sha256()
    for name, p in model.named_parameters():
        digest.update(name.encode())
        digest.update(p.detach().contiguous().view(torch.uint8).numpy())  # the bit patterns, not the values
    words = torch.frombuffer(bytearray(digest.digest()), dtype=torch.int64)  # 32 bytes: four int64
    high, low = words.clone(), words.clone()
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    return bool(torch.equal(high, low))  # every rank sees the same max and min: the same answer
