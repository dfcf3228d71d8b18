"""Trusted: the single-process reference of the fine-tuning run, emulating FSDP2's bf16 mixed precision.

Never mounted into the sandbox. One process plays every rank of a world size: for each optimizer step
and each (virtual rank, micro-batch), the forward and backward run on a bfloat16 copy of the float32
parameters (FSDP2's ``param_dtype``), each gradient is cast to float32 and averaged over the ranks
(``reduce_dtype``), summed over the micro-batches, and ``torch.optim.AdamW`` steps the float32
parameters. Rank r's micro-batches are those of ``DistributedSampler(shuffle=True, seed=SEED)`` at the
epoch, batched by ``task.LOCAL_BATCH``. ``Variant`` turns one known mistake on, for the advice.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch


@dataclass(frozen=True)
class Variant:
    """The reference (all defaults) or one known mistake."""

    fixed_order: bool = False  # no sampler.set_epoch: every epoch in the order of epoch 0
    unscaled: bool = False  # the peak learning rate not scaled with the world size
    warmup_from_zero: bool = False  # the warmup's first step at learning rate 0
    cosine_steps: int | None = None  # the cosine's length in steps, if not the run's total
    last_micro: bool = False  # the gradients zeroed before every micro-batch: only the last one's count


def factor(i: int, total: int, variant: Variant = Variant()) -> float:
    """The learning rate's share of the peak at optimizer step ``i`` (0-based) of ``total``."""
    warmup, floor = 2, 0.1
    if i < warmup:
        return (i if variant.warmup_from_zero else i + 1) / warmup
    length = variant.cosine_steps or total
    progress = min(1.0, (i - warmup) / max(1, length - 1 - warmup))
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def order(size: int, seed: int, epoch: int, world_size: int, rank: int) -> list[int]:
    """The sample indices ``DistributedSampler(shuffle=True, seed=seed)`` gives ``rank`` at ``epoch``."""
    gen = torch.Generator().manual_seed(seed + epoch)
    indices = torch.randperm(size, generator=gen).tolist()
    return indices[rank:size:world_size]


def train(task: ModuleType, seed: int, size: int, world_size: int, variant: Variant = Variant()) -> dict[str, Any]:
    """The run on ``world_size`` ranks: ``{"losses": [...], "lrs": [...], "perplexity": float}``, one per step."""
    torch.set_num_threads(1)
    data = task.corpus(seed, size)
    master = task.build_model()
    half = copy.deepcopy(master).to(torch.bfloat16)
    params = list(master.parameters())
    per_rank = size // world_size // task.LOCAL_BATCH  # micro-batches per rank per epoch
    steps_per_epoch = per_rank // task.ACCUMULATION
    total = steps_per_epoch * task.EPOCHS
    peak = task.BASE_LR * (1 if variant.unscaled else world_size)
    optimizer = torch.optim.AdamW(params, lr=peak, betas=task.BETAS, weight_decay=task.WEIGHT_DECAY)
    losses: list[float] = []
    lrs: list[float] = []
    for epoch in range(task.EPOCHS):
        orders = [order(size, seed, 0 if variant.fixed_order else epoch, world_size, r) for r in range(world_size)]
        for s in range(steps_per_epoch):
            with torch.no_grad():
                for h, p in zip(half.parameters(), params, strict=True):
                    h.copy_(p)
            grads = [torch.zeros_like(p) for p in params]
            step_loss = 0.0
            for j in range(task.ACCUMULATION):
                for r in range(world_size):
                    micro = s * task.ACCUMULATION + j
                    rows = orders[r][micro * task.LOCAL_BATCH : (micro + 1) * task.LOCAL_BATCH]
                    loss = task.loss_fn(half, data[rows]) / task.ACCUMULATION
                    half.zero_grad()
                    loss.backward()
                    if variant.last_micro and r == 0 and j == task.ACCUMULATION - 1:
                        for g in grads:
                            g.zero_()
                    step_loss += loss.item()
                    for g, h in zip(grads, half.parameters(), strict=True):
                        g += h.grad.float() / world_size
            lr = peak * factor(len(lrs), total, variant)
            for group in optimizer.param_groups:
                group["lr"] = lr
            for p, g in zip(params, grads, strict=True):
                p.grad = g
            optimizer.step()
            losses.append(step_loss / world_size)
            lrs.append(lr)
    with torch.no_grad():
        for h, p in zip(half.parameters(), params, strict=True):
            h.copy_(p)
        perplexity = math.exp(task.loss_fn(half, task.held_out(seed)).item())
    return {"losses": losses, "lrs": lrs, "perplexity": perplexity}
