# L2 regularisation (weight decay added to the gradient, as Adam does) instead of AdamW's decoupled decay

import math

import torch
import torch.distributed as dist


class ZeroAdamW:
    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        self.params = [p for p in params if p.requires_grad]
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.numel = sum(p.numel() for p in self.params)
        self.shard = math.ceil(self.numel / self.world_size)  # the flat vector is padded to shard * N
        self.start = min(self.rank * self.shard, self.numel)
        self.end = min(self.start + self.shard, self.numel)
        dtype = self.params[0].dtype
        self.exp_avg = torch.zeros(self.end - self.start, dtype=dtype)
        self.exp_avg_sq = torch.zeros(self.end - self.start, dtype=dtype)
        self.t = 0

    @torch.no_grad()
    def step(self) -> None:
        self.t += 1
        beta1, beta2 = self.betas
        flat = torch.zeros(self.shard * self.world_size, dtype=self.exp_avg.dtype)
        flat[: self.numel] = torch.cat([p.reshape(-1) for p in self.params])
        grad = torch.cat([p.grad.reshape(-1) for p in self.params])[self.start : self.end]
        mine = flat[self.start : self.end]
        grad = grad + self.weight_decay * mine  # L2: decay goes through the moments
        self.exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        self.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = (self.exp_avg_sq.sqrt() / math.sqrt(1 - beta2**self.t)).add_(self.eps)
        mine.addcdiv_(self.exp_avg, denom, value=-self.lr / (1 - beta1**self.t))
        # Share the updated slices: every rank receives every other rank's slice.
        slices = list(flat.chunk(self.world_size))
        dist.all_gather(slices, slices[self.rank].clone())
        offset = 0
        for p in self.params:
            p.copy_(flat[offset : offset + p.numel()].view_as(p))
            offset += p.numel()

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None
