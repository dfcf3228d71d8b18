"""Public driver for param-sync: what every rank does around your ``params_in_sync``.

Not secret: read it to see exactly what the grader does. In each call every rank
builds the same float32 MLP from the seed it is given (about a million parameters,
4.3 MB), the one rank named in its inputs changes its own copy (one element one
ulp away, or two unequal elements of one tensor swapped), and then every rank calls
your ``params_in_sync(model)``. What each rank's call returned is compared, outside
your code, with the truth: True exactly when the copies are bitwise identical.
"""

from __future__ import annotations

import copy
import itertools
import math
from typing import Any

import torch

_BUILT: dict[tuple[int, tuple[int, ...]], torch.nn.Sequential] = {}


def build_model(seed: int, dims: list[int]) -> torch.nn.Sequential:
    """The float32 MLP ``Linear, Tanh, Linear, Tanh, ..., Linear`` with parameters drawn from ``seed``.

    Each call returns a fresh copy; the last model drawn is kept, as three calls share a seed.
    """
    key = (seed, tuple(dims))
    if key not in _BUILT:
        _BUILT.clear()
        _BUILT[key] = _draw_model(seed, dims)
    return copy.deepcopy(_BUILT[key])


def _draw_model(seed: int, dims: list[int]) -> torch.nn.Sequential:
    gen = torch.Generator().manual_seed(seed)
    layers: list[torch.nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(itertools.pairwise(dims)):
        # Made on the meta device (no default initialisation to throw away), then given real
        # parameters; not Module.to_empty(), which imports ~500 modules (0.5 s) the first time.
        linear = torch.nn.Linear(fan_in, fan_out, device="meta")
        bound = fan_in**-0.5
        for name, shape in (("weight", (fan_out, fan_in)), ("bias", (fan_out,))):
            values = torch.rand(shape, generator=gen).mul_(2 * bound).sub_(bound)
            setattr(linear, name, torch.nn.Parameter(values))
        layers.append(linear)
        if i < len(dims) - 2:
            layers.append(torch.nn.Tanh())
    return torch.nn.Sequential(*layers)


def apply_change(model: torch.nn.Module, change: dict[str, Any]) -> str:
    """Change this rank's copy as ``change`` says; returns what was done, for the result page.

    ``{"kind": "ulp", "param": name, "index": i, "up": bool}``: element ``i`` (of the flattened
    parameter) becomes the next float32 above (or below) it, ``torch.nextafter``.
    ``{"kind": "swap", "param": name, "index": i, "other": j}``: elements ``i`` and ``j`` trade
    places; if they are equal, ``j`` moves on to the next element that differs from element ``i``,
    so the copy really differs while every sum over the tensor stays the same.
    """
    params = dict(model.named_parameters())
    flat = params[change["param"]].detach().view(-1)
    i = int(change["index"])
    with torch.no_grad():
        if change["kind"] == "ulp":
            before = flat[i].clone()
            towards = torch.tensor(math.inf if change["up"] else -math.inf)
            flat[i] = torch.nextafter(before, towards)
            return f"{change['param']}[{i}]: {float(before)!r} -> {float(flat[i])!r}"
        j = int(change["other"])
        while bool(flat[j] == flat[i]):
            j = (j + 1) % flat.numel()
        a, b = flat[i].clone(), flat[j].clone()
        flat[i], flat[j] = b, a
        return f"{change['param']}[{i}] <-> [{j}]: {float(a)!r} <-> {float(b)!r}"


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
    text = repr(value)
    return f"not a bool: {type(value).__name__} {text[:60]}"


def check(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Build this call's model, change it if this rank is the one named, ask the student's function.

    ``in_sync``: what ``params_in_sync(model)`` returned on this rank (judged).
    ``changed``: what this rank changed in its copy, or "" (shown, never judged).
    """
    model = build_model(int(inputs["seed"]), list(inputs["dims"]))
    change = inputs.get("change")
    changed = apply_change(model, change) if change else ""
    return {"in_sync": answer(submission.params_in_sync(model)), "changed": changed}
