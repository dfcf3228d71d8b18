"""Public driver for ddp-from-scratch: the training loop every rank runs around your code.

Not secret: read it to see exactly what the grader does. Each rank builds the
same model from the seed it is given and is given its own equal shard of every
step's global batch (``inputs["x"][step]``, ``inputs["y"][step]``: tensors the grader
drew; no rank is given, or can draw, another rank's shard). It computes the mean
squared error over that shard, calls ``loss.backward()`` and then your
``sync_gradients(model)``, and takes a plain SGD step (with weight decay) on whatever
``.grad`` holds afterwards. What it returns is compared, outside your code, with
single-process training on the whole global batch (every rank's shard, in rank order).
"""

from __future__ import annotations

from typing import Any

import torch
from data_parallel import gradients, whole_batch
from mlp import build_model, loss_fn


def sgd_step(model: torch.nn.Module, lr: float, weight_decay: float) -> None:
    """``p <- p - lr * (grad + weight_decay * p)`` for every parameter (plain SGD with L2 weight decay)."""
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is None:
                raise RuntimeError("a parameter's .grad is None after sync_gradients(): keep the gradients in .grad")
            p.sub_(lr * (p.grad + weight_decay * p))


def train(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Data-parallel training with the student's ``sync_gradients``; returns what the judge compares.

    ``grads``: every parameter's ``.grad`` after ``sync_gradients`` in the first step.
    ``params``: every parameter after ``inputs["steps"]`` SGD steps.
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
        submission.sync_gradients(model)
        if step == 0:
            first = gradients(model)
        sgd_step(model, float(inputs["lr"]), float(inputs["weight_decay"]))
        losses.append(float(loss.detach()))
    params = {name: p.detach().clone() for name, p in model.named_parameters()}
    return {"grads": first, "params": params, "losses": torch.tensor(losses, dtype=torch.float64)}


def reference(per_rank: list[dict[str, Any]]) -> dict[str, Any]:
    """The same training on one process with the whole global batch (what ``train`` must equal).

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
            first = {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}
        sgd_step(model, float(inputs["lr"]), float(inputs["weight_decay"]))
    return {"grads": first, "params": {name: p.detach().clone() for name, p in model.named_parameters()}}
