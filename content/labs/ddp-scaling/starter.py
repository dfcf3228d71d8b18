"""DDP scaling efficiency: data-parallel training, and what it costs on a model clock.

The default process group (backend gloo) is already initialised when this module is imported:
use dist.get_rank() and dist.get_world_size(). The grader's public driver (its loop is in the
statement) trains the model; at each step, on every rank, it does:

    loss = mean squared error over this rank's own shard of the step's batch
    loss.backward()
    sync_gradients(model)                                  # <- yours
    p <- p - lr * (p.grad + weight_decay * p)              # plain SGD, every parameter

Then it asks your throughput() for the samples per second of that loop on the model clock, at
1 rank and at its world size N, and your scaling_efficiency() for T_N / (N T_1).

Use torch.distributed collectives; DistributedDataParallel is not allowed.
"""

import torch
import torch.distributed as dist


def sync_gradients(model: torch.nn.Module) -> None:
    """Make every parameter's .grad, on every rank, the mean of the ranks' gradients (in place).

    dist.all_reduce sums: divide by the world size. One all-reduce per parameter, or one of a flat
    buffer copied back into each .grad: both are right, and they cost differently on the clock.
    """
    # TODO: all-reduce the gradients and divide them by dist.get_world_size().
    raise NotImplementedError(f"average the gradients over the ranks (world size {dist.get_world_size()})")


def throughput(model: torch.nn.Module, clock: dict, world_size: int, global_batch: int) -> float:
    """Samples per second, all ranks together, of one training step of your loop at ``world_size`` ranks.

    ``clock`` holds ``sample_s`` (forward and backward of one example), ``update_s`` (the optimizer
    step), ``alpha_s`` (latency of one message) and ``beta_Bps`` (bytes per second over a link). A
    ring all-reduce of S bytes on N ranks takes 2(N-1) alpha + 2(N-1)/N x S / beta. Price the
    all-reduces your sync_gradients makes: the grader counts them on the wire.
    """
    # TODO: the step time t at world_size ranks, then global_batch / t.
    raise NotImplementedError(f"the model clock's throughput at {world_size} ranks")


def scaling_efficiency(throughput_1: float, throughput_n: float, world_size: int) -> float:
    """The scaling efficiency E_N of ``throughput_n`` at ``world_size`` ranks against ``throughput_1`` on one."""
    # TODO: E_N = T_N / (N T_1).
    raise NotImplementedError("the scaling efficiency")
