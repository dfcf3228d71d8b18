"""Public driver for pipeline-gpipe: what every rank (one pipeline stage) runs around your code.

Not secret: read it to see exactly what the grader does. The model is a float64 MLP
``Linear, Tanh, ..., Linear``; rank r of N holds linear layers ``[r L/N, (r + 1) L/N)`` (each with
the Tanh after it, but the last) and is given their parameters only. Rank 0 alone is given the
batch, the last rank alone the targets, so the losses and gradients can only be right if the
activations and their gradients crossed the wire. What ``gpipe_step`` returns is compared, outside
your code, with the unsplit model on one process.

The stage records each forward call and backward pass through it, and how long they took: made
inside your process, that record is shown (the bubble chart), never scored. In the timed runs the
stage *simulates* a GPU's compute with a sleep proportional to the rows (the backward twice the
forward), so that N stages overlap the way N devices would on any machine. It changes no value.
"""

from __future__ import annotations

import itertools
import time
import types
from collections import OrderedDict
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F


def modules(dims: list[int]) -> list[tuple[str, tuple[int, int] | None]]:
    """The unsplit model's modules in order, by name: ``(name, (fan_in, fan_out))`` for a Linear, ``None`` a Tanh."""
    out: list[tuple[str, tuple[int, int] | None]] = []
    for i, (fan_in, fan_out) in enumerate(itertools.pairwise(dims)):
        out.append((str(len(out)), (fan_in, fan_out)))
        if i < len(dims) - 2:
            out.append((str(len(out)), None))
    return out


def stage_slice(dims: list[int], rank: int, world_size: int) -> slice:
    """The modules of the unsplit model that stage ``rank`` holds: its linear layers and their Tanh."""
    per = (len(dims) - 1) // world_size
    end = 2 * (rank + 1) * per
    return slice(2 * rank * per, end if rank < world_size - 1 else end - 1)


def assemble(dims: list[int], params: dict[str, torch.Tensor], chosen: slice = slice(None)) -> torch.nn.Sequential:
    """The ``chosen`` modules of the model, keeping the unsplit model's names, with the given ``params``.

    ``params`` maps ``"2.weight"``, ``"2.bias"``, ... to tensors (copied); the whole model when
    ``chosen`` is everything, one stage's modules with ``stage_slice``.
    """
    layers: OrderedDict[str, torch.nn.Module] = OrderedDict()
    for name, shape in modules(dims)[chosen]:
        if shape is None:
            layers[name] = torch.nn.Tanh()
            continue
        linear = torch.nn.Linear(*shape, dtype=torch.float64, device="meta")  # no initialisation to throw away
        linear.weight = torch.nn.Parameter(params[f"{name}.weight"].clone())
        linear.bias = torch.nn.Parameter(params[f"{name}.bias"].clone())
        layers[name] = linear
    return torch.nn.Sequential(layers)


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error, averaged over every element of one micro-batch."""
    return F.mse_loss(output, target)


class _Work(torch.autograd.Function):
    """The identity, plus the stage's simulated compute time and its record of each backward pass."""

    @staticmethod
    def forward(ctx: Any, h: torch.Tensor, stage: Stage) -> torch.Tensor:
        ctx.stage, ctx.rows = stage, h.shape[0]
        stage.work(stage.forward_s_per_row * h.shape[0])
        return h.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        stage: Stage = ctx.stage
        start = time.perf_counter()
        stage.work(stage.backward_s_per_row * ctx.rows)
        stage.events.append(f"B{ctx.rows}")
        stage.busy += time.perf_counter() - start
        return grad, None


