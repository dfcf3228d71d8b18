# sums the gradients with all_reduce but never divides by the world size
import torch
import torch.distributed as dist


def sync_gradients(model: torch.nn.Module) -> None:
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
