"""Trusted helper for fsdp-wrapping's checks (never mounted in a rank): what each strategy must look like.

A strategy's FSDP units, the peak of unsharded parameter bytes it holds and the bytes its all-gathers put
on the wire follow from the model's parameter names and sizes alone: they are computed here on the lab's
``Net`` built on the meta device (``shapes``), never on a rank's say.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from labs.authoring import load_public

ROOT = "(root)"
DRIVER = load_public(__file__, "driver")


def shapes(dims: dict[str, int]) -> nn.Module:
    """The lab's ``Net`` of ``dims`` on the meta device: its parameters' names, shapes and sizes, no storage."""
    with torch.device("meta"):
        return DRIVER.Net(dims["width"], dims["blocks"], torch.float64)


def nbytes(p: torch.Tensor) -> int:
    return p.numel() * p.element_size()


def unit_parameters(model: nn.Module, strategy: str) -> dict[str, list[str]]:
    """The FSDP units a strategy makes, each with the parameters it holds (the root: all the rest)."""
    if strategy == "per-layer":
        inner = [name for name, m in model.named_modules() if isinstance(m, nn.Linear)]
    elif strategy == "per-block":
        inner = [f"blocks.{name}" for name, _ in model.get_submodule("blocks").named_children()]
    else:
        inner = []
    units: dict[str, list[str]] = {ROOT: []}
    for name in inner:
        units[name] = []
    for pname, _ in model.named_parameters():
        owner = next((u for u in inner if pname.startswith(u + ".")), ROOT)
        units[owner].append(pname)
    return units


def unit_bytes(model: nn.Module, strategy: str) -> dict[str, int]:
    params = dict(model.named_parameters())
    return {u: sum(nbytes(params[p]) for p in names) for u, names in unit_parameters(model, strategy).items()}


def peak_bytes(model: nn.Module, strategy: str) -> int:
    """The root unit stays unsharded from the forward to the end of the backward; each inner unit is
    unsharded only while it runs (forward) or while its gradients are computed (backward)."""
    sizes = unit_bytes(model, strategy)
    inner = [b for u, b in sizes.items() if u != ROOT]
    return sizes[ROOT] + max(inner, default=0)


def gathered_bytes(model: nn.Module, strategy: str, *, root_resharded: bool = False) -> int:
    """Bytes all-gathered (the full size of each unit) in one forward and backward.

    With fully_shard's default (``reshard_after_forward=None`` in torch 2.13) the root is gathered
    once: it keeps its parameters from the forward to the backward. Every inner unit is resharded
    after its forward and gathered again for its backward. ``root_resharded``: the root was wrapped
    with ``reshard_after_forward=True``, which is as right, and gathers it again too.
    """
    sizes = unit_bytes(model, strategy)
    return sizes[ROOT] * (2 if root_resharded else 1) + 2 * sum(b for u, b in sizes.items() if u != ROOT)


def expected_probe(model: nn.Module, strategy: str, world_size: int) -> dict[str, Any]:
    sharding = {
        name: {"sharded": True, "placements": "Shard(0)", "local_rows": p.shape[0] // world_size}
        for name, p in model.named_parameters()
    }
    return {"units": sorted(unit_parameters(model, strategy)), "sharding": sharding}
