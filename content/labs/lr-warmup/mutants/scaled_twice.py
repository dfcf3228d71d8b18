# scales by the world size twice (once for the batch, once more "for the ranks"): base_lr * N^2
def scaled_lr(step: int, base_lr: float, world_size: int, warmup_steps: int) -> float:
    target = base_lr * world_size
    if step < warmup_steps:
        target = target * (step + 1) / warmup_steps
    return target * world_size
