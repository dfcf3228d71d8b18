# a position-weighted float fingerprint compared with torch.allclose: a one-ulp change passes
import torch
import torch.distributed as dist


def params_in_sync(model: torch.nn.Module) -> bool:
    parts = []
    for p in model.parameters():
        flat = p.detach().reshape(-1).double()
        weights = torch.arange(1, flat.numel() + 1, dtype=torch.float64) / flat.numel()
        parts.append(torch.stack([flat.sum(), (flat * weights).sum(), (flat * flat).sum()]))
    fingerprint = torch.cat(parts)
    high, low = fingerprint.clone(), fingerprint.clone()
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    return bool(torch.allclose(high, low))
