"""Trusted checks for tensor-parallel: the single-process MLP for each drawn seed and the wire rule.

Never mounted into the sandbox and never shown to students. The tensors come from
the public driver's ``problem()`` (so a rank and this reference draw the same
ones); everything computed from them here is the reference.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from labs import rules
from labs.judge import Case, Facts, Outcome
from labs.public import load_public

# The measured MLP: 64 x 512 float64 inputs (256 KiB) and 64 x 384 outputs (192 KiB), large
# enough that gloo's framing is noise; hidden 192 splits over 2, 3 and 4 ranks. Its weights
# (768 KiB and 576 KiB) would stand out on the wire if a layer gathered them.
MEASURED = {"batch": [64], "d_in": 512, "d_hidden": 192, "d_out": 384, "bias": True}
# No biases, a 3-d input and sizes that do not divide: the layers are not written for one shape.
SMALL = {"batch": [2, 3], "d_in": 10, "d_hidden": 24, "d_out": 7, "bias": False}
TOLERANCE = (1e-9, 1e-11)  # float64; the ranks sum the partial products in another order
KEYS = ("hidden", "output", "column_weights", "row_weights", "grad_x", "grads")
# One all-reduce sends 2(N-1)/N of the tensor per rank; allow 10% and a little framing on top,
# and require at least 90% of it (fewer bytes: the all-reduce is missing).
SLACK, FRAMING = 0.10, 16384
ELEMENT = 8  # float64
DRIVER = load_public(__file__, "driver")  # problem(): the same tensors as in the ranks


def reference(driver: Any, problem: dict[str, Any]) -> dict[str, Any]:
    """One process runs the whole MLP: hidden pre-activations, output and every gradient."""
    p = driver.problem(**problem)
    x = p["x"].clone().requires_grad_(True)
    params = {k: p[k].clone().requires_grad_(True) for k in ("w1", "b1", "w2", "b2") if p[k] is not None}
    hidden = F.linear(x, params["w1"], params.get("b1"))
    y = F.linear(F.gelu(hidden), params["w2"], params.get("b2"))
    (y * p["grad_y"]).sum().backward()
    out = {"hidden": hidden.detach(), "output": y.detach(), "grad_x": x.grad}
    out.update({k: v.detach() for k, v in params.items()})
    out.update({f"grad_{k}": v.grad for k, v in params.items()})
    return out


def expected(driver: Any, problem: dict[str, Any], world_size: int) -> tuple[list[dict], list[dict]]:
    """Each rank's expected forward and backward results: its chunks of the reference."""
    ref = reference(driver, problem)
    n, bias = world_size, problem["bias"]
    forward, backward = [], []
    for r in range(n):
        forward.append(
            {
                "hidden": ref["hidden"].chunk(n, dim=-1)[r].clone(),
                "output": ref["output"],
                "column_weights": {
                    "weight": ref["w1"].chunk(n, dim=0)[r].clone(),
                    "bias": ref["b1"].chunk(n, dim=0)[r].clone() if bias else "None",
                },
                "row_weights": {"weight": ref["w2"].chunk(n, dim=1)[r].clone(), "bias": ref["b2"] if bias else "None"},
            }
        )
        column = {"weight": ref["grad_w1"].chunk(n, dim=0)[r].clone()}
        row = {"weight": ref["grad_w2"].chunk(n, dim=1)[r].clone()}
        if bias:
            column["bias"] = ref["grad_b1"].chunk(n, dim=0)[r].clone()
            row["bias"] = ref["grad_b2"]
        backward.append({"grad_x": ref["grad_x"], "grads": {"column": column, "row": row}})
    return forward, backward


def _shape(problem: dict[str, Any], last: int) -> str:
    return " x ".join(str(d) for d in [*problem["batch"], last])


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    tolerance = dict.fromkeys(KEYS, TOLERANCE)
    out = []
    for key, dims in (("mlp", MEASURED), ("no-bias", SMALL)):
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
        problem = {"seed": seed, **dims}
        forward, backward = expected(DRIVER, problem, world_size)
        what = (
            f"{_shape(problem, dims['d_in'])} input, hidden {dims['d_hidden']}, output {dims['d_out']}"
            f"{'' if dims['bias'] else ', no biases'}"
        )
        measured = key == "mlp"
        out.append(
            Case(
                check="forward",
                fn="ColumnParallelLinear, RowParallelLinear",
                driver="forward",
                label=f"forward: Row(gelu(Column(x))), {what}",
                inputs=[{"key": key, "problem": dict(problem)} for _ in range(world_size)],
                expected=forward,
                inplace=False,
                measure=measured,
                parts={"forward": ["hidden", "output"], "sharding": ["column_weights", "row_weights"]},
                tolerance=tolerance,
            )
        )
        out.append(
            Case(
                check="input-gradient",
                fn="ColumnParallelLinear, RowParallelLinear",
                driver="backward",
                label=f"backward of the same output, {what}",
                inputs=[{"key": key, "problem": dict(problem)} for _ in range(world_size)],
                expected=backward,
                inplace=False,
                measure=measured,
                parts={"input-gradient": ["grad_x"], "weight-gradients": ["grads"]},
                tolerance=tolerance,
            )
        )
    return out


def wire_verdict(world_size: int, phase: str, problem: dict[str, Any], sent: list[int]) -> tuple[dict, str | None]:
    """What one measured call sent per rank against one all-reduce of its activation; None if right.

    ``phase`` is "forward" (the output, batch x d_out, is all-reduced) or "backward"
    (the gradient of the input, batch x d_in).
    """
    n = world_size
    last = problem["d_out"] if phase == "forward" else problem["d_in"]
    tensor = math.prod(problem["batch"]) * last * ELEMENT
    budget = rules.one_all_reduce(n, tensor, sent, SLACK, FRAMING)
    theory, high, low, data = budget["theory"], budget["high"], budget["low"], budget["shown"]
    what = "output" if phase == "forward" else "gradient of x"
    one = (
        f"one all-reduce of the {_shape(problem, last)} float64 {what} sends 2(N-1)/N x {tensor:,} = "
        f"{round(theory):,} bytes per rank"
    )
    for r, s in enumerate(sent):
        if s > high:
            extra = (
                "More than one all-reduce, or weights on the wire: keep only your chunk of the weight and sum"
                " the partial products of RowParallelLinear with a single all-reduce."
                if phase == "forward"
                else "More than one all-reduce in backward: RowParallelLinear's all-reduce must pass the output"
                " gradient through unchanged (its backward is the identity), not all-reduce it again."
            )
            return data, f"world size {n}, {phase}: rank {r} sent {s:,} bytes, but {one}. {extra}"
        if s < low:
            missing = (
                "RowParallelLinear must sum the ranks' partial products with one all-reduce."
                if phase == "forward"
                else "ColumnParallelLinear's backward must all-reduce the gradient of its input: every rank"
                " used the whole x, so each holds only its share of the gradient."
            )
            return data, f"world size {n}, {phase}: rank {r} sent only {s:,} bytes, but {one}. {missing}"
    return data, None


def communication(facts: Facts) -> Outcome:
    return rules.wire_per_phase(
        facts, wire_verdict, "one all-reduce of the output forward and one of the input gradient backward"
    )


RULES = {"communication": communication}
