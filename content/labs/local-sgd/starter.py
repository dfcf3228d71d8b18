"""Local SGD: H local optimizer steps on every rank, then the ranks average their parameters.

The default process group (backend gloo) is already initialised when this module is
imported: use dist.get_rank() and dist.get_world_size(). The grader's public driver (its loop
is in the statement) trains the model; on every rank, at each step = 0, 1, ..., 7, it does:

    optimizer.zero_grad()
    loss = mean squared error over this rank's own shard of the step's batch
    loss.backward()
    local_sgd_step(model, optimizer, step, H)     # <- yours

Use torch.distributed collectives; DistributedDataParallel is not allowed.
"""

import torch
import torch.distributed as dist


def average_parameters(model: torch.nn.Module) -> None:
    """Replace every parameter, on every rank, with its mean over all the ranks (in place).

    One all-reduce per parameter, or one of a flat buffer copied back into the parameters, both do.
    Change the parameters' values without autograd seeing it: under torch.no_grad() (or via p.data).
    """
    world_size = dist.get_world_size()
    # TODO: sum every parameter over the ranks with dist.all_reduce and divide by world_size.
    raise NotImplementedError(f"average the parameters over the {world_size} ranks")


def local_sgd_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, step: int, H: int) -> None:
    """One step of local SGD on this rank; ``step`` counts from 0, ``H`` is the number of steps between averages.

    Take the optimizer step on this rank's own gradients (already in ``.grad``) and, after every
    H-th step (steps H-1, 2H-1, ...), average the parameters over the ranks. Nothing is sent on
    the other steps, and the optimizer's momentum buffers stay local to each rank.
    """
    # TODO: the local step, then, when it is the H-th one, average_parameters(model).
    raise NotImplementedError(f"step {step}: a local optimizer step, and an average every {H} steps")
