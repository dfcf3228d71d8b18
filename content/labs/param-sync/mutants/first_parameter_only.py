# hashes only the first parameter tensor: a change in any later layer goes unnoticed
import hashlib

import torch
import torch.distributed as dist


def params_in_sync(model: torch.nn.Module) -> bool:
    first = next(model.parameters())
    digest = hashlib.sha256(first.detach().contiguous().numpy().tobytes()).digest()
    words = torch.frombuffer(bytearray(digest), dtype=torch.int64)
    high, low = words.clone(), words.clone()
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    return bool(torch.equal(high, low))
