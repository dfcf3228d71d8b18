# shards by whole parameters, round-robin: parameter i lives on rank i % N, so one rank holds most of the state
import math

import torch
import torch.distributed as dist


class ZeroAdamW:
    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        self.params = list(params)
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.owner = [i % self.world_size for i in range(len(self.params))]
        self.state = {
            i: (torch.zeros_like(p), torch.zeros_like(p))
            for i, p in enumerate(self.params)
            if self.owner[i] == self.rank
        }
        self.t = 0

    @torch.no_grad()
    def step(self) -> None:
        self.t += 1
        beta1, beta2 = self.betas
        for i, p in enumerate(self.params):
            if self.owner[i] == self.rank:
                m, v = self.state[i]
                p.mul_(1 - self.lr * self.weight_decay)
                m.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                denom = (v.sqrt() / math.sqrt(1 - beta2**self.t)).add_(self.eps)
                p.addcdiv_(m, denom, value=-self.lr / (1 - beta1**self.t))
            dist.broadcast(p, src=self.owner[i])

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None
