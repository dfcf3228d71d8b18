# square-root scaling: target base_lr * sqrt(world_size) instead of base_lr * world_size
import math


def scaled_lr(step: int, base_lr: float, world_size: int, warmup_steps: int) -> float:
    target = base_lr * math.sqrt(world_size)
    if step < warmup_steps:
        return target * (step + 1) / warmup_steps
    return target
