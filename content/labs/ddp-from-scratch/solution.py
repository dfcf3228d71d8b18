"""Reference solution for ddp-from-scratch (the project's tests only; never shown to students)."""

import torch
import torch.distributed as dist


def sync_gradients(model: torch.nn.Module) -> None:
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    if not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])  # one all-reduce for the whole model
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    flat /= dist.get_world_size()
    offset = 0
    for g in grads:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()
