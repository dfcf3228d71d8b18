"""Trusted checks for tp-attention: each rank's heads, one process running the whole layer, the wire rule.

Never mounted into the sandbox and never shown to students. Each rank's heads (its rows of Q, K
and V and their columns of the output projection) are drawn here from that rank's own generator
and given to that rank only (the driver pads them to full shape with NaN); what every rank shares
comes from the public driver's ``shared()``. The reference runs the whole layer on all of them.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch
import torch.nn.functional as F

from labs.authoring import Case, Facts, Outcome, layers, load_public, rules

# The measured layer: a 2 x 96 x 192 float64 input and output (288 KiB each), large enough that
# gloo's framing is noise; 12 heads split over 2, 3 and 4 ranks. Its weights (864 KiB for the
# fused QKV projection, 288 KiB for the output projection) would stand out on the wire.
MEASURED: dict[str, Any] = {"batch": 2, "seq": 96, "d_model": 192, "heads": 12, "bias": True}
# No biases and a head dimension of 3: the layer is not written for one shape.
SMALL: dict[str, Any] = {"batch": 3, "seq": 5, "d_model": 36, "heads": 12, "bias": False}
TOLERANCE = layers.TOLERANCE
KEYS = ("output", "weights", "grad_x", "grads")
DRIVER = load_public(__file__, "driver")  # shared(): what every rank holds, as in the ranks


def attention(
    x: torch.Tensor, w_qkv: torch.Tensor, w_out: torch.Tensor, b_qkv: Any = None, b_out: Any = None, *, heads: int
) -> dict[str, torch.Tensor]:
    """Multi-head self-attention with all ``heads`` in one process (as ``torch.nn.MultiheadAttention``): its
    ``output``."""
    batch, seq, d = x.shape
    q, k, v = (t.reshape(batch, seq, heads, d // heads).transpose(1, 2) for t in F.linear(x, w_qkv, b_qkv).chunk(3, -1))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d // heads)
    context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, seq, d)
    return {"output": F.linear(context, w_out, b_out)}


def heads(problem: dict[str, Any], own: list[torch.Generator]) -> list[dict[str, Any]]:
    """Each rank's own heads, from its own generator: its rows of Q, K and V stacked (``w_qkv``, ``b_qkv``)
    and their columns of the output projection (``w_out``). A rank is given these and nothing else
    of the weights, so it cannot draw another's."""
    d, f64 = problem["d_model"], torch.float64
    width = d // len(own)
    return [
        {
            "w_qkv": torch.randn(3 * width, d, generator=g, dtype=f64) / math.sqrt(d),
            "b_qkv": torch.randn(3 * width, generator=g, dtype=f64) * 0.1 if problem["bias"] else None,
            "w_out": torch.randn(d, width, generator=g, dtype=f64) / math.sqrt(d),
        }
        for g in own
    ]


def whole(problem: dict[str, Any], parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole layer's tensors: every rank's heads put together, and what the ranks share."""
    d, n = problem["d_model"], len(parts)
    p = DRIVER.shared(**problem)
    w_qkv = torch.cat([c["w_qkv"].view(3, d // n, d) for c in parts], dim=1).reshape(3 * d, d)
    b_qkv = None
    if problem["bias"]:
        b_qkv = torch.cat([c["b_qkv"].view(3, d // n) for c in parts], dim=1).reshape(3 * d)
    w_out = torch.cat([c["w_out"] for c in parts], dim=1)
    return {"x": p["x"], "grad_y": p["grad_y"], "w_qkv": w_qkv, "b_qkv": b_qkv, "w_out": w_out, "b_out": p["b_out"]}


def reference(problem: dict[str, Any], parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole layer's output and every gradient, in one process."""
    p = whole(problem, parts)
    params = {k: p[k] for k in ("w_qkv", "b_qkv", "w_out", "b_out")}
    return layers.reference(functools.partial(attention, heads=problem["heads"]), p["x"], p["grad_y"], params)


def shards(full: dict[str, torch.Tensor], d: int, world_size: int, rank: int, prefix: str = "") -> dict[str, Any]:
    """Rank ``rank``'s parts of the full tensors: its heads' rows of Q, K and V, their columns of W_out."""
    local = slice(rank * d // world_size, (rank + 1) * d // world_size)
    out: dict[str, Any] = {
        "qkv_weight": full[f"{prefix}w_qkv"].view(3, d, d)[:, local].reshape(-1, d).clone(),
        "out_weight": full[f"{prefix}w_out"][:, local].clone(),
    }
    if f"{prefix}b_qkv" in full:
        out["qkv_bias"] = full[f"{prefix}b_qkv"].view(3, d)[:, local].reshape(-1).clone()
        out["out_bias"] = full[f"{prefix}b_out"].clone()
    return out


def expected(problem: dict[str, Any], parts: list[dict[str, Any]]) -> tuple[list[dict], list[dict]]:
    """Each rank's expected forward and backward results."""
    ref = reference(problem, parts)
    d, n = problem["d_model"], len(parts)
    forward, backward = [], []
    for r in range(n):
        weights = shards(ref, d, n, r)
        if not problem["bias"]:
            weights.update(qkv_bias="None", out_bias="None")
        forward.append({"output": ref["output"], "weights": weights})
        backward.append({"grad_x": ref["grad_x"], "grads": shards(ref, d, n, r, prefix="grad_")})
    return forward, backward


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    out = []
    for problem, forward, backward in layers.calls(
        world_size, gen, {"attention": MEASURED, "no-bias": SMALL}, heads, expected, KEYS
    ):
        what = f"{problem['batch']} x {problem['seq']} x {problem['d_model']} input, {problem['heads']} heads"
        what += "" if problem["bias"] else ", no biases"
        out += [
            Case(check="forward", fn="ParallelSelfAttention", driver="forward",
                 label=f"forward of self-attention, {what}",
                 # "sharding" (what the layer keeps) is read from the rank's own object: feedback only.
                 parts={"forward": ["output"], "sharding": ["weights"]}, **forward),
            Case(check="input-gradient", fn="ParallelSelfAttention", driver="backward",
                 label=f"backward of the same output, {what}",
                 parts={"input-gradient": ["grad_x"], "weight-gradients": ["grads"]}, **backward),
        ]  # fmt: skip
    return out


ADVICE = layers.advice(
    kept="your heads' rows of the QKV weight and your columns of the output weight",
    summed="the partial outputs",
    reduce="the all-reduce after the output projection",
    missing="Each rank's output projection gives only a partial sum over its heads: add the ranks' partial"
    " outputs with one all-reduce (an all-gather of the heads' outputs sends less but needs the whole output"
    " weight on every rank).",
    unreduced="The input of the QKV projection needs an operator whose backward all-reduces the gradient:"
    " every rank used the whole x, so each holds only its heads' share of the gradient.",
)


def wire_verdict(world_size: int, phase: str, problem: dict[str, Any], sent: list[int]) -> tuple[dict, str | None]:
    """What one measured call sent per rank against one all-reduce of its activation; None if right: in
    "forward" the output, in "backward" the gradient of the input, both batch x seq x d_model."""
    shape = [problem["batch"], problem["seq"], problem["d_model"]]
    return layers.all_reduce(world_size, phase, shape, sent, ADVICE)


def communication(facts: Facts) -> Outcome:
    return rules.layer_communication(facts, wire_verdict)


RULES = {"communication": communication}
