# grows the scale after every clean step, ignoring growth_interval
import math

import torch
import torch.distributed as dist


class DistributedLossScaler:
    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
    ) -> None:
        self._scale = float(init_scale)
        self.growth_factor = float(growth_factor)
        self.backoff_factor = float(backoff_factor)
        self.growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._found_inf: bool | None = None

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        return loss * self._scale

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        inv_scale = 1.0 / self._scale
        found = torch.zeros(1, dtype=torch.float64)
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.grad.mul_(inv_scale)  # unscale in place, as GradScaler.unscale_ does
                if not bool(torch.isfinite(p.grad).all()):
                    found.fill_(1.0)
        dist.all_reduce(found, op=dist.ReduceOp.MAX)  # an overflow anywhere is an overflow everywhere
        self._found_inf = bool(found.item())
        if not self._found_inf:
            optimizer.step()

    def update(self) -> None:
        if self._found_inf is None:
            raise RuntimeError("update() called before step()")
        if self._found_inf:
            self._scale *= self.backoff_factor
            self._growth_tracker = 0
        else:
            grown = self._scale * self.growth_factor
            if math.isfinite(grown):
                self._scale = grown
        self._found_inf = None

    def get_scale(self) -> float:
        return self._scale
