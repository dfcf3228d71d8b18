"""Local SGD on one process: every rank's replica trained side by side, then averaged (trusted, never mounted).

The N replicas of the MLP are stacked along a first dimension and trained together (one batched
forward and backward per step, ``torch.baddbmm``), each on its own rank's shard, each with its own
SGD momentum buffer, as ``torch.optim.SGD(lr, momentum, weight_decay)`` updates them. Several runs
over the same shards (H = 2 and H = 4, say) are stacked too, so that they share each step's
kernels. Float64 throughout; the ranks' own arithmetic (``nn.Linear``, gloo's sums) differs from
it by rounding only, about 1e-15 relative after 8 steps.

A run is ``(sync, mode)``: ``sync(step)`` says whether its replicas communicate at step ``step``
(0-based), and ``mode`` what they do then:

- ``"mean"``: local SGD: after the optimizer step, every replica is replaced by the replicas' mean;
- ``"gradients"``: synchronous data parallelism: before the optimizer step, every replica's gradient
  is replaced by the replicas' mean (the whole batch's gradient, the shards being equal);
- ``"sum"`` and ``"before"`` replay mistakes, for the checks' advice only: the replicas' sum instead
  of their mean, and the mean taken between the backward pass and the optimizer step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

Params = dict[str, torch.Tensor]
Run = tuple[Callable[[int], bool], str]


def _forward(params: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """The stacked MLPs on stacked inputs: ``params`` is weight, bias, weight, bias, ... each (R, ...)."""
    h = x
    layers = len(params) // 2
    for k in range(layers):
        weight, bias = params[2 * k], params[2 * k + 1]
        h = torch.baddbmm(bias.unsqueeze(1), h, weight.transpose(1, 2))
        if k < layers - 1:
            h = torch.tanh(h)
    return h


def _combine(tensors: list[torch.Tensor], parts: list[tuple[int, bool]], size: int) -> list[torch.Tensor]:
    """Each tensor with its k-th block of ``size`` replicas replaced by their sum (True) or mean, where
    ``parts`` lists (k, summed); the other blocks unchanged."""
    if not parts:
        return tensors
    out = []
    for t in tensors:
        blocks = list(t.split(size))
        for k, summed in parts:
            block = blocks[k]
            blocks[k] = (block.sum(0, keepdim=True) if summed else block.mean(0, keepdim=True)).expand_as(block)
        out.append(torch.cat(blocks))
    return out


def run(
    start: Params,
    shards: list[tuple[torch.Tensor, torch.Tensor]],
    runs: Sequence[Run],
    *,
    steps: int,
    lr: float,
    momentum: float,
    weight_decay: float,
) -> tuple[list[list[Params]], torch.Tensor]:
    """Per run, each replica's parameters after ``steps`` steps (in ``start``'s order of names), and the
    losses (runs x replicas x steps: each replica's mean squared error on its shard, before the step).

    ``shards[r]`` is replica r's ``(x, y)``: steps x examples x features, as the ranks are given them.
    """
    names = list(start)
    size, count = len(shards), len(shards) * len(runs)
    params = [start[n].detach().unsqueeze(0).repeat(count, *([1] * start[n].dim())) for n in names]
    buffers: list[torch.Tensor | None] = [None] * len(params)
    losses = torch.empty(count, steps, dtype=torch.float64)
    inputs = torch.stack([xs[:steps] for xs, _ in shards] * len(runs), dim=1)  # steps x replicas x batch x in
    targets = torch.stack([ys[:steps] for _, ys in shards] * len(runs), dim=1)
    for step in range(steps):
        due = [(k, mode) for k, (sync, mode) in enumerate(runs) if sync(step)]
        leaves = [p.detach().requires_grad_() for p in params]
        per = ((_forward(leaves, inputs[step]) - targets[step]) ** 2).mean(dim=(1, 2))
        grads = list(torch.autograd.grad(per.sum(), leaves))  # replicas are independent: each its own gradient
        losses[:, step] = per.detach()
        grads = _combine(grads, [(k, False) for k, mode in due if mode == "gradients"], size)
        params = _combine(params, [(k, False) for k, mode in due if mode == "before"], size)
        updated = []
        with torch.no_grad():
            for k, (p, g) in enumerate(zip(params, grads, strict=True)):
                d = g + weight_decay * p
                last = buffers[k]
                buffer = d.clone() if last is None else last * momentum + d
                buffers[k] = buffer
                updated.append(p - lr * buffer)
        params = _combine(updated, [(k, mode == "sum") for k, mode in due if mode in ("mean", "sum")], size)
    replicas = [{n: params[k][r].clone() for k, n in enumerate(names)} for r in range(count)]
    return [replicas[k * size : (k + 1) * size] for k in range(len(runs))], losses.view(len(runs), size, steps)
