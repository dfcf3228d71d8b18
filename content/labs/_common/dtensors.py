"""The FSDP labs' view of sharded parameters: a rank's own piece of a ``DTensor``, and every tensor in full.

Public, as a lab's driver is: it runs in every rank beside your code. ``torch.distributed.tensor``
is imported only when a function needs it, so a lab that never shards pays nothing for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeGuard

import torch
import torch.distributed as dist

if TYPE_CHECKING:
    from torch.distributed.tensor import DTensor


def is_dtensor(p: torch.Tensor) -> TypeGuard[DTensor]:
    from torch.distributed.tensor import DTensor

    return isinstance(p, DTensor)


def local(p: torch.Tensor) -> torch.Tensor:
    """This rank's own piece of a parameter or gradient: a ``DTensor``'s local shard, else the tensor itself.

    The optimizer updates the local shards in place (AdamW works element by element, so updating
    each shard is updating the whole tensor); running it on the ``DTensor`` parameters would give
    the same numbers, but DTensor's first dispatch of each operation costs most of a second in a new process.
    """
    return p.to_local() if is_dtensor(p) else p


def row_shard(t: torch.Tensor) -> tuple[torch.Tensor, torch.Size | None]:
    """(this rank's rows, the full shape) of a DTensor sharded by rows over every rank; else (a copy, None)."""
    from torch.distributed.tensor import Shard

    if is_dtensor(t):
        if tuple(t.placements) == (Shard(0),) and t.device_mesh.size() == dist.get_world_size() and t.dim():
            return t.to_local().detach().clone(), t.shape
        return t.full_tensor().detach().clone(), None
    return t.detach().clone(), None


def gather_full(pieces: dict[str, tuple[torch.Tensor, torch.Size | None]]) -> dict[str, torch.Tensor]:
    """Every tensor in full: the row shards in one all-gather per dtype (padded as torch.chunk cuts), the rest as is."""
    world_size = dist.get_world_size()
    out = {n: t for n, (t, shape) in pieces.items() if shape is None}
    for dtype in sorted({t.dtype for t, shape in pieces.values() if shape is not None}, key=str):
        sharded = {n: (t, s) for n, (t, s) in pieces.items() if s is not None and t.dtype == dtype}
        flat = []
        for t, shape in sharded.values():
            padded = t.new_zeros((-(-shape[0] // world_size), *shape[1:]))
            padded[: t.shape[0]] = t
            flat.append(padded.reshape(-1))
        mine = torch.cat(flat)
        gathered = mine.new_empty(world_size * mine.numel())
        dist.all_gather_single(gathered, mine)
        per_rank = gathered.view(world_size, -1)
        offset = 0
        for (n, (_, shape)), part in zip(sharded.items(), flat, strict=True):
            rows = -(-shape[0] // world_size)
            whole = per_rank[:, offset : offset + part.numel()].reshape(world_size * rows, *shape[1:])
            out[n] = whole[: shape[0]].clone()
            offset += part.numel()
    return {n: out[n] for n in pieces}
