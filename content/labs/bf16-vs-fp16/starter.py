"""BFloat16 vs float16: train the same model in both formats under CPU autocast.

The grader's public driver builds the float32 model and an SGD optimizer on each rank (rank 0
trains in float16, rank 1 in bfloat16, on the same batches) and calls, for every step:

    loss, overflowed = trainer.step(x, y)   # <- yours
    trainer.scale()                         # <- yours: recorded after every step

``model(x, y)`` returns the mean cross-entropy. You may use torch.amp.GradScaler("cpu") or keep
the scale yourself; the rule is GradScaler's, with growth factor 2 and backoff factor 0.5.
"""

import torch


class MixedPrecisionTrainer:
    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        dtype: torch.dtype,
        init_scale: float,
        growth_interval: int,
        max_norm: float,
    ) -> None:
        """Train ``model`` (float32 parameters) in ``dtype``, torch.float16 or torch.bfloat16.

        float16 needs dynamic loss scaling starting at ``init_scale``; clip the total gradient
        norm to ``max_norm`` before every optimizer step.
        """
        self.model, self.optimizer, self.dtype = model, optimizer, dtype
        self.init_scale, self.growth_interval, self.max_norm = init_scale, growth_interval, max_norm

    def step(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, bool]:
        """One training step on the batch ``(x, y)``.

        Zero the gradients; compute ``self.model(x, y)`` under torch.autocast("cpu", dtype=self.dtype);
        backward (of the scaled loss, where the format needs scaling); unscale; if any gradient holds an
        inf or nan, skip the optimizer step, else clip and step; update the scale. Returns the loss
        (detached, not scaled) and whether the gradients overflowed.
        """
        # TODO: the step above.
        raise NotImplementedError(f"one {self.dtype} step on a batch of shape {tuple(x.shape)}")

    def scale(self) -> float:
        """The loss scale after the last step (1.0 where the format is not scaled)."""
        raise NotImplementedError("the current loss scale")


def format_range(exponent_bits: int, mantissa_bits: int) -> dict[str, float]:
    """The range of a binary floating-point format with these bits, IEEE style (the all-ones exponent
    is reserved for inf and nan): ``{"max": largest finite value, "min_normal": smallest positive
    normal value, "epsilon": the gap between 1.0 and the next value}``, as Python floats."""
    raise NotImplementedError(f"the range of a format with {exponent_bits} exponent and {mantissa_bits} mantissa bits")
