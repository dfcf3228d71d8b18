"""Reference solution for bf16-vs-fp16 (the project's tests and authors only; never shown to students)."""

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
        self.model, self.optimizer, self.dtype, self.max_norm = model, optimizer, dtype, max_norm
        self.scaling = dtype == torch.float16  # bfloat16 has float32's exponent range: nothing to scale
        self._scale = float(init_scale) if self.scaling else 1.0
        self.growth_interval = growth_interval
        self._clean_steps = 0

    def step(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, bool]:
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=self.dtype):
            loss = self.model(x, y)
        (loss * self._scale).backward()
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        for g in grads:
            g.mul_(1.0 / self._scale)  # unscale before anything looks at the gradients
        overflowed = not all(bool(torch.isfinite(g).all()) for g in grads)
        if overflowed:  # skip the step and back off
            self._scale *= 0.5
            self._clean_steps = 0
            return loss.detach(), True
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
        self.optimizer.step()
        if self.scaling:
            self._clean_steps += 1
            if self._clean_steps == self.growth_interval:
                self._scale *= 2.0
                self._clean_steps = 0
        return loss.detach(), False

    def scale(self) -> float:
        return self._scale


def format_range(exponent_bits: int, mantissa_bits: int) -> dict[str, float]:
    bias = 2 ** (exponent_bits - 1) - 1
    return {
        "max": (2.0 - 2.0**-mantissa_bits) * 2.0**bias,  # the all-ones exponent is inf and nan
        "min_normal": 2.0 ** (1 - bias),
        "epsilon": 2.0**-mantissa_bits,
    }
