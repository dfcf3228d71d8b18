"""Public driver for loss-scaling: the training loop every rank runs around your loss scaler.

Not secret: read it to see exactly what the grader does. The model's parameter tensors are
sharded across the ranks (tensor ``j`` belongs to rank ``j % world_size``, as in ZeRO or
pipeline parallelism): every rank runs the same forward and backward on the same batch, but
holds gradients, and an optimizer, only for the tensors it owns. So an overflow in one rank's
gradients is seen by that rank alone, unless your scaler tells the others: each rank is told
only about its own overflows (``inputs["injections"]``), never about another rank's.

Each step:

    loss = mse(model(x), y)
    scaler.scale(loss).backward()
    (the grader writes inf or nan into this rank's gradients at the steps it chose for this rank)
    scaler.step(optimizer)      # unscale, check, agree, then optimizer.step() or skip it
    scaler.update()             # the new scale, by GradScaler's rule
    record the scale and a copy of this rank's own tensors
    every owner sends its (maybe updated) tensors to the others (one all-gather)

Whether a step was skipped is read outside your code from the recorded tensors: a step that
called ``optimizer.step()`` moved them, a skipped one left them exactly as they were.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F


def init_params(seed: int, dims: list[int]) -> dict[str, torch.Tensor]:
    """The float64 MLP's parameters, drawn from ``seed``: ``{"0.weight", "0.bias", "1.weight", ...}``."""
    gen = torch.Generator().manual_seed(seed)
    params: dict[str, torch.Tensor] = {}
    for k, (fan_in, fan_out) in enumerate(itertools.pairwise(dims)):
        bound = fan_in**-0.5
        params[f"{k}.weight"] = torch.rand(fan_out, fan_in, generator=gen, dtype=torch.float64) * 2 * bound - bound
        params[f"{k}.bias"] = torch.rand(fan_out, generator=gen, dtype=torch.float64) * 2 * bound - bound
    return params


def owner(index: int, world_size: int) -> int:
    """The rank that owns parameter tensor number ``index`` (in ``init_params`` order)."""
    return index % world_size


