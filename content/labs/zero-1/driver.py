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

import ctypes
import itertools
from typing import Any

import torch
import torch.distributed as dist


def build_model(seed: int, dims: list[int]) -> torch.nn.Sequential:
    """The float64 MLP ``Linear, Tanh, ..., Linear`` with parameters drawn from ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    layers: list[torch.nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(itertools.pairwise(dims)):
        linear = torch.nn.Linear(fan_in, fan_out, dtype=torch.float64)
        bound = fan_in**-0.5
        with torch.no_grad():
            linear.weight.copy_(torch.rand(linear.weight.shape, generator=gen, dtype=torch.float64) * 2 * bound - bound)
            linear.bias.copy_(torch.rand(linear.bias.shape, generator=gen, dtype=torch.float64) * 2 * bound - bound)
        layers.append(linear)
        if i < len(dims) - 2:
            layers.append(torch.nn.Tanh())
    return torch.nn.Sequential(*layers)


def make_batch(seed: int, dims: list[int], batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch ``(x, y)`` of one step, drawn from ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, dims[0], generator=gen, dtype=torch.float64)
    y = torch.randn(batch, dims[-1], generator=gen, dtype=torch.float64)
    return x, y


def loss_fn(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean squared error, averaged over every element of this (shard of the) batch."""
    return ((model(x) - y) ** 2).mean()


def shard(t: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    per = t.shape[0] // world_size
    return t[rank * per : (rank + 1) * per]


def average_gradients(model: torch.nn.Module) -> None:
    """The data-parallel part, done for you: every rank ends with the averaged full gradients."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    offset = 0
    for g in grads:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()


def train(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Data-parallel AdamW training with the student's ``ZeroAdamW``; returns what the judge compares.

    ``first``: the parameters after the first ``step()``; ``params``: after the last.
    ``grads``: after the last step, ``zero_grad()`` and one more backward on the next global batch,
    the averaged gradients (what is left of earlier steps' gradients shows here).
    """
    rank, world_size = dist.get_rank(), dist.get_world_size()
    dims, batch = list(inputs["dims"]), int(inputs["batch"])
    model = build_model(int(inputs["seed"]), dims)
    optimizer = submission.ZeroAdamW(
        model.parameters(),
        lr=float(inputs["lr"]),
        betas=(float(inputs["betas"][0]), float(inputs["betas"][1])),
        eps=float(inputs["eps"]),
        weight_decay=float(inputs["weight_decay"]),
    )
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


def digest(layers: list[list[torch.Tensor]]) -> torch.Tensor:
    """Per layer, the sum and the sum of squares of its parameters (float64, shape (layers, 2))."""
    rows = []
    with torch.no_grad():
        for pair in layers:
            flat = [p.reshape(-1) for p in pair]
            rows.append([sum(float(f.sum()) for f in flat), sum(float(f.dot(f)) for f in flat)])
    return torch.tensor(rows, dtype=torch.float64)


def release_freed_buffers() -> None:
    """Buffers of 64 KiB and more come straight from the kernel and go back to it when freed.

    glibc's malloc otherwise keeps freed buffers of up to 32 MiB in its heap for reuse, and raises
    that size as the process frees larger ones: the memory a process holds then depends on the
    order of its allocations, not only on what it keeps alive. Fixing the thresholds
    (``mallopt``) makes the kernel's count follow the tensors that are alive.
    """
    libc = ctypes.CDLL(None)
    libc.mallopt(-3, 64 << 10)  # M_MMAP_THRESHOLD
    libc.mallopt(-1, 128 << 10)  # M_TRIM_THRESHOLD


def memory(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """One ``ZeroAdamW`` per layer, stepped a layer at a time; the kernel measures this group's memory.

    At every step, for each layer in turn: set each parameter's ``.grad`` to ``memory_gradient``,
    call that layer's ``step()``, then drop the gradients (``p.grad = None``): at any moment
    the ranks hold every layer's parameters, your optimizers' state, and one layer's gradients.
    Returns ``{"digest": digest(layers)}``.
    """
    release_freed_buffers()
    layers = memory_layers(int(inputs["seed"]), int(inputs["width"]), int(inputs["layers"]))
    optimizers = [
        submission.ZeroAdamW(
            iter(pair),
            lr=float(inputs["lr"]),
            betas=(float(inputs["betas"][0]), float(inputs["betas"][1])),
            eps=float(inputs["eps"]),
            weight_decay=float(inputs["weight_decay"]),
        )
        for pair in layers
    ]
    for _ in range(int(inputs["steps"])):
        for pair, optimizer in zip(layers, optimizers, strict=True):
            for p in pair:
                p.grad = memory_gradient(p)
            optimizer.step()
            for p in pair:
                p.grad = None
    return {"digest": digest(layers)}