class Stage(torch.nn.Module):
    """One pipeline stage: a slice of the unsplit model. ``stage(x)`` runs its layers on a micro-batch.

    Its parameters keep the unsplit model's names (``stage.layers`` is a ``torch.nn.Sequential``
    whose modules are named ``"2"``, ``"3"``, ... as in the whole model). ``events`` lists what it
    ran, in order: ``"F32"`` for a forward of 32 rows, ``"B32"`` for a backward pass through it.
    """

    def __init__(self, layers: torch.nn.Sequential, forward_s_per_row: float = 0.0, backward_s_per_row: float = 0.0):
        super().__init__()
        self.layers = layers
        self.forward_s_per_row, self.backward_s_per_row = forward_s_per_row, backward_s_per_row
        self.events: list[str] = []
        self.busy = 0.0  # seconds spent computing (forward calls and backward passes)

    def work(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        start = time.perf_counter()
        self.events.append(f"F{x.shape[0]}")
        h = x
        for i, layer in enumerate(self.layers):
            h = layer(h)
            if i == 0:
                h = _Work.apply(h, self)
        self.busy += time.perf_counter() - start
        return h


def build_stage(inputs: dict[str, Any], rank: int, world_size: int) -> Stage:
    """Rank ``rank``'s stage from the parameters it was given, with the run's simulated compute time."""
    dims = list(inputs["dims"])
    return Stage(
        assemble(dims, inputs["params"], stage_slice(dims, rank, world_size)),
        float(inputs.get("forward_s_per_row", 0.0)),
        float(inputs.get("backward_s_per_row", 0.0)),
    )


def _losses(got: Any, rank: int, world_size: int) -> Any:
    if rank != world_size - 1:
        return "not the last stage"
    if isinstance(got, torch.Tensor) and got.dim() == 1:
        got = list(got.detach())
    if not isinstance(got, list | tuple):
        raise TypeError(
            f"gpipe_step returned {type(got).__name__} on the last stage (rank {rank}): return the list of the"
            " num_micro_batches micro-batch losses, in micro-batch order"
        )
    return torch.tensor(
        [float(loss.detach()) if isinstance(loss, torch.Tensor) else float(loss) for loss in got], dtype=torch.float64
    )


def run(m: int) -> str:
    """The key of the run with ``m`` micro-batches in a result: ``"M=4"``."""
    return f"M={m}"


def step(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Your ``gpipe_step`` on a fresh stage (no ``.grad``), once for each M in ``inputs["micro_batches"]``.

    Returns, per run (dicts keyed ``"M=1"``, ...): ``losses`` (the last stage's M losses, float64;
    a fixed string elsewhere), ``grads`` (each ``.grad`` by its name in the unsplit model), and,
    shown but never scored, ``events`` (the stage's record) and ``timing`` (the call's start and end,
    and the seconds the stage spent computing).
    """
    rank, world_size = dist.get_rank(), dist.get_world_size()
    dims, batch = list(inputs["dims"]), int(inputs["batch"])
    x, y = inputs.get("x"), inputs.get("y")  # the batch on rank 0 only, the targets on the last rank only
    out: dict[str, Any] = {"losses": {}, "grads": {}, "events": {}, "timing": {}}
    for m in inputs["micro_batches"]:
        m, key = int(m), run(int(m))
        stage = build_stage(inputs, rank, world_size)
        shape = (batch // m, dims[1])  # one micro-batch's activation: every hidden layer has dims[1] features
        if inputs.get("timed"):
            dist.barrier()  # every stage starts together (timed runs are not measured on the wire)
        start = time.perf_counter()
        inputs_, targets = (t.clone() if t is not None else None for t in (x, y))
        got = submission.gpipe_step(stage, inputs_, targets, m, shape, loss_fn)
        end = time.perf_counter()
        out["losses"][key] = _losses(got, rank, world_size)
        out["grads"][key] = {
            name.removeprefix("layers."): p.grad.detach().clone()
            if p.grad is not None
            else torch.full_like(p, float("nan"))
            for name, p in stage.named_parameters()
        }
        out["events"][key] = list(stage.events)
        out["timing"][key] = {"start": start, "end": end, "busy": stage.busy}
    out["uses_pipelining"] = uses_pipelining(submission)
    return out


def uses_pipelining(module: Any) -> bool:
    """Whether ``module`` holds anything from ``torch.distributed.pipelining`` (not allowed in this lab)."""
    for value in vars(module).values():
        name = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
        if isinstance(name, str) and name.startswith("torch.distributed.pipelining"):
            return True
    return False


def reference(per_rank: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The unsplit model on one process, per M: each micro-batch's loss and the gradients of their mean.

    ``per_rank``: every rank's inputs (every stage's parameters, rank 0's batch, the last rank's
    targets); the grader runs this outside the sandbox, where it has them all.
    """
    inputs, params = per_rank[0], {k: v for i in per_rank for k, v in i["params"].items()}
    dims = list(inputs["dims"])
    x, y = per_rank[0]["x"], per_rank[-1]["y"]
    out: dict[str, dict[str, Any]] = {"losses": {}, "grads": {}}
    for m in inputs["micro_batches"]:
        model = assemble(dims, params)
        losses = [loss_fn(model(xm), ym) for xm, ym in zip(x.chunk(int(m)), y.chunk(int(m)), strict=True)]
        (sum(losses) / int(m)).backward()  # type: ignore[union-attr]
        out["losses"][run(int(m))] = torch.stack([loss.detach() for loss in losses])
        out["grads"][run(int(m))] = {name: p.grad.detach().clone() for name, p in model.named_parameters()}  # type: ignore[union-attr]
    return out
