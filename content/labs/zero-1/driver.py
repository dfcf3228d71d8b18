"""Public driver for zero-1: the training loops every rank runs around your ``ZeroAdamW``.

Not secret: read it to see exactly what the grader does.

``train``: each rank builds the same float64 model from the seed it is given, and at every step
calls your ``zero_grad()``, computes the mean squared error over its equal shard of the global
batch, calls ``backward()``, averages the gradients over the ranks itself (one all-reduce), and
calls your ``step()``. After the last step it calls ``zero_grad()`` once more and computes one
more averaged gradient. What it returns is compared, outside your code, with
``torch.optim.AdamW`` on one process and the whole global batch.

``memory``: runs in a group of ranks of its own, so that the kernel's count of the memory each
rank holds (its control group's high-water, read outside your process) covers this loop alone.
Each rank holds the same float64 layers, gives each layer its own ``ZeroAdamW`` and steps
them one layer at a time; its result (per layer, the sum and the sum of squares of the
parameters after the last step) is compared with ``torch.optim.AdamW``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch
import torch.distributed as dist
from data_parallel import average_gradients, shard
from heap import release_freed_buffers
from mlp import build_model, loss_fn, make_batch


def zero_adamw(submission: Any, params: Iterator[torch.nn.Parameter], inputs: dict[str, Any]) -> Any:
    """Your ``ZeroAdamW`` over ``params`` with the case's hyperparameters."""
    lr, eps, decay = float(inputs["lr"]), float(inputs["eps"]), float(inputs["weight_decay"])
    betas = (float(inputs["betas"][0]), float(inputs["betas"][1]))
    return submission.ZeroAdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=decay)


def train(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Data-parallel AdamW training with the student's ``ZeroAdamW``; returns what the judge compares.

    ``first``: the parameters after the first ``step()``; ``params``: after the last.
    ``grads``: after the last step, ``zero_grad()`` and one more backward on the next global batch,
    the averaged gradients (what is left of earlier steps' gradients shows here).
    """
    rank, world_size = dist.get_rank(), dist.get_world_size()
    dims, batch = list(inputs["dims"]), int(inputs["batch"])
    model = build_model(int(inputs["seed"]), dims)
    optimizer = zero_adamw(submission, model.parameters(), inputs)
    first: dict[str, torch.Tensor] = {}
    losses = []
    steps = int(inputs["steps"])
    for step in range(steps):
        optimizer.zero_grad()
        x, y = make_batch(int(inputs["seed"]) + 1 + step, dims, batch)
        loss = loss_fn(model, shard(x, rank, world_size), shard(y, rank, world_size))
        loss.backward()
        average_gradients(model)
        optimizer.step()
        losses.append(float(loss.detach()))
        if step == 0:
            first = {name: p.detach().clone() for name, p in model.named_parameters()}
    optimizer.zero_grad()
    x, y = make_batch(int(inputs["seed"]) + 1 + steps, dims, batch)
    loss_fn(model, shard(x, rank, world_size), shard(y, rank, world_size)).backward()
    average_gradients(model)
    return {
        "first": first,
        "params": {name: p.detach().clone() for name, p in model.named_parameters()},
        "grads": {
            name: torch.full(p.shape, torch.nan, dtype=p.dtype) if p.grad is None else p.grad.detach().clone()
            for name, p in model.named_parameters()
        },
        "losses": torch.tensor(losses, dtype=torch.float64),
    }


def spread(count: int, start: float, bound: float) -> torch.Tensor:
    """``count`` float64 values in [-bound, bound), spread evenly (a golden-ratio sequence from ``start``)."""
    out = torch.arange(count, dtype=torch.float64)  # one buffer, every step in place: large buffers are not free
    return out.mul_(0.6180339887498949).add_(start).frac_().sub_(0.5).mul_(2 * bound)


def memory_layers(seed: int, width: int, layers: int) -> list[list[torch.nn.Parameter]]:
    """``layers`` pairs [weight (width x width), bias (width)], float64, each from ``seed`` and its place."""
    bound = width**-0.5
    out = []
    for k in range(layers):
        start = (seed % 9973) / 9973 + k / layers
        weight = spread(width * width, start, bound).view(width, width)
        bias = spread(width, start + 0.5, bound)
        out.append([torch.nn.Parameter(weight), torch.nn.Parameter(bias)])
    return out


def memory_gradient(p: torch.Tensor) -> torch.Tensor:
    """The gradient a layer's parameter gets at each step: that of ``1.5 ||p||^2`` at its current values."""
    return p.detach() * 3.0


def digest(layers: Sequence[Sequence[torch.Tensor]]) -> torch.Tensor:
    """Per layer, the sum and the sum of squares of its parameters (float64, shape (layers, 2))."""
    rows = []
    with torch.no_grad():
        for pair in layers:
            flat = [p.reshape(-1) for p in pair]
            rows.append([sum(float(f.sum()) for f in flat), sum(float(f.dot(f)) for f in flat)])
    return torch.tensor(rows, dtype=torch.float64)


def memory(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """One ``ZeroAdamW`` per layer, stepped a layer at a time; the kernel measures this group's memory.

    At every step, for each layer in turn: set each parameter's ``.grad`` to ``memory_gradient``,
    call that layer's ``step()``, then drop the gradients (``p.grad = None``): at any moment
    the ranks hold every layer's parameters, your optimizers' state, and one layer's gradients.
    Returns ``{"digest": digest(layers)}``.
    """
    release_freed_buffers()
    layers = memory_layers(int(inputs["seed"]), int(inputs["width"]), int(inputs["layers"]))
    optimizers = [zero_adamw(submission, iter(pair), inputs) for pair in layers]
    for _ in range(int(inputs["steps"])):
        for pair, optimizer in zip(layers, optimizers, strict=True):
            for p in pair:
                p.grad = memory_gradient(p)
            optimizer.step()
            for p in pair:
                p.grad = None
    return {"digest": digest(layers)}
