"""The training task your script runs (public): the model, the data of each step, the loss, the optimizer.

Import it in your script (``import task``). Everything here is deterministic: the initial weights
come from ``INIT_SEED`` (a new one at every launch, as an unseeded job would draw them), and the
global batch of step ``i`` depends only on ``SEED`` and ``i``, so training that resumes at step ``i``
sees exactly the batches an uninterrupted run would have seen, and a run that starts again from
step 0 starts from other weights.
"""

from __future__ import annotations

import torch

DIMS = (6, 16, 3)  # Linear 6 -> 16, Tanh, Linear 16 -> 3, float64
BATCH = 12  # the global batch of every step: equal shards on 2, 3 and 4 ranks
LR, MOMENTUM = 0.05, 0.9

# The step indices asked of batch() in this process (shown with the grader's feedback, never judged).
requested: list[int] = []


def build_model(init_seed: int) -> torch.nn.Sequential:
    """The float64 MLP ``Linear(6, 16), Tanh, Linear(16, 3)`` with initial weights drawn from ``init_seed``."""
    gen = torch.Generator().manual_seed(init_seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(DIMS[0], DIMS[1], dtype=torch.float64),
        torch.nn.Tanh(),
        torch.nn.Linear(DIMS[1], DIMS[2], dtype=torch.float64),
    )
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.rand(p.shape, generator=gen, dtype=torch.float64) - 0.5)
    return model


def make_optimizer(model: torch.nn.Module) -> torch.optim.SGD:
    """SGD with momentum 0.9: its momentum buffers are state that a checkpoint must keep."""
    return torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)


def global_batch(seed: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The whole batch ``(x, y)`` of step ``step`` (0, 1, 2, ...): drawn from ``seed + 1 + step``."""
    gen = torch.Generator().manual_seed(seed + 1 + step)
    x = torch.randn(BATCH, DIMS[0], generator=gen, dtype=torch.float64)
    y = torch.randn(BATCH, DIMS[-1], generator=gen, dtype=torch.float64)
    return x, y


def batch(seed: int, step: int, rank: int, world_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank ``rank``'s equal, contiguous shard of step ``step``'s global batch."""
    requested.append(step)
    x, y = global_batch(seed, step)
    per = BATCH // world_size
    return x[rank * per : (rank + 1) * per], y[rank * per : (rank + 1) * per]


def loss_fn(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean squared error over every element of this (shard of the) batch."""
    return ((model(x) - y) ** 2).mean()


def reference(seed: int, init_seed: int, steps: int) -> list[dict[str, dict[str, torch.Tensor]]]:
    """Uninterrupted training on one process with the whole batch, from the weights of ``init_seed``.

    Entry ``i`` is the state after ``i`` steps: ``{"params": {name: tensor}, "momentum": {name: tensor}}``
    (SGD's momentum buffers; none before the first step).
    """
    model = build_model(init_seed)
    optimizer = make_optimizer(model)
    states = [_state(model, optimizer)]
    for step in range(steps):
        x, y = global_batch(seed, step)
        optimizer.zero_grad()
        loss_fn(model, x, y).backward()
        optimizer.step()
        states.append(_state(model, optimizer))
    return states


def _state(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, dict[str, torch.Tensor]]:
    params = {name: p.detach().clone() for name, p in model.named_parameters()}
    momentum = {
        name: optimizer.state[p]["momentum_buffer"].clone()
        for name, p in model.named_parameters()
        if "momentum_buffer" in optimizer.state.get(p, {})
    }
    return {"params": params, "momentum": momentum}
