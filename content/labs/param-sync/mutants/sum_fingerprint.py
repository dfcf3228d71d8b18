# the exercise's weak fingerprint: the sum of all parameters (float64), compared by all-reduce MAX/MIN
import torch
import torch.distributed as dist


def params_in_sync(model: torch.nn.Module) -> bool:
    total = sum(p.detach().double().sum() for p in model.parameters())
    high = torch.tensor([float(total)], dtype=torch.float64)
    low = high.clone()
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    return bool(high == low)
