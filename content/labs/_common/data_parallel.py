"""How the data-parallel labs split a global batch over the ranks and average gradients.

Public, as a lab's driver is: it runs in every rank beside your code, and the grader's
single-process reference uses ``whole_batch`` outside the sandbox.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist


def shard(t: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    """Rank ``rank``'s equal, contiguous slice of the global batch."""
    per = t.shape[0] // world_size
    return t[rank * per : (rank + 1) * per]


def whole_batch(per_rank: list[dict[str, Any]], step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Step ``step``'s global batch: every rank's shard of it (``inputs["x"][step]``...), in rank order."""
    return torch.cat([i["x"][step] for i in per_rank]), torch.cat([i["y"][step] for i in per_rank])


def average_gradients(model: torch.nn.Module) -> None:
    """The data-parallel part, done for you: one all-reduce of every gradient (a flat buffer), over the world size."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    offset = 0
    for g in grads:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()


def gradients(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A copy of every parameter's ``.grad`` by name; NaN where a parameter has none."""
    return {
        name: (p.grad.detach().clone() if p.grad is not None else torch.full_like(p, float("nan")))
        for name, p in model.named_parameters()
    }


def require_grads(model: torch.nn.Module, call: str, step: int, kind: str) -> None:
    """Raise, naming them, if any parameter has no ``.grad`` after the student's ``call`` in ``step``."""
    missing = [name for name, p in model.named_parameters() if p.grad is None]
    if missing:
        raise RuntimeError(
            f"{', '.join(missing)} has no .grad after {call} in step {step}:"
            f" leave every parameter's {kind} gradient in .grad"
        )
