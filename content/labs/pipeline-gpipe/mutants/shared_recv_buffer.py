# receives every micro-batch into one buffer: autograd kept it for the backward, so later receives overwrite it
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
    buffer = torch.empty(activation_shape, dtype=torch.float64, requires_grad=True)  # allocated once, reused
    grad_buffer = torch.empty(activation_shape, dtype=torch.float64)
    outputs, losses = [], []
    for j in range(m):
        if first:
            x = xs[j]
        else:
            with torch.no_grad():
                dist.recv(buffer, src=rank - 1)
            x = buffer
        out = stage(x)
        if last:
            loss = loss_fn(out, ys[j])
            losses.append(loss.item())
            out = loss / m
        else:
            dist.send(out.detach(), dst=rank + 1)
        outputs.append(out)
    for j in reversed(range(m)):
        if not first:
            buffer.grad = None
        if last:
            outputs[j].backward()
        else:
            dist.recv(grad_buffer, src=rank + 1)
            outputs[j].backward(grad_buffer)
        if not first:
            dist.send(buffer.grad, dst=rank - 1)
    return losses if last else None
