"""Reference solution for ddp-scaling (the project's tests and authors only; never shown to students)."""

import torch
import torch.distributed as dist


def sync_gradients(model: torch.nn.Module) -> None:
    grads = [p.grad for p in model.parameters()]
    flat = torch.cat([g.reshape(-1) for g in grads])  # one all-reduce for the whole model
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    offset = 0
    for g in grads:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()


def allreduce_seconds(nbytes: int, world_size: int, clock: dict) -> float:
    """A ring all-reduce of ``nbytes`` on ``world_size`` ranks: 2(N-1) latencies, 2(N-1)/N x S over each link."""
    n = world_size
    return 2 * (n - 1) * clock["alpha_s"] + 2 * (n - 1) / n * nbytes / clock["beta_Bps"]


def throughput(model: torch.nn.Module, clock: dict, world_size: int, global_batch: int) -> float:
    nbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    compute = global_batch / world_size * clock["sample_s"]  # each rank: forward and backward of its shard
    step = compute + allreduce_seconds(nbytes, world_size, clock) + clock["update_s"]  # one flat all-reduce
    return global_batch / step  # samples per second, all ranks together


def scaling_efficiency(throughput_1: float, throughput_n: float, world_size: int) -> float:
    return throughput_n / (world_size * throughput_1)
