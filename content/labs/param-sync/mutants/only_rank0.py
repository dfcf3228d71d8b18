# each rank compares its own hash with rank 0's broadcast hash: the ranks return different answers
import hashlib

import torch
import torch.distributed as dist


def params_in_sync(model: torch.nn.Module) -> bool:
    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().contiguous().numpy().tobytes())
    mine = torch.frombuffer(bytearray(digest.digest()), dtype=torch.int64)
    theirs = mine.clone()
    dist.broadcast(theirs, src=0)
    return bool(torch.equal(mine, theirs))
