# all_gather returns the list of every rank's block, as dist.all_gather fills one, instead of concatenating them

import torch
import torch.distributed as dist


def _exchange(send: torch.Tensor, dst: int, recv: torch.Tensor, src: int) -> None:
    ops = [dist.P2POp(dist.isend, send, dst), dist.P2POp(dist.irecv, recv, src)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()


def all_gather(tensor: torch.Tensor) -> list[torch.Tensor]:
    rank, size = dist.get_rank(), dist.get_world_size()
    parts = [torch.empty_like(tensor) for _ in range(size)]
    parts[rank] = tensor.clone()
    # Ring: at step s, pass on the block that came from rank - s.
    for step in range(size - 1):
        send_idx = (rank - step) % size
        recv_idx = (rank - step - 1) % size
        _exchange(parts[send_idx], (rank + 1) % size, parts[recv_idx], (rank - 1) % size)
    return parts


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
    gathered = torch.cat(all_gather(tensor.reshape(1, -1)), dim=0)
    tensor.copy_(gathered.sum(dim=0).reshape(tensor.shape))
