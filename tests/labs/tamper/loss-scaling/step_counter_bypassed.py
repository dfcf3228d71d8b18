"""Still steps on an overflow, but through the optimizer's class (``type(optimizer).step``), past the
driver's step counter on the instance, so the overflowed steps look skipped. Imitates:
steps_on_overflow."""

_Honest = globals()["DistributedLossScaler"]


class DistributedLossScaler(_Honest):
    def step(self, optimizer):
        counted = optimizer.step
        optimizer.step = lambda *args, **kwargs: None  # the honest step's own call, taken below instead
        try:
            super().step(optimizer)
        finally:
            optimizer.step = counted
        if self._found_inf:
            type(optimizer).step(optimizer)
        else:
            counted()
