# accumulates the micro-batches correctly but never all-reduces: each rank steps on its own gradients
from collections.abc import Callable

import torch


def accumulate_and_sync(
    model: torch.nn.Module,
    micro_batches: list[tuple[torch.Tensor, torch.Tensor]],
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> None:
    model.zero_grad(set_to_none=True)
    k = len(micro_batches)
    for x, y in micro_batches:
        (loss_fn(model(x), y) / k).backward()
