"""Public driver for lr-warmup: the data-parallel training loop every rank runs around your schedule.

Not secret: read it to see exactly what the grader does. Every rank builds the same
model from the seed it is given, takes its own equal shard of a global batch that grows
with the number of ranks (``per_rank_batch x world_size`` examples), averages the
gradients over the ranks with one ``dist.all_reduce``, sets the optimizer's learning
rate to ``submission.scaled_lr(step, base_lr, world_size, warmup_steps)`` and takes a
step of SGD with momentum. What it returns is compared, outside your code, with
single-process training on the whole global batch under the right schedule.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from data_parallel import average_gradients
from mlp import build_model, loss_fn


def make_batch(seed: int, dims: list[int], batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch ``(x, y)`` of one step, drawn from ``seed``: a noisy linear target."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, dims[0], generator=gen, dtype=torch.float64)
    w = torch.linspace(-1.0, 1.0, dims[0] * dims[-1], dtype=torch.float64).view(dims[0], dims[-1])
    y = x @ w + 0.1 * torch.randn(batch, dims[-1], generator=gen, dtype=torch.float64)
    return x, y


def make_optimizer(model: torch.nn.Module, inputs: dict[str, Any]) -> torch.optim.SGD:
    """SGD with momentum and weight decay; its learning rate is set before every step (``set_lr``)."""
    momentum, weight_decay = float(inputs["momentum"]), float(inputs["weight_decay"])
    return torch.optim.SGD(model.parameters(), lr=0.0, momentum=momentum, weight_decay=weight_decay)


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def call_schedule(submission: Any, step: int, base_lr: float, world_size: int, warmup_steps: int) -> float:
    """The student's ``scaled_lr(...)`` as a plain float (a one-element tensor is accepted)."""
    lr = submission.scaled_lr(step, base_lr, world_size, warmup_steps)
    if isinstance(lr, torch.Tensor) and lr.numel() == 1:
        lr = lr.item()
    if isinstance(lr, bool) or not isinstance(lr, (int, float)):
        raise TypeError(f"scaled_lr({step}, {base_lr}, {world_size}, {warmup_steps}) returned {lr!r}, not a float")
    return float(lr)


def train(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Data-parallel training with the student's schedule; returns what the judge compares.

    ``lrs``: the learning rate ``scaled_lr`` gave at every step (float64, one per step).
    ``params``: every parameter after ``inputs["steps"]`` optimizer steps.
    """
    rank, world_size = dist.get_rank(), dist.get_world_size()
    dims, per_rank, seed = list(inputs["dims"]), int(inputs["per_rank_batch"]), int(inputs["seed"])
    model = build_model(seed, dims)
    optimizer = make_optimizer(model, inputs)
    lrs = []
    for step in range(int(inputs["steps"])):
        x, y = make_batch(seed + 1 + step, dims, per_rank * world_size)
        mine = slice(rank * per_rank, (rank + 1) * per_rank)
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model, x[mine], y[mine]).backward()
        average_gradients(model)
        lrs.append(call_schedule(submission, step, float(inputs["base_lr"]), world_size, int(inputs["warmup_steps"])))
        set_lr(optimizer, lrs[-1])
        optimizer.step()
    params = {name: p.detach().clone() for name, p in model.named_parameters()}
    return {"lrs": torch.tensor(lrs, dtype=torch.float64), "params": params}


def schedule(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """``scaled_lr`` on its own, at every ``(step, warmup_steps)`` in ``inputs["queries"]``, this world size."""
    world_size, base_lr = dist.get_world_size(), float(inputs["base_lr"])
    lrs = [call_schedule(submission, int(s), base_lr, world_size, int(w)) for s, w in inputs["queries"]]
    return {"lrs": torch.tensor(lrs, dtype=torch.float64)}


def reference(inputs: dict[str, Any], world_size: int, lrs: list[float]) -> dict[str, Any]:
    """The same training on one process with the whole global batch and the learning rates ``lrs``.

    Also returns the whole-batch loss before each step (``losses``) and the loss on a held-out
    batch of 64 examples before and after training (``held_out``).
    """
    dims, per_rank, seed = list(inputs["dims"]), int(inputs["per_rank_batch"]), int(inputs["seed"])
    model = build_model(seed, dims)
    optimizer = make_optimizer(model, inputs)
    held_x, held_y = make_batch(seed - 1, dims, 64)
    held_out = [float(loss_fn(model, held_x, held_y).detach())]
    losses = []
    for step in range(int(inputs["steps"])):
        x, y = make_batch(seed + 1 + step, dims, per_rank * world_size)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model, x, y)
        loss.backward()
        set_lr(optimizer, lrs[step])
        optimizer.step()
        losses.append(float(loss.detach()))
    held_out.append(float(loss_fn(model, held_x, held_y).detach()))
    params = {name: p.detach().clone() for name, p in model.named_parameters()}
    return {"lrs": torch.tensor(lrs, dtype=torch.float64), "params": params, "losses": losses, "held_out": held_out}
