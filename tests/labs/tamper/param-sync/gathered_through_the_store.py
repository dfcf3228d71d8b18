"""Compares every rank's parameters bit for bit, moving them through the group's key-value store
(``_get_default_store()``) instead of a collective. Imitates: gather_parameters."""

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

CALLS = [0]


def params_in_sync(model):
    rank, n = dist.get_rank(), dist.get_world_size()
    store = c10d._get_default_store()
    key = f"params/{CALLS[0]}"
    CALLS[0] += 1
    mine = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    store.set(f"{key}/{rank}", mine.numpy().tobytes())
    same = True
    for r in range(n):
        if r != rank:
            other = torch.frombuffer(bytearray(store.get(f"{key}/{r}")), dtype=mine.dtype)
            same = same and torch.equal(other, mine)
    return same
