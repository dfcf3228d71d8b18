"""Debugging tools for distributed training: three diagnostics, on every rank.

The default process group (backend gloo) is already initialised when this module is
imported: use dist.get_rank() and dist.get_world_size(). The grader's public driver calls,
on every rank at the same time:

    gradient_norms(model)      # after loss.backward() on this rank's shard, before any averaging
    losses_in_sync(loss)       # loss: this rank's 0-dim float64 loss
    profiler = CommProfiler()  # then profiler.all_reduce / broadcast / all_gather ..., then
    profiler.table()           # one row per collective issued through the profiler

Diagnostics observe: leave every .grad and every tensor you are given as you found it
(except the tensors the profiled collectives write into, as torch.distributed would).
"""

import time

import torch
import torch.distributed as dist


def gradient_norms(model: torch.nn.Module) -> torch.Tensor:
    """Every rank's gradient norm, the same vector on every rank.

    Returns a float64 tensor of shape (world_size,) whose entry r is the L2 norm of rank r's
    own gradient over all parameters, sqrt(sum over parameters of (p.grad ** 2).sum()), as
    rank r holds it now (its local gradient, not an average). Send the norms, not the gradients.
    """
    local = torch.zeros((), dtype=torch.float64)
    for p in model.parameters():
        if p.grad is not None:
            # TODO: add this parameter's squared gradient entries to the local sum.
            raise NotImplementedError(f"add the squares of a gradient of shape {tuple(p.grad.shape)}")
    # TODO: take the square root, gather every rank's norm (dist.all_gather), return the vector.
    raise NotImplementedError(f"gather {local.dtype} norms from {dist.get_world_size()} ranks")


def losses_in_sync(loss: torch.Tensor) -> bool:
    """True on every rank if every rank's loss is the same float64 number, else False on every rank.

    Compare exactly: identical replicas on identical data compute bitwise identical losses,
    and a replica that drifted may differ only in the tenth significant digit. Every rank
    must reach the same answer, so every rank has to learn about every other rank's loss
    (for example all-reduce it with ReduceOp.MAX and with ReduceOp.MIN and compare).
    """
    # TODO: exchange the loss and return the same bool on every rank.
    raise NotImplementedError(f"compare the loss {float(loss):.6g} across {dist.get_world_size()} ranks")


class CommProfiler:
    """Runs collectives for the caller and times each one: a per-collective timing breakdown.

    Each method performs the collective exactly as torch.distributed does (same arguments,
    same effect on the tensors) and records one row. table() returns the rows in the order
    the collectives were issued, one per collective, each a dict:

        {"op": "all_reduce" | "broadcast" | "all_gather",
         "bytes": tensor.numel() * tensor.element_size(),   # of the `tensor` argument
         "seconds": wall-clock seconds the collective took on this rank (>= 0)}
    """

    def __init__(self) -> None:
        self.rows: list[dict[str, object]] = []

    def all_reduce(self, tensor: torch.Tensor, op=dist.ReduceOp.SUM) -> None:  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        # TODO: run dist.all_reduce(tensor, op=op) and record its row.
        raise NotImplementedError(f"all_reduce {tensor.numel()} elements, started at {start}")

    def broadcast(self, tensor: torch.Tensor, src: int) -> None:
        # TODO: run dist.broadcast(tensor, src=src) and record its row.
        raise NotImplementedError(f"broadcast from rank {src}")

    def all_gather(self, tensor_list: list[torch.Tensor], tensor: torch.Tensor) -> None:
        # TODO: run dist.all_gather(tensor_list, tensor) and record its row (bytes of `tensor`).
        raise NotImplementedError(f"all_gather into {len(tensor_list)} tensors")

    def table(self) -> list[dict[str, object]]:
        """The rows, in the order the collectives were issued."""
        return list(self.rows)
