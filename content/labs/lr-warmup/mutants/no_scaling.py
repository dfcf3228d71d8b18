# warms up to base_lr: never applies the linear scaling rule (the world size is ignored)
def scaled_lr(step: int, base_lr: float, world_size: int, warmup_steps: int) -> float:
    if step < warmup_steps:
        return base_lr * (step + 1) / warmup_steps
    return base_lr
