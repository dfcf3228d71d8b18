# backpropagates each micro-batch loss as it is, not divided by M: gradients M times too large
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
    received, outputs, losses = [], [], []
    for j in range(m):  # all forwards
        if first:
            x = xs[j]
        else:
            x = torch.empty(activation_shape, dtype=torch.float64)  # a fresh buffer per micro-batch
            dist.recv(x, src=rank - 1)
            x.requires_grad_()
        out = stage(x)
        if last:
            loss = loss_fn(out, ys[j])
            losses.append(loss)
            out = loss
        else:
            dist.send(out.detach(), dst=rank + 1)
        received.append(x)
        outputs.append(out)
    for j in reversed(range(m)):  # then all backwards; autograd adds each one into .grad
        if last:
            outputs[j].backward()
        else:
            grad = torch.empty(activation_shape, dtype=torch.float64)
            dist.recv(grad, src=rank + 1)
            (outputs[j] * grad).sum().backward()
        if not first:
            dist.send(received[j].grad, dst=rank - 1)
    return [loss.item() for loss in losses] if last else None
