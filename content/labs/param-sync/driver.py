"""Public driver for param-sync: what every rank does around your ``params_in_sync``.

Not secret: read it to see exactly what the grader does. In each call every rank builds a
float32 MLP from the parameters it is given (``inputs["params"]``, drawn by the grader; about
18 thousand of them, 70 KB) and calls your ``params_in_sync(model)``. Every rank is given the
same parameters, except in the calls where the grader changed one rank's copy: one element one
ulp away, or two unequal elements of one tensor swapped. No rank is told whether its copy is the
others': only comparing the copies can tell. What each rank's call returned is compared, outside
your code, with the truth: True exactly when the copies are bitwise identical.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch


def build_model(params: dict[str, torch.Tensor], dims: list[int]) -> torch.nn.Sequential:
    """The float32 MLP ``Linear, Tanh, Linear, Tanh, ..., Linear`` holding ``params`` (copied).

    ``params`` maps ``"0.weight"``, ``"0.bias"``, ``"2.weight"``, ... to this rank's copy.
    """
    layers: list[torch.nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(itertools.pairwise(dims)):
        # Made on the meta device (no default initialisation to throw away), then given the real
        # parameters; not Module.to_empty(), which imports ~500 modules (0.5 s) the first time.
        linear = torch.nn.Linear(fan_in, fan_out, device="meta")
        for name in ("weight", "bias"):
            setattr(linear, name, torch.nn.Parameter(params[f"{2 * i}.{name}"].clone()))
        layers.append(linear)
        if i < len(dims) - 2:
            layers.append(torch.nn.Tanh())
    return torch.nn.Sequential(*layers)


def answer(value: Any) -> bool | str:
    """What ``params_in_sync`` returned, as a bool; a one-element bool tensor or a numpy bool counts.

    Anything else comes back as a string describing it, which the judge reports.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, torch.Tensor) and value.dtype == torch.bool and value.numel() == 1:
        return bool(value.item())
    if type(value).__module__ == "numpy" and getattr(value, "shape", None) == () and value.dtype.kind == "b":
        return bool(value)  # numpy.bool_, e.g. from (a == b).all() on arrays
    return f"not a bool: {type(value).__name__} {repr(value)[:60]}"


def check(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Build this rank's copy of the call's model, ask the student's function.

    ``in_sync``: what ``params_in_sync(model)`` returned on this rank (judged).
    """
    model = build_model(inputs["params"], list(inputs["dims"]))
    return {"in_sync": answer(submission.params_in_sync(model))}
