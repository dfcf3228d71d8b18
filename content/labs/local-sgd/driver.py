"""Public driver for local-sgd: the training loop every rank runs around your ``local_sgd_step``.

Not secret: read it to see exactly what the grader does. Each rank builds the same model and the
same ``torch.optim.SGD`` (momentum 0.9, weight decay) from the seed it is given, and is given its
own shard of every step's global batch (``inputs["x"][step]``, ``inputs["y"][step]``: tensors the
grader drew; no rank is given, or can draw, another rank's shard). At each step it clears the
gradients, computes the mean squared error over this rank's shard, calls ``loss.backward()`` and
then your ``local_sgd_step(model, optimizer, step, H)``, which takes the optimizer step and, every
H steps, averages the parameters over the ranks. What it returns is compared, outside your code,
with a single-process simulation of local SGD on every rank's shards (and, for H = 1, with
synchronous data-parallel training on the whole batch).
"""

from __future__ import annotations

from typing import Any

import torch
from mlp import build_model, build_optimizer, loss_fn


def train(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Local SGD with the student's ``local_sgd_step``; returns what the judge compares.

    ``params``: every parameter after ``inputs["steps"]`` steps (judged).
    ``first``: every parameter after step H - 1, where the first average is due, flattened in order
    (never judged: the grader reads it to tell which mistake explains wrong parameters).
    ``losses``: this rank's shard loss at each step, before that step's update (drawn, never judged).
    """
    model = build_model(int(inputs["seed"]), list(inputs["dims"]))
    optimizer = build_optimizer(model, inputs)
    every = int(inputs["H"])
    losses = []
    first = torch.empty(0, dtype=torch.float64)
    for step in range(int(inputs["steps"])):
        x, y = inputs["x"][step], inputs["y"][step]  # this rank's shard of the step's global batch
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model, x, y)
        loss.backward()
        submission.local_sgd_step(model, optimizer, step, every)  # yours: the step, and every H steps the average
        losses.append(float(loss.detach()))
        if step == every - 1:
            first = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    params = {name: p.detach().clone() for name, p in model.named_parameters()}
    return {"params": params, "first": first, "losses": torch.tensor(losses, dtype=torch.float64)}
