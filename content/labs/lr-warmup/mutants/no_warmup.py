# no warmup at all: the scaled rate from the very first step
def scaled_lr(step: int, base_lr: float, world_size: int, warmup_steps: int) -> float:
    return base_lr * world_size
