"""Mixed precision on a GPU: one training step with torch.autocast and a GradScaler.

The grader's public driver (read driver.py) builds a float32 MLP on the GPU, an SGD optimizer
(momentum 0.9) and a torch.amp.GradScaler("cuda", init_scale=2**16, growth_interval=3), and
calls amp_train_step once per batch, 10 times. One batch is multiplied by 1000: its scaled
gradients overflow float16, and your step must let the scaler skip it.
"""

import torch
import torch.nn.functional as F


def amp_train_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    x: torch.Tensor,
    y: torch.Tensor,
    max_norm: float,
) -> torch.Tensor:
    """One mixed-precision training step on the batch (x, y); return the loss, detached.

    1. zero the gradients;
    2. forward and loss, F.cross_entropy(model(x), y), inside
       torch.autocast(device_type="cuda", dtype=torch.float16) (keep the model float32);
    3. backward the scaled loss: scaler.scale(loss).backward();
    4. unscale the gradients (scaler.unscale_(optimizer)) and clip their total norm to max_norm
       with torch.nn.utils.clip_grad_norm_;
    5. scaler.step(optimizer), then scaler.update().
    """
    optimizer.zero_grad(set_to_none=True)
    # TODO: run the forward pass and the loss under torch.autocast(device_type="cuda", dtype=torch.float16)
    loss = F.cross_entropy(model(x), y)
    # TODO: the scaled backward, unscale_ and clip to max_norm, scaler.step, scaler.update
    raise NotImplementedError(f"one autocast + GradScaler training step (loss {float(loss):.4f})")
