# never clears .grad, so every step accumulates on top of the previous steps' gradients
from collections.abc import Callable

import torch
import torch.distributed as dist


def accumulate_and_sync(
    model: torch.nn.Module,
    micro_batches: list[tuple[torch.Tensor, torch.Tensor]],
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> None:
    k = len(micro_batches)
    for x, y in micro_batches:
        (loss_fn(model(x), y) / k).backward()
    for p in model.parameters():
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
        p.grad /= dist.get_world_size()
