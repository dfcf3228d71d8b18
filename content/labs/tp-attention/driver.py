"""Public code run in every rank of the tp-attention lab (not secret, not trusted).

``forward`` builds the student's ``ParallelSelfAttention`` from full-shaped weights in which only this
rank's heads are filled in and runs it on the input; ``backward`` then runs the backward of a loss on
that output: two calls, so that the grader counts each one's bytes. What they return is compared,
outside the sandbox, with one process running the whole attention layer.

Each rank is given only its own heads' rows of the fused QKV projection (and of its bias) and their
columns of the output projection, drawn by the grader: the others' parts are NaN here and no rank can
draw them, so the output and the input's gradient can only be right if the ranks' partial results
crossed the wire. What every rank shares (the input ``x``, the output projection's bias and the
output's gradient) is drawn from a seed by ``shared``.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.distributed as dist

# Forward state kept in this rank between the "forward" and "backward" calls, by case key.
_PENDING: dict[str, tuple[Any, ...]] = {}
# The attributes the student's layer keeps, as the statement names them.
WEIGHTS = ("qkv_weight", "qkv_bias", "out_weight", "out_bias")


def shared(seed: int, batch: int, seq: int, d_model: int, heads: int, bias: bool) -> dict[str, Any]:
    """What every rank holds, in float64: the input ``x``, the output bias ``b_out`` and ``grad_y``.

    The loss is ``(y * grad_y).sum()``, so ``grad_y`` is what flows into the output. The same
    tensors come out in every rank and in the grader's reference.
    """
    g = torch.Generator().manual_seed(seed)
    return {
        "x": torch.randn(batch, seq, d_model, generator=g, dtype=torch.float64),
        "b_out": torch.randn(d_model, generator=g, dtype=torch.float64) * 0.1 if bias else None,
        "grad_y": torch.randn(batch, seq, d_model, generator=g, dtype=torch.float64),
    }


def heads_slice(d_model: int, world_size: int, rank: int) -> slice:
    """The features of rank ``rank``'s heads: ``[rank d / N, (rank + 1) d / N)``."""
    return slice(rank * d_model // world_size, (rank + 1) * d_model // world_size)


def padded(part: dict[str, Any], d_model: int, world_size: int, rank: int) -> dict[str, torch.Tensor | None]:
    """Full-shaped ``w_qkv`` ``(3 d, d)``, ``b_qkv`` ``(3 d)`` and ``w_out`` ``(d, d)`` holding rank ``rank``'s
    heads (``part``: its rows of each of Q, K and V, stacked, and its columns of ``w_out``), NaN elsewhere."""
    d, mine = d_model, heads_slice(d_model, world_size, rank)
    w_qkv = torch.full((3, d, d), math.nan, dtype=torch.float64)
    w_qkv[:, mine] = part["w_qkv"].view(3, -1, d)
    w_out = torch.full((d, d), math.nan, dtype=torch.float64)
    w_out[:, mine] = part["w_out"]
    b_qkv = None
    if part["b_qkv"] is not None:
        b_qkv = torch.full((3, d), math.nan, dtype=torch.float64)
        b_qkv[:, mine] = part["b_qkv"].view(3, -1)
        b_qkv = b_qkv.view(-1)
    return {"w_qkv": w_qkv.view(3 * d, d), "b_qkv": b_qkv, "w_out": w_out}


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
    """Build the layer from full-shaped weights (this rank's heads only) and run it once on the whole input."""
    spec = inputs["problem"]
    p = shared(**spec)
    w = padded(inputs, int(spec["d_model"]), dist.get_world_size(), dist.get_rank())
    layer = submission.ParallelSelfAttention(w["w_qkv"], w["b_qkv"], w["w_out"], p["b_out"], spec["heads"])
    x = p["x"].clone().requires_grad_(True)
    y = layer(x)
    _PENDING[inputs["key"]] = (x, y, layer, p["grad_y"])
    return {"output": y, "weights": _held(layer, spec["bias"])}


def backward(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Backward of ``(y * grad_y).sum()`` for the forward call with the same key; the gradients this rank holds."""
    if inputs["key"] not in _PENDING:
        raise RuntimeError("the forward call did not finish, so there is no output to run backward through")
    x, y, layer, grad_y = _PENDING.pop(inputs["key"])
    # The loss's own backward, not y.backward(grad_y): a gradient argument makes autograd import
    # sympy lazily (seconds in a fresh rank); d/dy of (y * grad_y).sum() is grad_y exactly.
    (y * grad_y).sum().backward()
    return {"grad_x": x.grad, "grads": _grads(layer, inputs["problem"]["bias"])}
