# RowParallelLinear sums with torch.distributed.nn.functional.all_reduce, whose backward all-reduces
# the output gradient again: every gradient before it is N times too large, and backward sends one more all-reduce

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_nn
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


class ColumnParallelLinear(torch.nn.Module):
    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None):
        super().__init__()
        rank, size = dist.get_rank(), dist.get_world_size()
        self.weight = torch.nn.Parameter(weight.chunk(size, dim=0)[rank].clone())
        self.bias = None if bias is None else torch.nn.Parameter(bias.chunk(size, dim=0)[rank].clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(_CopyToRanks.apply(x), self.weight, self.bias)


class RowParallelLinear(torch.nn.Module):
    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None):
        super().__init__()
        rank, size = dist.get_rank(), dist.get_world_size()
        self.weight = torch.nn.Parameter(weight.chunk(size, dim=1)[rank].clone())
        self.bias = None if bias is None else torch.nn.Parameter(bias.clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = dist_nn.all_reduce(F.linear(x, self.weight))
        return out if self.bias is None else out + self.bias
