"""Public driver for fsdp-wrapping: what every rank runs around your ``wrap(model, strategy)``.

Not secret: read it to see exactly what the grader does. Each rank builds the same float64
model from the seed it is given (``build_model``), calls your ``wrap(model, strategy)`` and then:

- ``train``: a few ``torch.optim.AdamW`` steps on this rank's shard of each global batch; returns
  every parameter in full, compared outside with single-process training.
- ``probe`` (the next call, on the same wrapped model): one more forward and backward pass with
  the gradient reduce-scatter turned off (``set_requires_gradient_sync(False)`` on every FSDP
  module), so that every byte a rank sends during the call is an all-gather of parameters: the
  grader counts them. It also reports which modules are FSDP units and how each parameter was
  sharded right after ``wrap``.
- ``memory``: in a group of ranks of its own per strategy, a wider model built on the meta
  device, wrapped by you, given only each rank's shards, then one forward and backward. The
  kernel counts the memory each rank holds (its control group's high-water, read outside your
  code); ``release_freed_buffers`` makes that count follow the tensors that are alive.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist
from data_parallel import shard
from dtensors import gather_full, is_dtensor, local, row_shard
from heap import release_freed_buffers
from residual import Net
from torch import nn

STRATEGIES = ("per-layer", "per-block", "whole-model")


def build_model(seed: int, dims: dict[str, int]) -> Net:
    """The float64 ``Net`` with every parameter drawn from ``seed`` (the same on every rank)."""
    gen = torch.Generator().manual_seed(seed)
    model = Net(dims["width"], dims["blocks"], torch.float64)
    bound = dims["width"] ** -0.5
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith("norm."):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
            else:
                p.copy_((torch.rand(p.shape, generator=gen, dtype=p.dtype) * 2 - 1) * bound)
    return model


def make_batch(seed: int, dims: dict[str, int], batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch ``(x, y)`` drawn from ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, dims["width"], generator=gen, dtype=torch.float64)
    y = torch.randn(batch, dims["width"], generator=gen, dtype=torch.float64)
    return x, y


def loss_fn(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean squared error over every element of this (shard of the) batch."""
    return ((model(x) - y) ** 2).mean()


def build_optimizer(params: Sequence[torch.Tensor], inputs: dict[str, Any]) -> torch.optim.Optimizer:
    """``torch.optim.AdamW``, the same on every rank and in the single-process reference."""
    return torch.optim.AdamW(params, lr=float(inputs["lr"]), weight_decay=float(inputs["weight_decay"]), foreach=False)


def _wrap(submission: Any, model: nn.Module, inputs: dict[str, Any]) -> nn.Module:
    out = submission.wrap(model, str(inputs["strategy"]))
    return model if out is None else out


def _sharding(model: nn.Module) -> dict[str, dict[str, Any]]:
    from torch.distributed.tensor import Shard  # here: DTensor's modules cost an import only where used

    out: dict[str, dict[str, Any]] = {}
    for name, p in model.named_parameters():
        placements = p.placements if is_dtensor(p) else ()
        kinds = [f"Shard({pl.dim})" if isinstance(pl, Shard) else f"{type(pl).__name__}()" for pl in placements]
        piece = local(p)
        out[name] = {
            "sharded": is_dtensor(p),
            "placements": ", ".join(kinds),
            "local_rows": int(piece.shape[0]) if piece.dim() else 0,
        }
    return out


def _fsdp_units(model: nn.Module) -> list[str]:
    from torch.distributed.fsdp import FSDPModule

    return sorted(name or "(root)" for name, m in model.named_modules() if isinstance(m, FSDPModule))


# The wrapped model of each strategy, kept in this rank from ``train`` to ``probe``:
# (model, its FSDP units and its parameters' sharding right after wrap).
_WRAPPED: dict[str, tuple[nn.Module, list[str], dict[str, dict[str, Any]]]] = {}


