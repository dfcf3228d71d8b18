"""Public code run in every rank of the tensor-parallel lab (not secret, not trusted).

``forward`` builds the student's ``ColumnParallelLinear`` and ``RowParallelLinear`` from full-shaped
weights in which only this rank's chunks are filled in and runs ``Row(gelu(Column(x)))``; ``backward``
then runs the backward of a loss on that output: two calls, so that the grader counts each one's bytes.
What they return is compared, outside the sandbox, with one process running the whole MLP.

Each rank is given only its own chunks of the two weight matrices (and of the first bias), drawn by the
grader: the others' are NaN here and no rank can draw them, so the output and the input's gradient can
only be right if the ranks' partial results crossed the wire. What every rank shares (the input ``x``,
the second layer's bias and the output's gradient) is drawn from a seed by ``shared``.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

# Forward state kept in this rank between the "forward" and "backward" calls, by case key.
_PENDING: dict[str, tuple[Any, ...]] = {}


def shared(seed: int, batch: list[int], d_in: int, d_hidden: int, d_out: int, bias: bool) -> dict[str, Any]:
    """What every rank holds, in float64: the input ``x``, the second layer's bias ``b2`` and ``grad_y``.

    The loss is ``(y * grad_y).sum()``, so ``grad_y`` is what flows into the output. The same
    tensors come out in every rank and in the grader's reference.
    """
    g = torch.Generator().manual_seed(seed)
    return {
        "x": torch.randn(*batch, d_in, generator=g, dtype=torch.float64),
        "b2": torch.randn(d_out, generator=g, dtype=torch.float64) * 0.1 if bias else None,
        "grad_y": torch.randn(*batch, d_out, generator=g, dtype=torch.float64),
    }


def chunk_slice(size: int, world_size: int, rank: int) -> slice:
    """Where rank ``rank``'s part of a dimension of ``size`` lies: ``torch.chunk``'s split."""
    step = math.ceil(size / world_size)
    return slice(min(rank * step, size), min((rank + 1) * step, size))


def padded(chunk: torch.Tensor | None, dim: int, size: int, world_size: int, rank: int) -> torch.Tensor | None:
    """A full-shaped tensor (``size`` along ``dim``) holding rank ``rank``'s ``chunk``, NaN everywhere else."""
    if chunk is None:
        return None
    shape = list(chunk.shape)
    shape[dim] = size
    full = torch.full(shape, math.nan, dtype=chunk.dtype)
    where = [slice(None)] * len(shape)
    where[dim] = chunk_slice(size, world_size, rank)
    full[tuple(where)] = chunk
    return full


def _held(layer: torch.nn.Module, with_bias: bool) -> dict[str, Any]:
    bias = getattr(layer, "bias", None)
    if not with_bias:  # expected None: say what was kept instead of a tensor the judge cannot compare
        bias = "None" if bias is None else f"a {type(bias).__name__}"
    return {"weight": getattr(layer, "weight", None), "bias": bias}


def _grads(layer: torch.nn.Module, with_bias: bool) -> dict[str, Any]:
    names = ("weight", "bias") if with_bias else ("weight",)
    return {name: getattr(getattr(layer, name, None), "grad", None) for name in names}


def forward(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Build both layers from full-shaped weights (this rank's chunks only) and run ``Row(gelu(Column(x)))`` once."""
    spec = inputs["problem"]
    p = shared(**spec)
    mine = (int(spec["d_hidden"]), dist.get_world_size(), dist.get_rank())  # this rank's part of the hidden size
    column = submission.ColumnParallelLinear(padded(inputs["w1"], 0, *mine), padded(inputs["b1"], 0, *mine))
    row = submission.RowParallelLinear(padded(inputs["w2"], 1, *mine), p["b2"])
    x = p["x"].clone().requires_grad_(True)
    hidden = column(x)
    y = row(F.gelu(hidden))
    _PENDING[inputs["key"]] = (x, y, column, row, p["grad_y"])
    held = {"column_weights": _held(column, spec["bias"]), "row_weights": _held(row, spec["bias"])}
    return {"hidden": hidden, "output": y, **held}


def backward(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Backward of ``(y * grad_y).sum()`` for the forward call with the same key; the gradients every rank holds."""
    if inputs["key"] not in _PENDING:
        raise RuntimeError("the forward call did not finish, so there is no output to run backward through")
    x, y, column, row, grad_y = _PENDING.pop(inputs["key"])
    # The loss's own backward, not y.backward(grad_y): a gradient argument makes autograd import
    # sympy lazily (seconds in a fresh rank); d/dy of (y * grad_y).sum() is grad_y exactly.
    (y * grad_y).sum().backward()
    with_bias = inputs["problem"]["bias"]
    return {"grad_x": x.grad, "grads": {"column": _grads(column, with_bias), "row": _grads(row, with_bias)}}
