"""Learning-rate scaling with linear warmup, for data-parallel training on N ranks.

The grader's public driver (its loop is in the statement) calls your function once per
optimizer step, on every rank, and sets the optimizer's learning rate to what it returns:

    lr = scaled_lr(step, base_lr, dist.get_world_size(), warmup_steps)
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.step()

Steps count from 0. Return a plain Python float.
"""


def scaled_lr(step: int, base_lr: float, world_size: int, warmup_steps: int) -> float:
    """The learning rate of optimizer step ``step`` (0, 1, 2, ...).

    ``base_lr`` is the rate tuned for one rank's batch. With ``world_size`` ranks the global
    batch is ``world_size`` times larger, so the linear scaling rule's target rate is
    ``base_lr * world_size``. For the first ``warmup_steps`` steps the rate climbs linearly
    towards that target: step ``s < warmup_steps`` gets ``target * (s + 1) / warmup_steps``,
    so the last warmup step (``s = warmup_steps - 1``) already reaches the target. Every step
    from ``warmup_steps`` on gets the target itself. ``warmup_steps = 0`` means no warmup.
    """
    # TODO: compute the target with the linear scaling rule, then warm up to it.
    raise NotImplementedError("return the scaled, warmed-up learning rate of this step")
