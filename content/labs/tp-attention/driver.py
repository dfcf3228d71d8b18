"""Public code run in every rank of the tp-attention lab (not secret, not trusted).

``forward`` draws one multi-head self-attention layer from the seed the grader chose,
gives its full weights to the student's ``ParallelSelfAttention`` and runs it on the
input; ``backward`` then runs the backward of a loss on that output. They are two calls
so the grader can count the bytes each one sends. What they return is compared,
outside the sandbox, with one process running the whole attention layer.
"""

from __future__ import annotations

import math
from typing import Any

import torch

# Forward state kept in this rank between the "forward" and "backward" calls, by case key.
_PENDING: dict[str, tuple[Any, ...]] = {}
# The attributes the student's layer keeps, as the statement names them.
WEIGHTS = ("qkv_weight", "qkv_bias", "out_weight", "out_bias")


def problem(seed: int, batch: int, seq: int, d_model: int, heads: int, bias: bool) -> dict[str, Any]:
    """The whole layer's weights, the input and the gradient of the loss w.r.t. the output, in float64.

    ``w_qkv`` is ``(3 d, d)``: the query, key and value projections stacked in that order,
    as ``torch.nn.MultiheadAttention.in_proj_weight``; ``w_out`` is ``(d, d)``. The same
    tensors come out in every rank and in the grader's reference.
    """
    g = torch.Generator().manual_seed(seed)
    f64 = torch.float64

    def randn(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return torch.randn(*shape, generator=g, dtype=f64) * scale

    return {
        "x": randn(batch, seq, d_model),
        "w_qkv": randn(3 * d_model, d_model, scale=1 / math.sqrt(d_model)),
        "b_qkv": randn(3 * d_model, scale=0.1) if bias else None,
        "w_out": randn(d_model, d_model, scale=1 / math.sqrt(d_model)),
        "b_out": randn(d_model, scale=0.1) if bias else None,
        "grad_y": randn(batch, seq, d_model),
    }


def _copy(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.clone()


def _held(layer: torch.nn.Module, with_bias: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in WEIGHTS:
        kept = getattr(layer, name, None)
        if name.endswith("bias") and not with_bias:  # expected None: say what was kept instead
            kept = "None" if kept is None else f"a {type(kept).__name__}"
        out[name] = kept
    return out


def _grads(layer: torch.nn.Module, with_bias: bool) -> dict[str, Any]:
    names = WEIGHTS if with_bias else ("qkv_weight", "out_weight")
    return {name: getattr(getattr(layer, name, None), "grad", None) for name in names}


def forward(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Build the layer from the full weights and run it once on the whole input."""
    spec = inputs["problem"]
    p = problem(**spec)
    layer = submission.ParallelSelfAttention(
        p["w_qkv"].clone(), _copy(p["b_qkv"]), p["w_out"].clone(), _copy(p["b_out"]), spec["heads"]
    )
    x = p["x"].clone().requires_grad_(True)
    y = layer(x)
    _PENDING[inputs["key"]] = (x, y, layer, p["grad_y"])
    return {"output": y, "weights": _held(layer, spec["bias"])}


def backward(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Backward of ``(y * grad_y).sum()`` for the forward call with the same key; the gradients this rank holds."""
    if inputs["key"] not in _PENDING:
        forward(submission, inputs)
    x, y, layer, grad_y = _PENDING.pop(inputs["key"])
    # The loss's own backward, not y.backward(grad_y): a gradient argument makes autograd import
    # sympy lazily (seconds in a fresh rank); d/dy of (y * grad_y).sum() is grad_y exactly.
    (y * grad_y).sum().backward()
    return {"grad_x": x.grad, "grads": _grads(layer, inputs["problem"]["bias"])}
