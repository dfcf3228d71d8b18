"""Public driver for fsdp-wrapping: what every rank runs around your ``wrap(model, strategy)``.

Not secret: read it to see exactly what the grader does. Each rank builds the same float64
model from the seed it is given (``build_model``), calls your ``wrap(model, strategy)`` and then:

- ``train``: a few ``torch.optim.AdamW`` steps on this rank's shard of each global batch; returns
  every parameter in full, compared outside with single-process training.
- ``probe`` (the next call, on the same wrapped model): one more forward and backward pass with
  the gradient reduce-scatter turned off (``set_requires_gradient_sync(False)`` on every FSDP
  module), so that every byte a rank sends during the call is an all-gather of parameters: the
  grader counts them. While it runs, the driver counts the bytes of the parameters that are
  unsharded at that moment (plain tensors on the modules, not ``DTensor`` shards) at every
  operation autograd records or replays, and keeps the largest count: the peak of unsharded
  parameter bytes. It also reports which modules are FSDP units and how each parameter was
  sharded right after ``wrap``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn

STRATEGIES = ("per-layer", "per-block", "whole-model")


class Block(nn.Module):
    """A residual block: ``x + down(tanh(up(x)))``."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.up = nn.Linear(width, width, dtype=torch.float64)
        self.down = nn.Linear(width, width, dtype=torch.float64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.tanh(self.up(x)))


