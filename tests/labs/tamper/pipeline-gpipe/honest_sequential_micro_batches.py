# runs each micro-batch's forward and backward through the whole pipeline before the next one starts: no overlap
# (the lab's former mutant, kept here as the honest solution events_reordered.py imitates)
from collections.abc import Callable

import torch
import torch.distributed as dist


def gpipe_step(
    stage: torch.nn.Module,
    inputs: torch.Tensor | None,
    targets: torch.Tensor | None,
    num_micro_batches: int,
    activation_shape: tuple[int, int],
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> list[float] | None:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    first, last = rank == 0, rank == world_size - 1
    m = num_micro_batches
    xs = inputs.chunk(m) if first else [None] * m
    ys = targets.chunk(m) if last else [None] * m
    losses = []
    for j in range(m):  # one micro-batch at a time, forward and backward
        if first:
            x = xs[j]
        else:
            x = torch.empty(activation_shape, dtype=torch.float64)
            dist.recv(x, src=rank - 1)
            x.requires_grad_()
        out = stage(x)
        if last:
            loss = loss_fn(out, ys[j])
            losses.append(loss.item())
            (loss / m).backward()
        else:
            dist.send(out.detach(), dst=rank + 1)
            grad = torch.empty(activation_shape, dtype=torch.float64)
            dist.recv(grad, src=rank + 1)
            out.backward(grad)
        if not first:
            dist.send(x.grad, dst=rank - 1)
    return losses if last else None
