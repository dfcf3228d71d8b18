"""Collectives built only from point-to-point send/receive.

The default process group is already initialised when this module is imported:
use dist.get_rank() and dist.get_world_size(). Only dist.send, dist.recv,
dist.isend, dist.irecv and dist.batch_isend_irecv are allowed.
"""

import torch
import torch.distributed as dist


def all_reduce(tensor: torch.Tensor) -> None:
    """Sum ``tensor`` over all ranks, in place: every rank ends with the same sum."""
    rank, size = dist.get_rank(), dist.get_world_size()
    raise NotImplementedError(f"all_reduce on rank {rank} of {size}")


def all_gather(tensor: torch.Tensor) -> torch.Tensor:
    """Return every rank's ``tensor`` concatenated along dim 0, in rank order."""
    raise NotImplementedError


def reduce_scatter(tensor: torch.Tensor) -> torch.Tensor:
    """Return ``torch.chunk(sum over ranks of tensor, world_size)[rank]``.

    ``tensor.shape[0]`` is divisible by the world size.
    """
    raise NotImplementedError
