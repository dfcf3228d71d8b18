# warmup off by one: step s gets target * s / warmup, so step 0 has rate 0 and the target comes a step late
def scaled_lr(step: int, base_lr: float, world_size: int, warmup_steps: int) -> float:
    target = base_lr * world_size
    if step < warmup_steps:
        return target * step / warmup_steps
    return target