def forward(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """``Linear, tanh, Linear, tanh, ..., Linear`` with the given parameters."""
    layers = len(params) // 2
    for k in range(layers):
        x = F.linear(x, params[f"{k}.weight"], params[f"{k}.bias"])
        if k < layers - 1:
            x = torch.tanh(x)
    return x


def make_batch(seed: int, dims: list[int], batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One step's batch ``(x, y)``, drawn from ``seed`` (the same on every rank)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, dims[0], generator=gen, dtype=torch.float64)
    y = torch.randn(batch, dims[-1], generator=gen, dtype=torch.float64)
    return x, y


def loss_fn(params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return ((forward(params, x) - y) ** 2).mean()


def make_optimizer(params: list[torch.Tensor], inputs: dict[str, Any]) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=float(inputs["lr"]), momentum=float(inputs["momentum"]))


def inject(grads: dict[str, torch.Tensor | None], injections: list[dict[str, Any]]) -> None:
    """Write inf or nan into the named gradient elements (a stand-in for an fp16 overflow)."""
    for item in injections:
        grad = grads[item["param"]]
        if grad is not None:
            grad.view(-1)[int(item["index"])] = math.inf if item["kind"] == "inf" else math.nan


def share(params: dict[str, torch.Tensor], names: list[str], rank: int, world_size: int) -> None:
    """Every owner's tensors to every rank: one all-gather of each rank's owned tensors, flattened."""
    owned = [[n for j, n in enumerate(names) if owner(j, world_size) == r] for r in range(world_size)]
    size = max(sum(params[n].numel() for n in own) for own in owned)
    with torch.no_grad():
        mine = torch.zeros(size, dtype=torch.float64)
        flat = torch.cat([params[n].detach().reshape(-1) for n in owned[rank]])
        mine[: flat.numel()] = flat
        every = [torch.empty_like(mine) for _ in range(world_size)]
        dist.all_gather(every, mine)
        for r, own in enumerate(owned):
            if r == rank:
                continue
            offset = 0
            for n in own:
                params[n].copy_(every[r][offset : offset + params[n].numel()].view_as(params[n]))
                offset += params[n].numel()


def scaler_args(inputs: dict[str, Any]) -> dict[str, Any]:
    return {k: inputs[k] for k in ("init_scale", "growth_factor", "backoff_factor", "growth_interval")}


def train(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Sharded training with the student's ``DistributedLossScaler``; returns what the judge compares.

    ``scales``: ``scaler.get_scale()`` after each step's ``update()``.
    ``history``: per step, this rank's own tensors after that step (the judge reads the skipped
    steps from them: a skipped step leaves them unchanged).
    ``grads``: this rank's own gradients after ``scaler.step`` in the first step (unscaled by then).
    ``params``: every parameter after the last step (each rank's copy).
    """
    rank, world_size = dist.get_rank(), dist.get_world_size()
    dims, seed = list(inputs["dims"]), int(inputs["seed"])
    params = init_params(seed, dims)
    names = list(params)
    mine = [n for j, n in enumerate(names) if owner(j, world_size) == rank]
    for n in mine:
        params[n].requires_grad_(True)
    optimizer = make_optimizer([params[n] for n in mine], inputs)
    scaler = submission.DistributedLossScaler(**scaler_args(inputs))
    injections: dict[str, list[dict[str, Any]]] = inputs["injections"]  # this rank's own overflows only
    scales: list[float] = []
    history: list[dict[str, torch.Tensor]] = []
    first: dict[str, torch.Tensor] = {}
    for step in range(int(inputs["steps"])):
        for n in mine:
            params[n].grad = None
        x, y = make_batch(seed + 1 + step, dims, int(inputs["batch"]))
        scaler.scale(loss_fn(params, x, y)).backward()
        inject({n: params[n].grad for n in mine}, injections.get(str(step), []))
        scaler.step(optimizer)
        if step == 0:
            first = {
                n: g.detach().clone() if (g := params[n].grad) is not None else torch.full_like(params[n], math.nan)
                for n in mine
            }
        scaler.update()
        scales.append(float(scaler.get_scale()))
        history.append({n: params[n].detach().clone() for n in mine})
        share(params, names, rank, world_size)
    return {
        "scales": torch.tensor(scales, dtype=torch.float64),
        "history": history,
        "grads": first,
        "params": {n: p.detach().clone() for n, p in params.items()},
    }


def skipped_steps(initial: dict[str, torch.Tensor], history: list[dict[str, torch.Tensor]]) -> list[bool | None]:
    """Per step, whether it left the tensors exactly as the step before had (``initial`` before the first).

    How the judge tells a skipped step from a taken one: ``optimizer.step()`` moves every tensor
    whose gradient (or momentum) is not zero. None where the tensors before or after the step
    hold inf or nan: then nothing tells a step taken from one skipped.
    """
    out: list[bool | None] = []
    before = initial
    for after in history:
        finite = all(bool(torch.isfinite(t).all()) for t in (*before.values(), *after.values()))
        out.append(all(torch.equal(after[n], before[n]) for n in before) if finite else None)
        before = after
    return out


def reference(inputs: dict[str, Any]) -> dict[str, Any]:
    """The same training on one process with ``torch.amp.GradScaler("cpu")``, every rank's injections at once.

    ``inputs["injections"]`` holds every rank's (the grader runs this outside the sandbox). The whole
    model is one optimizer's; the gradients each rank would inject into are injected here, so
    GradScaler sees an overflow exactly when some rank would. Returns the scales, the skipped steps,
    the first step's unscaled gradients and the final parameters.
    """
    dims, seed = list(inputs["dims"]), int(inputs["seed"])
    params = init_params(seed, dims)
    for p in params.values():
        p.requires_grad_(True)
    optimizer = make_optimizer(list(params.values()), inputs)
    calls: list[int] = []  # one entry per optimizer.step(): a step not called was skipped
    optimizer.register_step_post_hook(lambda *_: calls.append(1))
    scaler = torch.amp.GradScaler("cpu", **scaler_args(inputs))
    scales, skipped = [], []
    first: dict[str, torch.Tensor] = {}
    for step in range(int(inputs["steps"])):
        for p in params.values():
            p.grad = None
        x, y = make_batch(seed + 1 + step, dims, int(inputs["batch"]))
        scaler.scale(loss_fn(params, x, y)).backward()
        inject({n: p.grad for n, p in params.items()}, inputs["injections"].get(str(step), []))
        before = len(calls)
        scaler.step(optimizer)
        skipped.append(len(calls) == before)
        if step == 0:
            first = {n: p.grad.detach().clone() for n, p in params.items() if p.grad is not None}
        scaler.update()
        scales.append(float(scaler.get_scale()))
    return {
        "scales": torch.tensor(scales, dtype=torch.float64),
        "skipped": torch.tensor(skipped, dtype=torch.bool),
        "grads": first,
        "params": {n: p.detach().clone() for n, p in params.items()},
    }
