"""Reference solution for lr-warmup (the project's tests only; never shown to students)."""


def scaled_lr(step: int, base_lr: float, world_size: int, warmup_steps: int) -> float:
    target = base_lr * world_size  # the linear scaling rule: N times the batch, N times the rate
    if step < warmup_steps:
        return target * (step + 1) / warmup_steps
    return target
