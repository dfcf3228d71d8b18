"""The seeded float64 MLP that the data-parallel training labs share: model, batch, loss, optimizer.

Public, as a lab's driver is: it runs in every rank beside your code, and the grader's
single-process reference uses the same functions outside the sandbox. Every number is drawn
from the seed a case gives, so each rank builds the same model without talking to the others.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch


def build_model(seed: int, dims: list[int], *, zero_biases: bool = False) -> torch.nn.Sequential:
    """The float64 MLP ``Linear, Tanh, Linear, Tanh, ..., Linear`` with parameters drawn from ``seed``.

    Layer by layer, the weight and then the bias are drawn uniformly in ``±1/sqrt(fan_in)``; with
    ``zero_biases`` every bias starts at zero instead (and nothing is drawn for it).
    """
    gen = torch.Generator().manual_seed(seed)
    layers: list[torch.nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(itertools.pairwise(dims)):
        linear = torch.nn.Linear(fan_in, fan_out, dtype=torch.float64)
        bound = fan_in**-0.5
        with torch.no_grad():
            linear.weight.copy_(torch.rand(linear.weight.shape, generator=gen, dtype=torch.float64) * 2 * bound - bound)
            if zero_biases:
                linear.bias.zero_()
            else:
                linear.bias.copy_(torch.rand(linear.bias.shape, generator=gen, dtype=torch.float64) * 2 * bound - bound)
        layers.append(linear)
        if i < len(dims) - 2:
            layers.append(torch.nn.Tanh())
    return torch.nn.Sequential(*layers)


def make_batch(seed: int, dims: list[int], batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A global batch ``(x, y)`` drawn from ``seed``: standard normal inputs, then standard normal targets."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, dims[0], generator=gen, dtype=torch.float64)
    y = torch.randn(batch, dims[-1], generator=gen, dtype=torch.float64)
    return x, y


def loss_fn(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean squared error, averaged over every element of this (shard of the) batch."""
    return ((model(x) - y) ** 2).mean()


def build_optimizer(model: torch.nn.Module, inputs: dict[str, Any]) -> torch.optim.Optimizer:
    """Plain ``torch.optim.SGD`` with momentum and weight decay, the same on every rank and in the reference."""
    return torch.optim.SGD(
        model.parameters(),
        lr=float(inputs["lr"]),
        momentum=float(inputs["momentum"]),
        weight_decay=float(inputs["weight_decay"]),
    )
