# calls backward once, after the loop, so only the last micro-batch's loss reaches .grad
from collections.abc import Callable

import torch
import torch.distributed as dist


def accumulate_and_sync(
    model: torch.nn.Module,
    micro_batches: list[tuple[torch.Tensor, torch.Tensor]],
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> None:
    model.zero_grad(set_to_none=True)
    k = len(micro_batches)
    for x, y in micro_batches:
        loss = loss_fn(model(x), y) / k
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
        p.grad /= dist.get_world_size()
