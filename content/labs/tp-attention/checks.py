"""Trusted checks for tp-attention: each rank's heads, one process running the whole layer, the wire rule.

Never mounted into the sandbox and never shown to students. Each rank's heads (its rows of Q, K
and V and their columns of the output projection) are drawn here from that rank's own generator
and given to that rank only (the driver pads them to full shape with NaN); what every rank shares
comes from the public driver's ``shared()``. The reference runs the whole layer on all of them.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from labs.authoring import Case, Facts, Outcome, load_public, rules

# The measured layer: a 2 x 96 x 192 float64 input and output (288 KiB each), large enough that
# gloo's framing is noise; 12 heads split over 2, 3 and 4 ranks. Its weights (864 KiB for the
# fused QKV projection, 288 KiB for the output projection) would stand out on the wire.
MEASURED: dict[str, Any] = {"batch": 2, "seq": 96, "d_model": 192, "heads": 12, "bias": True}
# No biases and a head dimension of 3: the layer is not written for one shape.
SMALL: dict[str, Any] = {"batch": 3, "seq": 5, "d_model": 36, "heads": 12, "bias": False}
TOLERANCE = (1e-9, 1e-11)  # float64; the ranks sum the partial products in another order
KEYS = ("output", "weights", "grad_x", "grads")
# One all-reduce sends 2(N-1)/N of the tensor per rank; allow 10% and a little framing on top,
# and require at least 90% of it (fewer bytes: the all-reduce is missing).
SLACK, FRAMING = 0.10, 16384
ELEMENT = 8  # float64
DRIVER = load_public(__file__, "driver")  # shared(): what every rank holds, as in the ranks


def attention(x: torch.Tensor, w_qkv, b_qkv, w_out, b_out, heads: int) -> torch.Tensor:
    """Multi-head self-attention with all ``heads`` in one process (as ``torch.nn.MultiheadAttention``)."""
    batch, seq, d = x.shape
    q, k, v = (t.reshape(batch, seq, heads, d // heads).transpose(1, 2) for t in F.linear(x, w_qkv, b_qkv).chunk(3, -1))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d // heads)
    context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, seq, d)
    return F.linear(context, w_out, b_out)


def heads(problem: dict[str, Any], own: list[torch.Generator]) -> list[dict[str, Any]]:
    """Each rank's own heads, from its own generator: its rows of Q, K and V stacked (``w_qkv``, ``b_qkv``)
    and their columns of the output projection (``w_out``). A rank is given these and nothing else
    of the weights, so it cannot draw another's."""
    d, n, f64 = problem["d_model"], len(own), torch.float64
    out = []
    for r in range(n):
        width = d // n
        out.append(
            {
                "w_qkv": torch.randn(3 * width, d, generator=own[r], dtype=f64) / math.sqrt(d),
                "b_qkv": torch.randn(3 * width, generator=own[r], dtype=f64) * 0.1 if problem["bias"] else None,
                "w_out": torch.randn(d, width, generator=own[r], dtype=f64) / math.sqrt(d),
            }
        )
    return out


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
    x = p["x"].clone().requires_grad_(True)
    params = {k: p[k].clone().requires_grad_(True) for k in ("w_qkv", "b_qkv", "w_out", "b_out") if p[k] is not None}
    y = attention(x, params["w_qkv"], params.get("b_qkv"), params["w_out"], params.get("b_out"), problem["heads"])
    (y * p["grad_y"]).sum().backward()
    out = {"output": y.detach(), "grad_x": x.grad}
    out.update({k: v.detach() for k, v in params.items()})
    out.update({f"grad_{k}": v.grad for k, v in params.items()})
    return out


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


def describe(problem: dict[str, Any]) -> str:
    return (
        f"{problem['batch']} x {problem['seq']} x {problem['d_model']} input, {problem['heads']} heads"
        f"{'' if problem['bias'] else ', no biases'}"
    )


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    tolerance = dict.fromkeys(KEYS, TOLERANCE)
    out = []
    for key, problem, parts in rules.layer_problems(world_size, gen, {"attention": MEASURED, "no-bias": SMALL}, heads):
        forward, backward = expected(problem, parts)
        what = describe(problem)
        run: dict[str, Any] = {
            "key": key,
            "problem": problem,
            "parts": parts,
            "measured": key == "attention",
            "tolerance": tolerance,
        }
        out.append(
            Case(check="forward", fn="ParallelSelfAttention", driver="forward",
                 label=f"forward of self-attention, {what}",
                 # "sharding" (what the layer keeps) is read from the rank's own object: feedback only.
                 parts={"forward": ["output"], "sharding": ["weights"]},
                 **rules.layer_call("forward", expected=forward, **run))
        )  # fmt: skip
        out.append(
            Case(check="input-gradient", fn="ParallelSelfAttention", driver="backward",
                 label=f"backward of the same output, {what}",
                 parts={"input-gradient": ["grad_x"], "weight-gradients": ["grads"]},
                 **rules.layer_call("backward", expected=backward, **run))
        )  # fmt: skip
    return out


# What too many bytes mean, then too few, in each phase.
ADVICE = {
    "forward": (
        "More than one all-reduce, or weights on the wire: keep only your heads' rows of the QKV weight"
        " and your columns of the output weight, and sum the partial outputs with a single all-reduce.",
        "Each rank's output projection gives only a partial sum over its heads: add the ranks' partial"
        " outputs with one all-reduce (an all-gather of the heads' outputs sends less but needs the"
        " whole output weight on every rank).",
    ),
    "backward": (
        "More than one all-reduce in backward: the all-reduce after the output projection must pass"
        " the output gradient through unchanged (its backward is the identity), not all-reduce it again.",
        "The input of the QKV projection needs an operator whose backward all-reduces the gradient:"
        " every rank used the whole x, so each holds only its heads' share of the gradient.",
    ),
}


def wire_verdict(world_size: int, phase: str, problem: dict[str, Any], sent: list[int]) -> tuple[dict, str | None]:
    """What one measured call sent per rank against one all-reduce of its activation; None if right.

    ``phase`` is "forward" (the output is all-reduced) or "backward" (the gradient of the
    input); both are batch x seq x d_model.
    """
    shape = f"{problem['batch']} x {problem['seq']} x {problem['d_model']}"
    tensor = (shape, problem["batch"] * problem["seq"] * problem["d_model"] * ELEMENT)
    return rules.all_reduce_bytes(world_size, phase, tensor, sent, bounds=(SLACK, FRAMING), advice=ADVICE[phase])


def communication(facts: Facts) -> Outcome:
    return rules.layer_communication(facts, wire_verdict)


RULES = {"communication": communication}
