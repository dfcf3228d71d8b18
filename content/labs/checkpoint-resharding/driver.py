"""Public code run in every rank of the checkpoint-resharding lab (not secret, not trusted).

Phase "save" (4 ranks): ``train`` builds an MLP from the seed the grader drew, shards it
with FSDP2's ``fully_shard`` and trains it, one AdamW step per call, on this rank's share
of each batch; ``save`` calls the student's ``save_checkpoint``. Phase "load" (2 ranks,
later, same scratch directory): ``prepare`` builds the same MLP from another seed, shards
it the same way and gives it a fresh AdamW; ``load`` calls the student's ``load_checkpoint``;
``report`` returns what the model and the optimizer hold; ``resume`` takes one more step and
reports the parameters again. Each is a call of its own, so every rank reports progress.
Everything returned is compared, outside the sandbox, with one process training the
unsharded MLP.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

MOMENTS = ("step", "exp_avg", "exp_avg_sq")  # what AdamW keeps per parameter


def build(seed: int, dims: list[int]) -> torch.nn.Sequential:
    """The MLP, float64, its weights drawn from ``seed``: Linear, Tanh, ..., Linear."""
    g = torch.Generator().manual_seed(seed)
    layers: list[torch.nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(dims)):
        layer = torch.nn.Linear(a, b, dtype=torch.float64)
        with torch.no_grad():
            layer.weight.copy_(torch.randn(b, a, generator=g, dtype=torch.float64) / a**0.5)
            layer.bias.copy_(torch.randn(b, generator=g, dtype=torch.float64) * 0.1)
        layers.append(layer)
        if i < len(dims) - 2:
            layers.append(torch.nn.Tanh())
    return torch.nn.Sequential(*layers)


def batches(seed: int, dims: list[int], batch: int, steps: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The global batch (inputs, targets) of every step."""
    g = torch.Generator().manual_seed(seed + 1)
    return [
        (torch.randn(batch, dims[0], generator=g, dtype=torch.float64),
         torch.randn(batch, dims[-1], generator=g, dtype=torch.float64))
        for _ in range(steps)
    ]  # fmt: skip


def optimizer(model: torch.nn.Module, hyper: dict[str, float]) -> torch.optim.AdamW:
    return torch.optim.AdamW(model.parameters(), lr=hyper["lr"], weight_decay=hyper["weight_decay"], fused=True)


def step(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> None:
    """One AdamW step on the mean squared error of this rank's share of the batch (all of it in one process)."""
    if dist.is_initialized():
        x, y = x.chunk(dist.get_world_size())[dist.get_rank()], y.chunk(dist.get_world_size())[dist.get_rank()]
    opt.zero_grad()
    F.mse_loss(model(x), y).backward()
    opt.step()


def sharded(model: torch.nn.Sequential) -> torch.nn.Sequential:
    """FSDP2: every Linear its own unit, then the root; parameters become DTensor shards (dim 0)."""
    from torch.distributed.fsdp import fully_shard

    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    return model


def full(t: Any) -> Any:
    """A plain tensor with the whole value: a DTensor's ``full_tensor()`` (every rank calls it in turn)."""
    if hasattr(t, "full_tensor"):
        return t.full_tensor()
    return t.detach().clone() if isinstance(t, torch.Tensor) else t


def held(model: torch.nn.Module, opt: torch.optim.Optimizer) -> dict[str, Any]:
    """The whole parameters and AdamW's state for each, by parameter name ("missing" where there is none)."""
    params, moments = {}, {}
    for name, p in model.named_parameters():
        params[name] = full(p.detach())
        state = opt.state.get(p, {})
        moments[name] = {k: full(state[k]) if k in state else "missing" for k in MOMENTS}
    return {"params": params, "optimizer": moments}


def checkpoint_dir() -> str:
    return os.path.join(os.environ["RINGLAB_SHARED_DIR"], "checkpoint")


# The model and optimizer this rank keeps between the calls of one phase (each call reports progress).
_KEPT: dict[str, Any] = {}


def setup(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Phase 1: the MLP drawn from the seed, sharded, with its AdamW (a call of its own: FSDP's set-up is slow)."""
    model = sharded(build(inputs["seed"], inputs["dims"]))
    _KEPT["trained"] = (model, optimizer(model, inputs["hyper"]), [0])
    return {"trained": 0}


def train(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Phase 1: one more AdamW step of the sharded MLP (built on the first call); how many steps are done.

    One call per step, so that each rank reports progress between the steps.
    """
    if "trained" not in _KEPT:
        setup(submission, inputs)
    model, opt, done = _KEPT["trained"]
    x, y = batches(inputs["seed"], inputs["dims"], inputs["batch"], done[0] + 1)[-1]
    step(model, opt, x, y)
    done[0] += 1
    return {"trained": done[0]}


def save(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Phase 1: the student's ``save_checkpoint`` of the trained model.

    What it wrote is judged outside the sandbox, by the grader, from the files themselves.
    """
    while "trained" not in _KEPT or _KEPT["trained"][2][0] < inputs["steps"]:
        train(submission, inputs)
    model, opt, _ = _KEPT.pop("trained")
    path = checkpoint_dir()
    if dist.get_rank() == 0:
        os.makedirs(path, exist_ok=True)
    dist.barrier()
    submission.save_checkpoint(model, opt, path)
    dist.barrier()  # every rank has written before the phase ends
    return {"saved": True}


def prepare(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Phase 2: the same MLP with other weights, sharded on this group of ranks, and a fresh AdamW."""
    model = sharded(build(inputs["seed"] + 7919, inputs["dims"]))
    _KEPT["loaded"] = (model, optimizer(model, inputs["hyper"]))
    return {"prepared": True}


def load(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Phase 2: the student's ``load_checkpoint`` into the fresh model and optimizer."""
    if "loaded" not in _KEPT:
        prepare(submission, inputs)
    model, opt = _KEPT["loaded"]
    submission.load_checkpoint(model, opt, checkpoint_dir())
    return {"loaded": True}


def report(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Phase 2: the whole parameters and AdamW's state after the load."""
    if "loaded" not in _KEPT:
        load(submission, inputs)
    return held(*_KEPT["loaded"])


def resume(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Phase 2: one more step after the load, on this group's share of the next batch."""
    if "loaded" not in _KEPT:
        load(submission, inputs)
    model, opt = _KEPT.pop("loaded")
    x, y = batches(inputs["seed"], inputs["dims"], inputs["batch"], inputs["steps"] + 1)[-1]
    step(model, opt, x, y)
    return {"resumed": held(model, opt)["params"]}


def reference(inputs: dict[str, Any]) -> dict[str, Any]:
    """One process, the unsharded MLP: what phase 2 must report (run outside the sandbox)."""
    model = build(inputs["seed"], inputs["dims"])
    opt = optimizer(model, inputs["hyper"])
    data = batches(inputs["seed"], inputs["dims"], inputs["batch"], inputs["steps"] + 1)
    for x, y in data[:-1]:
        step(model, opt, x, y)
    out = held(model, opt)
    step(model, opt, *data[-1])
    return {**out, "resumed": held(model, opt)["params"]}
