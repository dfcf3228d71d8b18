"""Public driver for debugging-tools: what every rank does around your three diagnostics.

Not secret: read it to see exactly what the grader does. Three kinds of call:

- ``norms``: one backward of the same float64 MLP on this rank's shard, then ``gradient_norms(model)``.
- ``sync``: a model, a batch and one nudged weight from this rank's own inputs, then
  ``losses_in_sync(loss)``. From its own inputs alone no rank can tell whether the others were
  given the same: only their losses can.
- ``timing``: a known sequence of collectives through your ``CommProfiler``, one rank (the
  straggler) sleeping before one all-reduce so that the others wait in it; then ``profiler.table()``.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch
import torch.distributed as dist
from data_parallel import gradients, shard
from mlp import build_model, loss_fn, make_batch

DTYPES = {"float64": torch.float64, "float32": torch.float32}


def as_norms(value: Any) -> torch.Tensor | str:
    """What ``gradient_norms`` returned, as a 1-D float64 tensor; a description if it is not one."""
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, float, torch.Tensor)) for v in value):
        try:
            value = torch.stack([torch.as_tensor(v, dtype=torch.float64).reshape(()) for v in value])
        except (RuntimeError, ValueError):
            return f"not a list of numbers: {repr(value)[:60]}"
    if not isinstance(value, torch.Tensor) or not value.is_floating_point():
        return f"not a float tensor: {type(value).__name__} {repr(value)[:60]}"
    return value.detach().to(torch.float64).reshape(-1).clone()


def norms(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """One backward on this rank's shard, then ``gradient_norms(model)``.

    ``norms``: what it returned, as a float64 vector (judged against every rank's own norm).
    ``grads``: every parameter's ``.grad`` after the call (judged: a diagnostic changes nothing).
    """
    rank, world_size = dist.get_rank(), dist.get_world_size()
    dims = list(inputs["dims"])
    model = build_model(int(inputs["seed"]), dims)
    x, y = make_batch(int(inputs["seed"]) + 1, dims, int(inputs["batch"]))
    loss_fn(model, shard(x, rank, world_size), shard(y, rank, world_size)).backward()
    got = as_norms(submission.gradient_norms(model))
    return {"norms": got, "grads": gradients(model)}


def answer(value: Any) -> bool | str:
    """What ``losses_in_sync`` returned, as a bool (a one-element bool tensor counts); else a description."""
    if isinstance(value, bool):
        return value
    if isinstance(value, torch.Tensor) and value.dtype == torch.bool and value.numel() == 1:
        return bool(value.item())
    return f"not a bool: {type(value).__name__} {repr(value)[:60]}"


def sync_loss(inputs: dict[str, Any]) -> torch.Tensor:
    """This rank's loss in a ``sync`` call: its model seed, its batch seed, one weight scaled by its nudge.

    Ranks given the same inputs compute the same loss, bit for bit; a rank that reads another batch, or
    whose nudge differs (a replica that drifted), computes another.
    """
    dims = list(inputs["dims"])
    model = build_model(int(inputs["model_seed"]), dims)
    x, y = make_batch(int(inputs["batch_seed"]), dims, int(inputs["batch"]))
    nudge = inputs["nudge"]
    with torch.no_grad():
        p = dict(model.named_parameters())[str(nudge["param"])]
        p.view(-1)[int(nudge["index"])] *= 1 + float(nudge["scale"])
        return loss_fn(model, x, y)


def sync(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """``losses_in_sync(loss)`` with this rank's loss (a 0-dim float64 tensor).

    ``in_sync``: what it returned (judged). ``loss``: this rank's loss (shown, never judged).
    """
    loss = sync_loss(inputs)
    return {"in_sync": answer(submission.losses_in_sync(loss.clone())), "loss": float(loss)}


def make_tensor(seed: int, index: int, rank: int, op: dict[str, Any]) -> torch.Tensor:
    """Rank ``rank``'s tensor for collective ``index``: small integers, so every sum is exact in any order."""
    gen = torch.Generator().manual_seed(seed + 1009 * index + rank)
    return torch.randint(-16, 17, (int(op["numel"]),), generator=gen).to(DTYPES[op["dtype"]])


def digest(t: torch.Tensor) -> torch.Tensor:
    """Two exact numbers that tell a collective's output apart: its sum and a position-weighted sum."""
    flat = t.reshape(-1).to(torch.float64)
    return torch.stack([flat.sum(), (flat * torch.arange(1, flat.numel() + 1, dtype=torch.float64)).sum()])


def as_row(row: Any) -> dict[str, Any] | str:
    """One row of ``table()`` as plain data: ``op`` (str), ``bytes`` (int), ``seconds`` (float)."""
    if not isinstance(row, dict):
        return f"not a dict: {type(row).__name__} {repr(row)[:60]}"
    missing = [k for k in ("op", "bytes", "seconds") if k not in row]
    if missing:
        return f"a row without {', '.join(repr(k) for k in missing)}: {repr(row)[:80]}"
    try:
        nbytes, seconds = (v.item() if isinstance(v, torch.Tensor) else v for v in (row["bytes"], row["seconds"]))
        nbytes, seconds = int(nbytes), float(seconds)
    except (TypeError, ValueError, RuntimeError) as exc:
        return f"bytes or seconds is not a number ({exc}): {repr(row)[:80]}"
    return {"op": str(row["op"]), "bytes": nbytes, "seconds": seconds}


def timing(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """The collectives of ``inputs["ops"]`` issued through a fresh ``CommProfiler``, then its table.

    ``rows``: ``table()``'s rows as plain data (judged: one per collective, op and bytes; times).
    ``results``: a digest of each collective's output on this rank (judged: the collectives worked).
    ``elapsed``: the driver's own wall-clock time around the whole sequence (bounds the times).
    ``waited``: the driver's own wall-clock time around the delayed all-reduce's call.
    """
    rank, world_size = dist.get_rank(), dist.get_world_size()
    seed = int(inputs["seed"])
    profiler = submission.CommProfiler()
    dist.barrier()
    results = []
    waited = math.nan
    start = time.perf_counter()
    for i, op in enumerate(inputs["ops"]):
        t = make_tensor(seed, i, rank, op)
        if i == int(inputs["delayed"]):
            dist.barrier()  # not through the profiler: it must not appear in the table
            if rank == int(inputs["straggler"]):
                time.sleep(float(inputs["delay"]))
        issued = time.perf_counter()
        if op["op"] == "all_reduce":
            profiler.all_reduce(t)
        elif op["op"] == "broadcast":
            profiler.broadcast(t, src=int(op["src"]))
        else:
            out = [torch.empty_like(t) for _ in range(world_size)]
            profiler.all_gather(out, t)
            t = torch.cat(out)
        if i == int(inputs["delayed"]):
            waited = time.perf_counter() - issued
        results.append(digest(t))
    elapsed = time.perf_counter() - start
    table = profiler.table()
    if isinstance(table, (list, tuple)):
        rows: list[Any] | str = [as_row(r) for r in table]
    else:
        rows = f"table() returned {type(table).__name__}, not a list of rows"
    return {"rows": rows, "results": results, "elapsed": elapsed, "waited": waited}


def expected_output(seed: int, index: int, op: dict[str, Any], world_size: int) -> torch.Tensor:
    """What collective ``index`` leaves on every rank, computed on one process (used by the judge)."""
    tensors = [make_tensor(seed, index, r, op) for r in range(world_size)]
    if op["op"] == "all_reduce":
        return torch.stack(tensors).sum(0)
    if op["op"] == "broadcast":
        return tensors[int(op["src"])]
    return torch.cat(tensors)
