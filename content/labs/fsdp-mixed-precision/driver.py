"""Public driver for fsdp-mixed-precision: what every rank runs around your ``wrap(model)``.

Not secret: read it to see exactly what the grader does. Each rank builds the float32 model from
its own rows of every parameter (``inputs["params"]``: the rows FSDP keeps on this rank, drawn by
the grader for this rank alone; the other rows are NaN here), calls your ``wrap(model)`` (whose
``fully_shard`` keeps exactly this rank's rows and gathers the others' when a unit runs) and then:

- ``step`` (the bytes on the wire are counted): one training step on this rank's shard of the
  global batch (``inputs["x"][step]``, ``inputs["y"][step]``, drawn for this rank alone: no rank is
  given, or can draw, another's): forward, the mean squared error in float32 (``out.float()``),
  backward, and ``torch.optim.AdamW`` (float32) on this rank's shards of the parameters. Returns
  the loss and, for the result page only (never scored), the dtypes the Linear layers computed in,
  of the output and of the sharded parameters and gradients.
- ``finish``: the remaining steps, then the first step's gradients and the final parameters, in full.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist
from dtensors import gather_full, local, row_shard
from residual import Net
from torch import nn


def rows(size: int, world_size: int, rank: int) -> slice:
    """The rows of a dimension of ``size`` that FSDP keeps on rank ``rank``: ``torch.chunk``'s split."""
    step = -(-size // world_size)
    return slice(min(rank * step, size), min((rank + 1) * step, size))


def build_model(dims: dict[str, int], mine: dict[str, torch.Tensor], world_size: int, rank: int) -> Net:
    """The float32 ``Net`` holding this rank's rows of every parameter (``mine``) and NaN everywhere else."""
    model = Net(dims["width"], dims["blocks"])
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.fill_(float("nan"))
            p[rows(p.shape[0], world_size, rank)] = mine[name]
    return model


def assemble(per_rank: list[dict[str, Any]], dtype: torch.dtype = torch.float32) -> Net:
    """The whole ``Net``, every rank's rows put together, in ``dtype`` (the reference's, outside the sandbox)."""
    inputs = per_rank[0]
    model = Net(inputs["dims"]["width"], inputs["dims"]["blocks"])
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.cat([i["params"][name] for i in per_rank]))
    return model.to(dtype)