class Net(nn.Module):
    """``embed`` (Linear), ``blocks`` (a ModuleList of Block), ``norm`` (LayerNorm), ``head`` (Linear).

    Every Linear is ``width x width`` (with a bias), so all of them are the same size.
    """

    def __init__(self, width: int, blocks: int) -> None:
        super().__init__()
        self.embed = nn.Linear(width, width, dtype=torch.float64)
        self.blocks = nn.ModuleList([Block(width) for _ in range(blocks)])
        self.norm = nn.LayerNorm(width, dtype=torch.float64)
        self.head = nn.Linear(width, width, dtype=torch.float64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def build_model(seed: int, dims: dict[str, int]) -> Net:
    """The float64 ``Net`` with every parameter drawn from ``seed`` (the same on every rank)."""
    gen = torch.Generator().manual_seed(seed)
    model = Net(dims["width"], dims["blocks"])
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


def shard(t: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    """Rank ``rank``'s equal, contiguous slice of the global batch."""
    per = t.shape[0] // world_size
    return t[rank * per : (rank + 1) * per]


def loss_fn(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean squared error over every element of this (shard of the) batch."""
    return ((model(x) - y) ** 2).mean()


def build_optimizer(params: list[torch.Tensor], inputs: dict[str, Any]) -> torch.optim.Optimizer:
    """``torch.optim.AdamW``, the same on every rank and in the single-process reference."""
    return torch.optim.AdamW(params, lr=float(inputs["lr"]), weight_decay=float(inputs["weight_decay"]), foreach=False)


def local(p: torch.Tensor) -> torch.Tensor:
    """This rank's own piece of a parameter or gradient: a ``DTensor``'s local shard, else the tensor itself.

    The optimizer updates the local shards in place (AdamW works element by element, so updating
    each shard is updating the whole tensor); running it on the ``DTensor`` parameters would give
    the same numbers, but DTensor's first dispatch of each operation costs most of a second in a new process.
    """
    return p.to_local() if _is_dtensor(p) else p


def _wrapped(submission: Any, inputs: dict[str, Any]) -> nn.Module:
    model = build_model(int(inputs["seed"]), inputs["dims"])
    out = submission.wrap(model, str(inputs["strategy"]))
    return model if out is None else out


def _is_dtensor(p: torch.Tensor) -> bool:
    from torch.distributed.tensor import DTensor

    return isinstance(p, DTensor)


def _peak_sampler(model: nn.Module) -> tuple[Any, Any]:
    """(sample, peak): ``sample(t)`` records the unsharded parameter bytes now and returns ``t``.

    FSDP swaps each module's parameters between full tensors and DTensor shards, so the slots
    (module, parameter name) are read afresh at every sample; listing them once keeps it cheap.
    """
    from torch.distributed.tensor import DTensor

    slots = [(m._parameters, name) for m in model.modules() for name in m._parameters]
    peak = [0]

    def sample(t: Any) -> Any:
        now = 0
        for params, name in slots:
            p = params.get(name)
            if p is not None and not isinstance(p, DTensor):
                now += p.numel() * p.element_size()
        peak[0] = max(peak[0], now)
        return t

    return sample, peak


def _sharding(model: nn.Module) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, p in model.named_parameters():
        if _is_dtensor(p):
            local = p.to_local()
            placements = ", ".join(
                f"Shard({pl.dim})" if pl.is_shard() else f"{type(pl).__name__}()" for pl in p.placements
            )
            out[name] = {
                "sharded": True,
                "placements": placements,
                "local_rows": int(local.shape[0]) if local.dim() else 0,
            }
        else:
            out[name] = {"sharded": False, "placements": "", "local_rows": int(p.shape[0]) if p.dim() else 0}
    return out


def _fsdp_units(model: nn.Module) -> list[str]:
    from torch.distributed.fsdp import FSDPModule

    return sorted(name or "(root)" for name, m in model.named_modules() if isinstance(m, FSDPModule))


# The wrapped model of each strategy, kept in this rank from ``train`` to ``probe``:
# (model, its FSDP units and its parameters' sharding right after wrap).
_WRAPPED: dict[str, tuple[nn.Module, list[str], dict[str, dict[str, Any]]]] = {}


def _wrap_and_describe(submission: Any, inputs: dict[str, Any]) -> tuple[nn.Module, list[str], dict[str, Any]]:
    model = _wrapped(submission, inputs)
    return model, _fsdp_units(model), _sharding(model)


def _piece(t: torch.Tensor) -> tuple[torch.Tensor, torch.Size | None]:
    """(this rank's rows, the full shape) of a DTensor sharded by rows over every rank; else (a copy, None)."""
    from torch.distributed.tensor import Shard

    if _is_dtensor(t):
        mesh_size = t.device_mesh.size()
        if tuple(t.placements) == (Shard(0),) and mesh_size == dist.get_world_size() and t.dim():
            return t.to_local().detach().clone(), t.shape
        return t.full_tensor().detach().clone(), None
    return t.detach().clone(), None


def _gather_full(pieces: dict[str, tuple[torch.Tensor, torch.Size | None]]) -> dict[str, torch.Tensor]:
    """Every tensor in full: the row shards all in one all-gather (padded as torch.chunk cuts), the rest as they are."""
    world_size = dist.get_world_size()
    sharded = {n: (t, shape) for n, (t, shape) in pieces.items() if shape is not None}
    out = {n: t for n, (t, shape) in pieces.items() if shape is None}
    if sharded:
        flat = []
        for t, shape in sharded.values():
            padded = t.new_zeros((-(-shape[0] // world_size), *shape[1:]))
            padded[: t.shape[0]] = t
            flat.append(padded.reshape(-1))
        mine = torch.cat(flat)
        gathered = mine.new_empty(world_size * mine.numel())
        dist.all_gather_single(gathered, mine)
        per_rank = gathered.view(world_size, -1)
        offset = 0
        for (n, (_, shape)), piece in zip(sharded.items(), flat, strict=True):
            rows = -(-shape[0] // world_size)
            whole = per_rank[:, offset : offset + piece.numel()].reshape(world_size * rows, *shape[1:])
            out[n] = whole[: shape[0]].clone()
            offset += piece.numel()
    return {n: out[n] for n in pieces}


def train(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Wrap, then ``inputs["steps"]`` AdamW steps on this rank's shard of each global batch.

    ``grads``: every parameter's gradient in the first step, in full (FSDP reduce-scatters each
    gradient, so each rank holds the average of its rows). ``params``: every parameter in full
    after training. ``losses``: this rank's shard losses (shown only).
    """
    rank, world_size = dist.get_rank(), dist.get_world_size()
    _WRAPPED.pop(str(inputs["strategy"]), None)
    model, units, sharding = _wrap_and_describe(submission, inputs)
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
                    _piece(p.grad) if p.grad is not None else (torch.full(p.shape, torch.nan), None)
                )
        optimizer.step()
        losses.append(float(loss.detach()))
    full = _gather_full(first | {f"params/{name}": _piece(p) for name, p in named})
    _WRAPPED[str(inputs["strategy"])] = (model, units, sharding)
    return {
        "grads": {name: full[f"grads/{name}"] for name, _ in named if f"grads/{name}" in full},
        "params": {name: full[f"params/{name}"] for name, _ in named},
        "losses": torch.tensor(losses, dtype=torch.float64),
    }


def probe(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """One forward and backward of the wrapped model with no gradient reduce-scatter; the units and the peak.

    Runs on the model ``train`` wrapped and trained (and refuses to run if that call failed).
    ``units``: the names of the modules that are FSDP units (``"(root)"`` for the model itself).
    ``sharding``: per parameter right after ``wrap``, whether it is a ``DTensor``, its placements
    and its local rows. ``peak_bytes``: the most unsharded parameter bytes seen at once.
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
    sample, peak = _peak_sampler(model)
    sample(None)

    x, y = make_batch(int(inputs["seed"]) + 1000, inputs["dims"], int(inputs["batch"]))
    with torch.autograd.graph.saved_tensors_hooks(sample, sample):
        loss = loss_fn(model, shard(x, rank, world_size), shard(y, rank, world_size))
        loss.backward()
    return {"units": units, "sharding": sharding, "peak_bytes": peak[0]}


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
