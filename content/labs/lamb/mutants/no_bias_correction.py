# Adam's moments without bias correction: m / (sqrt(v) + eps) instead of m_hat / (sqrt(v_hat) + eps)

import torch


class Lamb(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0):
        if lr < 0 or eps < 0 or weight_decay < 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError("lr, eps and weight_decay must be >= 0 and betas in [0, 1)")
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                m, v, g = state["exp_avg"], state["exp_avg_sq"], p.grad
                m.mul_(beta1).add_(g, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                update = m / (v.sqrt() + group["eps"])
                update.add_(p, alpha=group["weight_decay"])  # decoupled: added to the update, not the gradient
                w_norm, u_norm = float(p.norm()), float(update.norm())
                ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0  # zero biases still move
                p.add_(update, alpha=-group["lr"] * ratio)
        return loss
