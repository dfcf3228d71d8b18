# all_gather broadcasts each rank's block with the built-in dist.broadcast instead of send/recv

import torch
import torch.distributed as dist


def _exchange(send: torch.Tensor, dst: int, recv: torch.Tensor, src: int) -> None:
    ops = [dist.P2POp(dist.isend, send, dst), dist.P2POp(dist.irecv, recv, src)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()


def all_gather(tensor: torch.Tensor) -> torch.Tensor:
    rank, size = dist.get_rank(), dist.get_world_size()
    parts = [torch.empty_like(tensor) for _ in range(size)]
    parts[rank] = tensor.clone()
    for root in range(size):  # each rank broadcasts its block in turn
        dist.broadcast(parts[root], src=root)
    return torch.cat(parts, dim=0)


def reduce_scatter(tensor: torch.Tensor) -> torch.Tensor:
    rank, size = dist.get_rank(), dist.get_world_size()
    chunks = [c.clone() for c in torch.chunk(tensor, size)]
    # Ring: after size - 1 steps, chunk `rank` has been summed over every rank.
    for step in range(size - 1):
        send_idx = (rank - step - 1) % size
        recv_idx = (rank - step - 2) % size
        incoming = torch.empty_like(chunks[recv_idx])
        _exchange(chunks[send_idx], (rank + 1) % size, incoming, (rank - 1) % size)
        chunks[recv_idx] += incoming
    return chunks[rank]


def all_reduce(tensor: torch.Tensor) -> None:
    # Gather every rank's flattened tensor, then sum in rank order on each rank.
    gathered = all_gather(tensor.reshape(1, -1))
    tensor.copy_(gathered.sum(dim=0).reshape(tensor.shape))
