# the warmup never ends: the rate keeps growing as target * (s + 1) / warmup past the target
def scaled_lr(step: int, base_lr: float, world_size: int, warmup_steps: int) -> float:
    target = base_lr * world_size
    return target * (step + 1) / max(warmup_steps, 1)
