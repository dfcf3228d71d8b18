"""Public driver for ddp-scaling: the training loop every rank runs around your code, and the model clock.

Not secret: read it to see exactly what the grader does. Each rank builds the same MLP from the seed it
is given and is given its own equal shard of every step's global batch (``inputs["x"][step]``,
``inputs["y"][step]``: tensors the grader drew; no rank is given, or can draw, another rank's shard).
Each step it computes the mean squared error over that shard, calls ``loss.backward()``, then your
``sync_gradients(model)``, and takes a plain SGD step on whatever ``.grad`` holds afterwards.

After training it asks your ``throughput(model, clock, world_size, global_batch)`` for the samples per
second of this loop on the model clock ``inputs["clock"]``, at 1 rank and at this group's world size,
and your ``scaling_efficiency`` for the efficiency of the second against the first. What it returns is
judged outside your code: the parameters against single-process training on the whole batch, the
throughputs and the efficiency against what the clock says the all-reduces your ranks put on the wire
cost (counted by the kernel, outside your code).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from data_parallel import gradients, require_grads, whole_batch
from mlp import build_model, loss_fn


def sgd_step(model: torch.nn.Module, lr: float, weight_decay: float) -> None:
    """``p <- p - lr * (grad + weight_decay * p)`` for every parameter (plain SGD with L2 weight decay)."""
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is None:
                raise RuntimeError("a parameter's .grad is None after sync_gradients(): keep the gradients in .grad")
            p.sub_(lr * (p.grad + weight_decay * p))


def train(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Data-parallel training with the student's ``sync_gradients``, then the student's figures for it.

    ``params``: every parameter after ``inputs["steps"]`` SGD steps (judged).
    ``throughput``: ``throughput(model, clock, N, batch)`` at this group's world size N (judged).
    ``throughput_1``: ``throughput(model, clock, 1, batch)`` (judged).
    ``efficiency``: ``scaling_efficiency(throughput_1, throughput, N)`` (judged).
    ``grads``: every ``.grad`` after ``sync_gradients`` in the first step (never judged: the grader reads it
    to tell which mistake explains wrong parameters).
    ``losses``: this rank's shard loss at each step (shown, never judged).
    """
    model = build_model(int(inputs["seed"]), list(inputs["dims"]))
    first: dict[str, torch.Tensor] = {}
    losses = []
    for step in range(int(inputs["steps"])):
        x, y = inputs["x"][step], inputs["y"][step]  # this rank's shard of the step's global batch
        for p in model.parameters():
            p.grad = None
        loss = loss_fn(model, x, y)
        loss.backward()
        submission.sync_gradients(model)  # yours
        require_grads(model, "sync_gradients()", step, "averaged")
        if step == 0:
            first = gradients(model)
        sgd_step(model, float(inputs["lr"]), float(inputs["weight_decay"]))
        losses.append(float(loss.detach()))
    clock = dict(inputs["clock"])
    batch, world_size = int(inputs["batch"]), dist.get_world_size()
    one = float(submission.throughput(model, dict(clock), 1, batch))  # yours
    mine = float(submission.throughput(model, dict(clock), world_size, batch))  # yours
    efficiency = float(submission.scaling_efficiency(one, mine, world_size))  # yours
    return {
        "params": {name: p.detach().clone() for name, p in model.named_parameters()},
        "throughput": mine,
        "throughput_1": one,
        "efficiency": efficiency,
        "grads": first,
        "losses": torch.tensor(losses, dtype=torch.float64),
    }


def reference(per_rank: list[dict[str, Any]]) -> dict[str, dict[str, torch.Tensor]]:
    """The same training on one process with the whole global batch: the parameters ``train`` must end with
    (``params``), and the first step's gradients (``grads``).

    ``per_rank``: every rank's inputs; the grader runs this outside the sandbox, where it has them all.
    """
    inputs = per_rank[0]
    model = build_model(int(inputs["seed"]), list(inputs["dims"]))
    first: dict[str, torch.Tensor] = {}
    for step in range(int(inputs["steps"])):
        x, y = whole_batch(per_rank, step)
        for p in model.parameters():
            p.grad = None
        loss_fn(model, x, y).backward()
        if step == 0:
            first = gradients(model)
        sgd_step(model, float(inputs["lr"]), float(inputs["weight_decay"]))
    return {"params": {name: p.detach().clone() for name, p in model.named_parameters()}, "grads": first}