def loss_fn(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean squared error in float32, whatever dtype the model's output has."""
    return ((out.float() - y) ** 2).mean()


def build_optimizer(params: Sequence[torch.Tensor], inputs: dict[str, Any]) -> torch.optim.Optimizer:
    """``torch.optim.AdamW`` on float32 tensors, the same on every rank and in the reference."""
    return torch.optim.AdamW(params, lr=float(inputs["lr"]), weight_decay=float(inputs["weight_decay"]), foreach=False)


class _Run:
    """One rank's training, kept from ``step`` to ``finish``."""

    def __init__(self, submission: Any, inputs: dict[str, Any]) -> None:
        model = build_model(inputs["dims"], inputs["params"], dist.get_world_size(), dist.get_rank())
        out = submission.wrap(model)
        self.model: nn.Module = model if out is None else out
        self.inputs = inputs
        self.named = list(self.model.named_parameters())
        with torch.no_grad():
            self.shards = [local(p) for _, p in self.named]
        self.optimizer = build_optimizer(self.shards, inputs)
        self.first: dict[str, tuple[torch.Tensor, torch.Size | None]] = {}
        self.losses: list[torch.Tensor] = []
        self.steps = 0

    def step(self) -> dict[str, Any]:
        seen: dict[str, str] = {}

        def record(module: nn.Module, args: Any, output: Any) -> None:
            seen.setdefault("compute_dtype", str(output.dtype))

        hook = self.model.get_submodule("blocks.0.up").register_forward_hook(record)
        x, y = self.inputs["x"][self.steps], self.inputs["y"][self.steps]  # this rank's shard of the batch
        for _, p in self.named:
            p.grad = None
        out = self.model(x)
        hook.remove()
        loss = loss_fn(out, y)
        loss.backward()
        info = {"output_dtype": str(out.dtype), **seen}
        for (name, p), shard in zip(self.named, self.shards, strict=True):
            grad = p.grad
            shard.grad = None if grad is None else local(grad)
            if self.steps == 0:
                info.setdefault("grad_dtype", str(grad.dtype) if grad is not None else "None")
                info.setdefault("master_dtype", str(p.dtype))
                missing = (torch.full(p.shape, torch.nan), None)
                self.first[f"grads/{name}"] = row_shard(grad) if grad is not None else missing
        self.optimizer.step()
        self.losses.append(loss.detach().float().clone())
        self.steps += 1
        return info


_RUNS: dict[str, _Run] = {}


def step(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Wrap, then one training step; its bytes are counted. The loss, and the dtypes seen (shown only)."""
    _RUNS.pop(str(inputs["key"]), None)
    run = _Run(submission, inputs)
    info = run.step()
    _RUNS[str(inputs["key"])] = run
    return {"loss": run.losses[0], "dtypes": info}


def finish(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """The remaining steps, then ``grads`` (the first step's, float32, in full) and ``params`` (in full)."""
    run = _RUNS.pop(str(inputs["key"]), None)
    if run is None or run.steps == 0:
        # No collective after a failure: the ranks may have stopped at different points.
        raise RuntimeError("the first training step failed (the forward check says why), so training stopped")
    while run.steps < int(inputs["steps"]):
        run.step()
    full = gather_full(run.first | {f"params/{name}": row_shard(p) for name, p in run.named})
    return {
        "grads": {name: full[f"grads/{name}"] for name, _ in run.named},
        "params": {name: full[f"params/{name}"] for name, _ in run.named},
        "losses": torch.stack(run.losses),
    }


def emulate(
    per_rank: list[dict[str, Any]],
    param_dtype: torch.dtype | None = torch.bfloat16,
    reduce_dtype: torch.dtype = torch.float32,
) -> dict[str, Any]:
    """Mixed precision by hand on one process: what ``step`` and ``finish`` must return.

    ``per_rank``: every rank's inputs (the grader runs this outside the sandbox, where it has them
    all). Each step: float32 master weights; for every rank r, a copy in ``param_dtype`` runs the
    forward (input cast to ``param_dtype``) and backward on r's shard; each gradient is cast to
    ``reduce_dtype``, the ranks' gradients are summed in rank order and divided by N, and AdamW
    updates the float32 master weights. ``param_dtype=None``: plain float32 training.
    """
    low = param_dtype or torch.float32
    inputs, world_size = per_rank[0], len(per_rank)
    master = assemble(per_rank)
    params = list(master.parameters())
    optimizer = build_optimizer(params, inputs)
    grads: dict[str, torch.Tensor] = {}
    losses: list[list[torch.Tensor]] = [[] for _ in range(world_size)]
    for step_ in range(int(inputs["steps"])):
        total: list[torch.Tensor] = []
        for r in range(world_size):
            x, y = per_rank[r]["x"][step_], per_rank[r]["y"][step_]
            copy = assemble(per_rank, low)
            with torch.no_grad():
                for c, p in zip(copy.parameters(), params, strict=True):
                    c.copy_(p.to(low))
            loss = loss_fn(copy(x.to(low)), y)
            loss.backward()
            losses[r].append(loss.detach())
            mine = [c.grad.to(reduce_dtype) for c in copy.parameters() if c.grad is not None]
            total = mine if not total else [t + g for t, g in zip(total, mine, strict=True)]
        with torch.no_grad():
            for p, g in zip(params, total, strict=True):
                p.grad = (g / world_size).to(torch.float32)
        if step_ == 0:
            grads = {name: p.grad.clone() for name, p in master.named_parameters() if p.grad is not None}
        optimizer.step()
    return {
        "grads": grads,
        "params": {name: p.detach().clone() for name, p in master.named_parameters()},
        "losses": [torch.stack(rank_losses) for rank_losses in losses],
    }
