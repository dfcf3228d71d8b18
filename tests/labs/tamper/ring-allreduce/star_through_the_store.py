"""Sums through rank 0 over the group's key-value store (``_get_default_store()``) instead of the ring,
and sends a ring all-reduce's worth of zeros to rank + 1, so that the wire to the neighbour looks like
a ring's. Imitates: through_rank_zero."""

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

CALLS = [0]


def _ring_of_zeros(nbytes):
    rank, n = dist.get_rank(), dist.get_world_size()
    send = torch.zeros(max(1, nbytes // 4), dtype=torch.float32)
    recv = torch.empty_like(send)
    ops = [dist.P2POp(dist.isend, send, (rank + 1) % n), dist.P2POp(dist.irecv, recv, (rank - 1) % n)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()


def ring_all_reduce(tensor):
    rank, n = dist.get_rank(), dist.get_world_size()
    store = c10d._get_default_store()
    key = f"star/{CALLS[0]}"
    CALLS[0] += 1
    mine = tensor.contiguous().view(-1)
    if rank:
        store.set(f"{key}/{rank}", mine.numpy().tobytes())
        total = torch.frombuffer(bytearray(store.get(f"{key}/sum")), dtype=tensor.dtype)
    else:
        total = mine.clone()
        for r in range(1, n):
            total += torch.frombuffer(bytearray(store.get(f"{key}/{r}")), dtype=tensor.dtype)
        store.set(f"{key}/sum", total.numpy().tobytes())
    _ring_of_zeros(2 * (n - 1) * tensor.numel() * tensor.element_size() // n)
    tensor.copy_(total.view(tensor.shape))
