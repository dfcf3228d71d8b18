# warms up from base_lr (Goyal et al.'s start) instead of from 0: base_lr + (target - base_lr) * (s + 1) / warmup
def scaled_lr(step: int, base_lr: float, world_size: int, warmup_steps: int) -> float:
    target = base_lr * world_size
    if step < warmup_steps:
        return base_lr + (target - base_lr) * (step + 1) / warmup_steps
    return target
