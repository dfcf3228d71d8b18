"""LAMB (layer-wise adaptive moments for batch training), from scratch.

Write ``class Lamb(torch.optim.Optimizer)`` with

    Lamb(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0)
    step(closure=None) -> the closure's loss, or None

For each parameter tensor w with gradient g, at step t = 1, 2, ... (counted per tensor):

    m <- beta1 * m + (1 - beta1) * g          v <- beta2 * v + (1 - beta2) * g * g
    m_hat = m / (1 - beta1**t)                v_hat = v / (1 - beta2**t)
    u = m_hat / (sqrt(v_hat) + eps) + weight_decay * w        (decoupled weight decay)
    r = ||w|| / ||u||   (per tensor; r = 1 when either norm is 0, so zero biases still move)
    w <- w - lr * r * u

The grader's public driver (driver.py; world size 1, float64) calls, for each step,
optimizer.zero_grad(); loss.backward(); optimizer.step(), and for the loss curves
optimizer.step(closure), where closure() zeroes the gradients, computes the loss, calls
backward() and returns the loss.
"""

import torch


class Lamb(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0):
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, defaults)  # sets self.param_groups and self.state (a dict per parameter)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():  # the closure runs backward(): gradients must be on
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]  # this parameter's own state, kept between steps
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                # TODO: with beta1, beta2 = group["betas"], t = state["step"] and g = p.grad:
                #   update exp_avg and exp_avg_sq in place, form u = m_hat / (sqrt(v_hat) + eps)
                #   + weight_decay * p, the trust ratio r of this tensor (1 if a norm is 0), then
                #   p.add_(u, alpha=-group["lr"] * r)
                raise NotImplementedError("Lamb.step: the LAMB update of one parameter tensor")
        return loss
