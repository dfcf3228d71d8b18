"""Public driver for grad-accumulation: the training loop every rank runs around your code.

Not secret: read it to see exactly what the grader does. Each rank builds the same
model and the same ``torch.optim.SGD`` (momentum) from the seed it is given, is given its
own equal shard of each step's global batch (``inputs["x"][step]``, ``inputs["y"][step]``:
tensors the grader drew; no rank is given, or can draw, another rank's shard), cuts that
shard into K equal micro-batches and calls your ``accumulate_and_sync(model, micro_batches,
loss_fn)`` once per optimizer step.
It never clears ``.grad`` itself: after your call it checks that every parameter has a
gradient and calls ``optimizer.step()``. What it returns is compared, outside your code,
with single-process training on the whole global batch (no accumulation at all).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from data_parallel import gradients, require_grads, whole_batch
from mlp import build_model, build_optimizer


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error, averaged over every element of this (micro-)batch."""
    return F.mse_loss(output, target)


def micro_batches(x: torch.Tensor, y: torch.Tensor, k: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """This rank's shard cut into ``k`` equal, contiguous micro-batches ``(x_k, y_k)``."""
    per = x.shape[0] // k
    return [(x[j * per : (j + 1) * per].clone(), y[j * per : (j + 1) * per].clone()) for j in range(k)]


def train(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Data-parallel training with the student's ``accumulate_and_sync``; returns what the judge compares.

    ``grads``: every parameter's ``.grad`` after ``accumulate_and_sync`` in the first step.
    ``params``: every parameter after ``inputs["steps"]`` optimizer steps.
    """
    model = build_model(int(inputs["seed"]), list(inputs["dims"]))
    optimizer = build_optimizer(model, inputs)
    first: dict[str, torch.Tensor] = {}
    for step in range(int(inputs["steps"])):
        # This rank's shard of the step's global batch, cut into K micro-batches.
        mine = micro_batches(inputs["x"][step], inputs["y"][step], int(inputs["micro_batches"]))
        submission.accumulate_and_sync(model, mine, loss_fn)
        if step == 0:
            first = gradients(model)
        require_grads(model, "accumulate_and_sync()", step, "accumulated, synchronised")
        optimizer.step()
    params = {name: p.detach().clone() for name, p in model.named_parameters()}
    return {"grads": first, "params": params}


def reference(per_rank: list[dict[str, Any]]) -> dict[str, Any]:
    """The same training on one process, one backward of the mean loss over the whole global batch.

    ``per_rank``: every rank's inputs; the grader runs this outside the sandbox, where it has them all.
    """
    inputs = per_rank[0]
    model = build_model(int(inputs["seed"]), list(inputs["dims"]))
    optimizer = build_optimizer(model, inputs)
    first: dict[str, torch.Tensor] = {}
    for step in range(int(inputs["steps"])):
        x, y = whole_batch(per_rank, step)
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        if step == 0:
            first = gradients(model)
        optimizer.step()
    return {"grads": first, "params": {name: p.detach().clone() for name, p in model.named_parameters()}}
