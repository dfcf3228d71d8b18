"""Trusted checks for tensor-parallel: each rank's weight chunks, the single-process MLP, the wire rule.

Never mounted into the sandbox and never shown to students. Each rank's chunks of the weights are
drawn here from that rank's own generator and given to that rank only (the driver pads them to
full shape with NaN); what every rank shares comes from the public driver's ``shared()``. The
reference runs the whole MLP on all of them.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from labs.authoring import Case, Facts, Outcome, layers, load_public, rules

# The measured MLP: 64 x 512 float64 inputs (256 KiB) and 64 x 384 outputs (192 KiB), large
# enough that gloo's framing is noise; hidden 192 splits over 2, 3 and 4 ranks. Its weights
# (768 KiB and 576 KiB) would stand out on the wire if a layer gathered them.
MEASURED: dict[str, Any] = {"batch": [64], "d_in": 512, "d_hidden": 192, "d_out": 384, "bias": True}
# No biases, a 3-d input and sizes that do not divide: the layers are not written for one shape.
SMALL: dict[str, Any] = {"batch": [2, 3], "d_in": 10, "d_hidden": 24, "d_out": 7, "bias": False}
TOLERANCE = layers.TOLERANCE
KEYS = ("hidden", "output", "column_weights", "row_weights", "grad_x", "grads")
DRIVER = load_public(__file__, "driver")  # shared(): what every rank holds, as in the ranks
FN = "ColumnParallelLinear, RowParallelLinear"


def chunks(problem: dict[str, Any], own: list[torch.Generator]) -> list[dict[str, Any]]:
    """Each rank's own chunks of ``w1`` (rows), ``b1`` and ``w2`` (columns), from its own generator.

    A rank is given its chunks and nothing else of the weights, so it cannot draw another's.
    """
    n, f64 = len(own), torch.float64
    d_in, hidden, d_out = problem["d_in"], problem["d_hidden"], problem["d_out"]
    out = []
    for r, g in enumerate(own):
        rows = DRIVER.chunk_slice(hidden, n, r)
        width = rows.stop - rows.start
        out.append(
            {
                "w1": torch.randn(width, d_in, generator=g, dtype=f64) / math.sqrt(d_in),
                "b1": torch.randn(width, generator=g, dtype=f64) * 0.1 if problem["bias"] else None,
                "w2": torch.randn(d_out, width, generator=g, dtype=f64) / math.sqrt(hidden),
            }
        )
    return out


def mlp(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, b1: Any = None, b2: Any = None) -> dict[str, Any]:
    """The whole MLP, ``Row(gelu(Column(x)))``, in one process: its hidden activation and its output."""
    hidden = F.linear(x, w1, b1)
    return {"hidden": hidden, "output": F.linear(F.gelu(hidden), w2, b2)}


def reference(problem: dict[str, Any], parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One process runs the whole MLP (every rank's chunks put together): hidden, output and every gradient."""
    p = DRIVER.shared(**problem)
    full = {
        "w1": torch.cat([c["w1"] for c in parts], dim=0),
        "b1": torch.cat([c["b1"] for c in parts]) if problem["bias"] else None,
        "w2": torch.cat([c["w2"] for c in parts], dim=1),
        "b2": p["b2"],
    }
    return layers.reference(mlp, p["x"], p["grad_y"], full)


def expected(problem: dict[str, Any], parts: list[dict[str, Any]]) -> tuple[list[dict], list[dict]]:
    """Each rank's expected forward and backward results: its chunks of the reference."""
    ref = reference(problem, parts)
    n, bias = len(parts), problem["bias"]
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


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    out = []
    for problem, forward, backward in layers.calls(
        world_size, gen, {"mlp": MEASURED, "no-bias": SMALL}, chunks, expected, KEYS
    ):
        shape = " x ".join(map(str, [*problem["batch"], problem["d_in"]]))
        what = f"{shape} input, hidden {problem['d_hidden']}, output {problem['d_out']}"
        what += "" if problem["bias"] else ", no biases"
        out.append(
            Case(check="forward", fn=FN, driver="forward", label=f"forward: Row(gelu(Column(x))), {what}",
                 # "sharding" (what each layer keeps) is read from the rank's own objects: feedback only.
                 parts={"forward": ["hidden", "output"], "sharding": ["column_weights", "row_weights"]}, **forward)
        )  # fmt: skip
        out.append(
            Case(check="input-gradient", fn=FN, driver="backward", label=f"backward of the same output, {what}",
                 parts={"input-gradient": ["grad_x"], "weight-gradients": ["grads"]}, **backward)
        )  # fmt: skip
    return out


ADVICE = layers.advice(
    kept="your chunk of the weight",
    summed="the partial products of RowParallelLinear",
    reduce="RowParallelLinear's all-reduce",
    missing="RowParallelLinear must sum the ranks' partial products with one all-reduce.",
    unreduced="ColumnParallelLinear's backward must all-reduce the gradient of its input: every rank used the"
    " whole x, so each holds only its share of the gradient.",
)


def wire_verdict(world_size: int, phase: str, problem: dict[str, Any], sent: list[int]) -> tuple[dict, str | None]:
    """What one measured call sent per rank against one all-reduce of its activation; None if right: in
    "forward" the output (batch x d_out), in "backward" the gradient of the input (batch x d_in)."""
    last = problem["d_out"] if phase == "forward" else problem["d_in"]
    return layers.all_reduce(world_size, phase, [*problem["batch"], last], sent, ADVICE)


def communication(facts: Facts) -> Outcome:
    return rules.layer_communication(facts, wire_verdict)


RULES = {"communication": communication}
