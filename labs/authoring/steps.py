"""What the data-parallel training labs share (trusted, outside the sandbox).

``private_shards``: every rank's inputs for a lab whose ranks each train on their own shard of each
step's global batch (ddp-from-scratch, grad-accumulation). ``traffic``: one rank's bytes beside one
all-reduce of the gradients per step, in words, for ``training.gradient_bytes``'s ``over`` and ``under``.
"""

from __future__ import annotations

from typing import Any

from labs.authoring.training import secret_generators


def private_shards(
    world_size: int, gen: Any, settings: dict[str, Any], *, dims: list[int], batch: int, steps: int
) -> list[dict[str, Any]]:
    """Every rank's inputs: ``settings``, the model's ``seed`` and ``dims`` (the same everywhere), ``steps``, and
    only the rank's own float64 shard of each step's global batch of ``batch`` examples (``x``, ``y``: a list
    of one tensor per step).

    Each shard is drawn from that rank's own generator (``secret_generators``), so no rank can work out
    another's data: the whole batch's gradient exists only once the ranks have communicated.
    """
    import torch

    shared, *own = secret_generators(gen, world_size + 1)
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=shared))
    per = batch // world_size
    out = []
    for r in range(world_size):
        xs = [torch.randn(per, dims[0], generator=own[r], dtype=torch.float64) for _ in range(steps)]
        ys = [torch.randn(per, dims[-1], generator=own[r], dtype=torch.float64) for _ in range(steps)]
        out.append({"seed": seed, "dims": dims, "steps": steps, **settings, "x": xs, "y": ys})
    return out


def traffic(
    world_size: int, rank: int, sent: int, theory: float, size: int, steps: int, *, unit: str = "steps", extra: str = ""
) -> str:
    """What rank ``rank`` sent in ``steps`` steps (``unit`` names them) beside ``theory``, one all-reduce of the
    ``size``-byte gradients per step: "world size 2: rank 1 sent 98304 bytes in 4 steps, 1.36 times one
    all-reduce ..."; ``extra`` goes inside the closing parenthesis of a rank that sent more."""
    where = f"world size {world_size}: rank {rank} sent"
    if sent > theory:
        return (
            f"{where} {sent} bytes in {steps} {unit}, {sent / theory:.3g} times one all-reduce of the {size}-byte"
            f" gradients per step (2(N-1)/N x {size} x {steps} = {round(theory)}{extra})"
        )
    return (
        f"{where} only {sent} bytes in {steps} {unit}, {sent / theory:.3g} of one all-reduce of the {size}-byte"
        f" float64 gradients per step ({round(theory)})"
    )
