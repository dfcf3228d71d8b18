"""Broadcast a tensor down a binomial tree, with point-to-point messages only.

The default process group is already initialised when this module is imported.
Only dist.send, dist.recv, dist.isend, dist.irecv and dist.batch_isend_irecv are allowed.
"""

import torch
import torch.distributed as dist


def tree_broadcast(tensor: torch.Tensor, src: int) -> None:
    """Leave rank ``src``'s ``tensor`` in ``tensor`` on every rank, in ⌈log2 N⌉ rounds."""
    rank, size = dist.get_rank(), dist.get_world_size()
    vrank = (rank - src) % size  # this rank's number counted from the source
    raise NotImplementedError(f"rank {rank} (virtual rank {vrank} of {size}): receive once, then pass it on")