def train(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Wrap, then ``inputs["steps"]`` AdamW steps on this rank's shard of each global batch.

    ``grads``: every parameter's gradient in the first step, in full (FSDP reduce-scatters each
    gradient, so each rank holds the average of its rows). ``params``: every parameter in full
    after training. ``losses``: this rank's shard losses (shown only).
    """
    rank, world_size = dist.get_rank(), dist.get_world_size()
    _WRAPPED.pop(str(inputs["strategy"]), None)
    model = _wrap(submission, build_model(int(inputs["seed"]), inputs["dims"]), inputs)
    units, sharding = _fsdp_units(model), _sharding(model)
    named = list(model.named_parameters())
    with torch.no_grad():
        shards = [local(p) for _, p in named]
    optimizer = build_optimizer(shards, inputs)
    first: dict[str, tuple[torch.Tensor, torch.Size | None]] = {}
    losses = []
    for step in range(int(inputs["steps"])):
        x, y = make_batch(int(inputs["seed"]) + 1 + step, inputs["dims"], int(inputs["batch"]))
        for _, p in named:
            p.grad = None
        loss = loss_fn(model, shard(x, rank, world_size), shard(y, rank, world_size))
        loss.backward()
        for (name, p), piece in zip(named, shards, strict=True):
            piece.grad = None if p.grad is None else local(p.grad)
            if step == 0:
                first[f"grads/{name}"] = (
                    row_shard(p.grad) if p.grad is not None else (torch.full(p.shape, torch.nan), None)
                )
        optimizer.step()
        losses.append(float(loss.detach()))
    full = gather_full(first | {f"params/{name}": row_shard(p) for name, p in named})
    _WRAPPED[str(inputs["strategy"])] = (model, units, sharding)
    return {
        "grads": {name: full[f"grads/{name}"] for name, _ in named if f"grads/{name}" in full},
        "params": {name: full[f"params/{name}"] for name, _ in named},
        "losses": torch.tensor(losses, dtype=torch.float64),
    }


def probe(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """One forward and backward of the wrapped model with no gradient reduce-scatter; its units.

    Runs on the model ``train`` wrapped and trained (and refuses to run if that call failed).
    ``units``: the names of the modules that are FSDP units (``"(root)"`` for the model itself).
    ``sharding``: per parameter right after ``wrap``, whether it is a ``DTensor``, its placements
    and its local rows.
    """
    from torch.distributed.fsdp import FSDPModule

    rank, world_size = dist.get_rank(), dist.get_world_size()
    kept = _WRAPPED.pop(str(inputs["strategy"]), None)
    if kept is None:
        # No collective after a failure: the ranks may have stopped at different points.
        raise RuntimeError("wrapping or training this strategy failed (the training check says why)")
    model, units, sharding = kept
    for m in model.modules():
        if isinstance(m, FSDPModule):
            m.set_requires_gradient_sync(False, recurse=False)
    x, y = make_batch(int(inputs["seed"]) + 1000, inputs["dims"], int(inputs["batch"]))
    loss_fn(model, shard(x, rank, world_size), shard(y, rank, world_size)).backward()
    return {"units": units, "sharding": sharding}


def fill_rows(t: torch.Tensor, name: str, seed: int, rows: tuple[int, int], shape: torch.Size) -> None:
    """Rows ``rows`` of the parameter ``name`` (of full ``shape``) in the memory model, written into ``t``.

    A formula of each element's place in the full tensor (no random generator to run through): each
    rank fills only its own rows, and the grader fills the whole tensor the same way. ``norm.*``
    around 1, everything else within +-1/sqrt(width).
    """
    width = shape[-1]
    cols = 1 if len(shape) == 1 else int(torch.Size(shape[1:]).numel())
    start, stop = rows
    phase = (seed % 1000) / 1000 + (sum(map(ord, name)) % 97) / 97
    scale, offset = (0.2, 1.0) if name.startswith("norm.") else (2 * width**-0.5, 0.0)
    values = torch.arange(start * cols, stop * cols, dtype=torch.float64)  # one buffer, every step in place
    values.mul_(0.6180339887498949).add_(phase).frac_().sub_(0.5).mul_(scale).add_(offset)
    t.copy_(values.view(stop - start, *shape[1:]))


def memory_model(submission: Any, inputs: dict[str, Any]) -> nn.Module:
    """The memory model, built on the meta device, wrapped by ``wrap``, then given this rank's storage.

    Nothing is ever whole on a rank before FSDP gathers it: ``to_empty`` gives each parameter its
    local shard only (or the whole tensor, for a parameter no unit holds), filled by ``fill_rows``.
    """
    from torch.distributed.tensor import DTensor

    rank, world_size = dist.get_rank(), dist.get_world_size()
    dims = inputs["dims"]
    with torch.device("meta"):
        net = Net(dims["width"], dims["blocks"], torch.float64)
    model = _wrap(submission, net, inputs)
    model.to_empty(device="cpu")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if isinstance(p, DTensor):
                piece = p.to_local()
                per = -(-p.shape[0] // world_size)  # torch.chunk's rows per rank
                start = min(rank * per, p.shape[0])
                fill_rows(piece, name, int(inputs["seed"]), (start, start + piece.shape[0]), p.shape)
            else:
                fill_rows(p, name, int(inputs["seed"]), (0, p.shape[0]), p.shape)
    return model


def local_sums(model: nn.Module) -> dict[str, torch.Tensor]:
    """Per parameter, the sum of each of this rank's rows of its gradient (its local shard's, for a DTensor)."""
    out = {}
    for name, p in model.named_parameters():
        g = None if p.grad is None else local(p.grad).detach()
        out[name] = torch.full((1,), torch.nan) if g is None else g.reshape(g.shape[0], -1).sum(1)
    return out


def memory(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """The memory case of one strategy, in a group of ranks of its own: the kernel measures what each rank holds.

    Builds the memory model with your ``wrap`` (``memory_model``), then one forward and backward
    on this rank's shard of the global batch, with FSDP's gradient reduce-scatter as in training.
    Returns the loss and, per parameter, the sums of this rank's rows of the averaged gradient.
    """
    release_freed_buffers()
    rank, world_size = dist.get_rank(), dist.get_world_size()
    model = memory_model(submission, inputs)
    x, y = make_batch(int(inputs["seed"]) + 1, inputs["dims"], int(inputs["batch"]))
    loss = loss_fn(model, shard(x, rank, world_size), shard(y, rank, world_size))
    loss.backward()
    return {"loss": loss.detach().reshape(1).clone(), "grad_rows": local_sums(model)}


def memory_reference(inputs: dict[str, Any], world_size: int) -> list[dict[str, Any]]:
    """What ``memory`` returns on each rank when every unit averages its gradients, computed on one process."""
    dims = inputs["dims"]
    model = Net(dims["width"], dims["blocks"], torch.float64)
    with torch.no_grad():
        for name, p in model.named_parameters():
            fill_rows(p, name, int(inputs["seed"]), (0, p.shape[0]), p.shape)
    x, y = make_batch(int(inputs["seed"]) + 1, dims, int(inputs["batch"]))
    losses = [loss_fn(model, shard(x, r, world_size), shard(y, r, world_size)) for r in range(world_size)]
    total = losses[0]
    for loss in losses[1:]:  # summed in order, as sum() would (it starts from 0, and 0 + loss is loss)
        total = total + loss
    (total / world_size).backward()
    out = []
    for r in range(world_size):
        rows = {}
        for name, p in model.named_parameters():
            per = -(-p.shape[0] // world_size)
            assert p.grad is not None  # every parameter is in the loss
            g = p.grad.detach()[r * per : (r + 1) * per]
            rows[name] = g.reshape(g.shape[0], -1).sum(1)
        out.append({"loss": losses[r].detach().reshape(1).clone(), "grad_rows": rows})
    return out


def reference(inputs: dict[str, Any]) -> dict[str, Any]:
    """The same training on one process with the whole global batch (what ``train`` must equal)."""
    model = build_model(int(inputs["seed"]), inputs["dims"])
    optimizer = build_optimizer(list(model.parameters()), inputs)
    grads: dict[str, torch.Tensor] = {}
    for step in range(int(inputs["steps"])):
        x, y = make_batch(int(inputs["seed"]) + 1 + step, inputs["dims"], int(inputs["batch"]))
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model, x, y).backward()
        if step == 0:
            grads = {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}
        optimizer.step()
    return {"grads": grads, "params": {name: p.detach().clone() for name, p in model.named_parameters()}}
