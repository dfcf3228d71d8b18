"""Public code run in every rank of the tensor-parallel lab (not secret, not trusted).

``forward`` builds a two-layer MLP from the seed the grader drew, gives the full
weights to the student's ``ColumnParallelLinear`` and ``RowParallelLinear`` and
runs ``Row(gelu(Column(x)))``; ``backward`` then runs the backward of a loss on that
output. They are two calls so the grader can count the bytes each one sends.
What they return is compared, outside the sandbox, with one process running
the whole MLP.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

# Forward state kept in this rank between the "forward" and "backward" calls, by case key.
_PENDING: dict[str, tuple[Any, ...]] = {}


def problem(seed: int, batch: list[int], d_in: int, d_hidden: int, d_out: int, bias: bool) -> dict[str, Any]:
    """The full MLP's weights, the input and the gradient of the loss w.r.t. the output, in float64.

    The same tensors come out in every rank and in the grader's reference: the
    loss is ``(y * grad_y).sum()``, so ``grad_y`` is what flows into the output.
    """
    g = torch.Generator().manual_seed(seed)
    f64 = torch.float64

    def randn(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return torch.randn(*shape, generator=g, dtype=f64) * scale

    return {
        "x": randn(*batch, d_in),
        "w1": randn(d_hidden, d_in, scale=1 / math.sqrt(d_in)),
        "b1": randn(d_hidden, scale=0.1) if bias else None,
        "w2": randn(d_out, d_hidden, scale=1 / math.sqrt(d_hidden)),
        "b2": randn(d_out, scale=0.1) if bias else None,
        "grad_y": randn(*batch, d_out),
    }


def _copy(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.clone()


def _held(layer: torch.nn.Module, with_bias: bool) -> dict[str, Any]:
    weight = getattr(layer, "weight", None)
    bias = getattr(layer, "bias", None)
    if not with_bias:  # expected None: say what was kept instead of a tensor the judge cannot compare
        bias = "None" if bias is None else f"a {type(bias).__name__}"
    return {"weight": weight, "bias": bias}


def _grads(layer: torch.nn.Module, with_bias: bool) -> dict[str, Any]:
    out = {"weight": getattr(getattr(layer, "weight", None), "grad", None)}
    if with_bias:
        out["bias"] = getattr(getattr(layer, "bias", None), "grad", None)
    return out


def forward(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Build both layers from the full weights and run ``Row(gelu(Column(x)))`` once."""
    p = problem(**inputs["problem"])
    column = submission.ColumnParallelLinear(p["w1"].clone(), _copy(p["b1"]))
    row = submission.RowParallelLinear(p["w2"].clone(), _copy(p["b2"]))
    x = p["x"].clone().requires_grad_(True)
    hidden = column(x)
    y = row(F.gelu(hidden))
    _PENDING[inputs["key"]] = (x, y, column, row, p["grad_y"])
    with_bias = inputs["problem"]["bias"]
    return {
        "hidden": hidden,
        "output": y,
        "column_weights": _held(column, with_bias),
        "row_weights": _held(row, with_bias),
    }


def backward(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Backward of ``(y * grad_y).sum()`` for the forward call with the same key; the gradients every rank holds."""
    if inputs["key"] not in _PENDING:
        forward(submission, inputs)
    x, y, column, row, grad_y = _PENDING.pop(inputs["key"])
    # The loss's own backward, not y.backward(grad_y): a gradient argument makes autograd import
    # sympy lazily (seconds in a fresh rank); d/dy of (y * grad_y).sum() is grad_y exactly.
    (y * grad_y).sum().backward()
    with_bias = inputs["problem"]["bias"]
    return {
        "grad_x": x.grad,
        "grads": {"column": _grads(column, with_bias), "row": _grads(row, with_bias)},
    }
