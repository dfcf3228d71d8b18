# ColumnParallelLinear splits the input features (dim=1) instead of the output features: shapes do not match

import torch
import torch.distributed as dist
import torch.nn.functional as F


class _CopyToRanks(torch.autograd.Function):
    """Identity forward; all-reduce of the gradient backward (every rank used the same input)."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad)
        return grad


class _SumOverRanks(torch.autograd.Function):
    """All-reduce forward; identity backward (each rank's partial sum reaches the output once)."""

    @staticmethod
    def forward(ctx, x):
        out = x.contiguous().clone()
        dist.all_reduce(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad


class ColumnParallelLinear(torch.nn.Module):
    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None):
        super().__init__()
        rank, size = dist.get_rank(), dist.get_world_size()
        self.weight = torch.nn.Parameter(weight.chunk(size, dim=1)[rank].clone())
        self.bias = None if bias is None else torch.nn.Parameter(bias.chunk(size, dim=0)[rank].clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.chunk(dist.get_world_size(), dim=-1)[dist.get_rank()]
        return F.linear(_CopyToRanks.apply(x), self.weight, self.bias)


class RowParallelLinear(torch.nn.Module):
    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None):
        super().__init__()
        rank, size = dist.get_rank(), dist.get_world_size()
        self.weight = torch.nn.Parameter(weight.chunk(size, dim=1)[rank].clone())
        self.bias = None if bias is None else torch.nn.Parameter(bias.clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = _SumOverRanks.apply(F.linear(x, self.weight))
        return out if self.bias is None else out + self.bias
