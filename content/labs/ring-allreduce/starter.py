"""Ring all-reduce built from point-to-point send/receive.

The default process group is already initialised when this module is imported:
use dist.get_rank() and dist.get_world_size(). Only dist.send, dist.recv,
dist.isend, dist.irecv and dist.batch_isend_irecv are allowed.
"""

import torch
import torch.distributed as dist


def ring_all_reduce(tensor: torch.Tensor) -> None:
    """Sum ``tensor`` over all ranks in place with the ring algorithm.

    Reduce-scatter then all-gather; each rank sends only to (rank + 1) % N and
    receives only from (rank - 1) % N, 2 * (N - 1) chunks of about 1/N of the tensor.
    """
    rank, size = dist.get_rank(), dist.get_world_size()
    if size == 1:
        return
    right, left = (rank + 1) % size, (rank - 1) % size
    raise NotImplementedError(f"rank {rank}: send to rank {right}, receive from rank {left}")
