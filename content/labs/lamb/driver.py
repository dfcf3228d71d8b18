"""Public driver for lamb: the training runs around your ``Lamb``.

Not secret: read it to see exactly what the grader does. One process (world size 1),
float64, one thread. ``train`` builds a 3-layer MLP whose biases start at zero, runs your
``Lamb`` for a few steps on a fixed regression batch (``first`` and ``params`` are compared,
outside your code, with a trusted float64 LAMB), then trains a fresh copy of the model with your
``Lamb`` and with ``torch.optim.AdamW`` at three batch sizes (``curves``: the loss at every step,
drawn on the result page; your LAMB's losses are compared with the trusted LAMB's).
"""

from __future__ import annotations

import math
from typing import Any

import mlp
import torch
from mlp import loss_fn, make_batch


def build_model(seed: int, dims: list[int]) -> torch.nn.Sequential:
    """The float64 MLP ``Linear, Tanh, Linear, Tanh, Linear``: uniform weights, biases all zero."""
    return mlp.build_model(seed, dims, zero_biases=True)


def make_dataset(seed: int, dims: list[int], size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A synthetic dataset: ``y = teacher(x) + noise`` with a random teacher MLP of the same shape."""
    gen = torch.Generator().manual_seed(seed)
    teacher = build_model(seed + 7, dims)
    with torch.no_grad():
        for layer in teacher:
            if isinstance(layer, torch.nn.Linear):
                layer.weight.mul_(2.0)
                layer.bias.copy_(torch.randn(layer.bias.shape, generator=gen, dtype=torch.float64) * 0.5)
        x = torch.randn(size, dims[0], generator=gen, dtype=torch.float64)
        y = teacher(x) + 0.05 * torch.randn(size, dims[-1], generator=gen, dtype=torch.float64)
    return x, y


def rows(step: int, batch: int, size: int) -> slice:
    """The dataset rows of one step: consecutive batches, wrapping round (``size`` is a multiple)."""
    start = (step * batch) % size
    return slice(start, start + batch)


def curve_lr(base_lr: float, batch: int, base_batch: int) -> float:
    """The learning rate at a batch size: ``base_lr * sqrt(batch / base_batch)`` (square-root scaling)."""
    return base_lr * math.sqrt(batch / base_batch)


def run_curve(make_optimizer: Any, inputs: dict[str, Any], batch: int) -> list[float]:
    """Train a fresh model with ``make_optimizer(params, lr)``; the loss each ``step(closure)`` returned."""
    dims, size = list(inputs["curve_dims"]), int(inputs["curve_size"])
    model = build_model(int(inputs["seed"]) + 2, dims)
    x, y = make_dataset(int(inputs["seed"]) + 3, dims, size)
    optimizer = make_optimizer(model.parameters(), curve_lr(float(inputs["curve_lr"]), batch, min(inputs["batches"])))
    losses: list[float] = []
    for step in range(int(inputs["curve_steps"])):
        mine = rows(step, batch, size)

        def closure(mine: slice = mine) -> torch.Tensor:
            optimizer.zero_grad()
            loss = loss_fn(model, x[mine], y[mine])
            loss.backward()
            return loss

        loss = optimizer.step(closure)
        losses.append(float(loss.detach()) if isinstance(loss, torch.Tensor) else math.nan)
    return losses


def train(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Your ``Lamb`` on the graded model, then the convergence runs; returns what the judge compares.

    ``first``: the parameters after the first ``step()``; ``params``: after the last.
    ``curves``: ``{"lamb": [[loss per step] per batch size], "adamw": [...]}`` (float64 tensors).
    """
    dims, batch, seed = list(inputs["dims"]), int(inputs["batch"]), int(inputs["seed"])
    model = build_model(seed, dims)
    betas = (float(inputs["betas"][0]), float(inputs["betas"][1]))
    hyper = {"lr": float(inputs["lr"]), "eps": float(inputs["eps"]), "weight_decay": float(inputs["weight_decay"])}
    optimizer = submission.Lamb(model.parameters(), betas=betas, **hyper)
    first: dict[str, torch.Tensor] = {}
    for step in range(int(inputs["steps"])):
        optimizer.zero_grad()
        loss_fn(model, *make_batch(seed + 1 + step, dims, batch)).backward()
        optimizer.step()
        if step == 0:
            first = {name: p.detach().clone() for name, p in model.named_parameters()}
    params = {name: p.detach().clone() for name, p in model.named_parameters()}
    wd = float(inputs["curve_weight_decay"])
    curves: dict[str, list[list[float]]] = {"lamb": [], "adamw": []}
    for size in inputs["batches"]:
        curves["lamb"].append(run_curve(lambda p, lr: submission.Lamb(p, lr=lr, weight_decay=wd), inputs, int(size)))
        curves["adamw"].append(
            run_curve(lambda p, lr: torch.optim.AdamW(p, lr=lr, weight_decay=wd, foreach=False), inputs, int(size))
        )
    tensors = {name: torch.tensor(c, dtype=torch.float64) for name, c in curves.items()}
    return {"first": first, "params": params, "curves": tensors}
