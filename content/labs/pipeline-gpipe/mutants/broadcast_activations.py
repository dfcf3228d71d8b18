# moves activations and gradients with dist.broadcast from the producing stage: right values, every rank gets them
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
    for j in range(m):
        x = xs[j] if first else None
        for s in range(world_size - 1):  # stage s hands its output to stage s + 1
            buf = torch.empty(activation_shape, dtype=torch.float64)
            if s == rank:
                out = stage(x)
                buf = out.detach()
            dist.broadcast(buf, src=s)
            if s + 1 == rank:
                x = buf.clone().requires_grad_()
        if last:
            out = stage(x)
            loss = loss_fn(out, ys[j])
            losses.append(loss.item())
            out = loss / m
        received.append(x)
        outputs.append(out)
    for j in reversed(range(m)):
        grad = None
        if last:
            outputs[j].backward()
        for s in range(world_size - 1, 0, -1):  # stage s hands its input gradient to stage s - 1
            buf = torch.empty(activation_shape, dtype=torch.float64)
            if s == rank:
                if grad is not None:
                    outputs[j].backward(grad)
                buf = received[j].grad
            dist.broadcast(buf, src=s)
            if s - 1 == rank:
                grad = buf.clone()
        if first and grad is not None:
            outputs[j].backward(grad)
    return losses if last else None
