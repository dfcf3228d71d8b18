# sums the partial outputs with torch.distributed.nn.functional.all_reduce, whose backward all-reduces
# the output gradient again: every gradient before it is N times too large, and backward sends one more all-reduce

import math

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_nn
import torch.nn.functional as F


class _CopyToRanks(torch.autograd.Function):
    """f: identity forward; all-reduce of the gradient backward (every rank used the same input)."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad)
        return grad


class _SumOverRanks(torch.autograd.Function):
    """g: all-reduce forward; identity backward (each rank's partial sum reaches the output once)."""

    @staticmethod
    def forward(ctx, x):
        out = x.contiguous().clone()
        dist.all_reduce(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad


class ParallelSelfAttention(torch.nn.Module):
    def __init__(self, w_qkv, b_qkv, w_out, b_out, num_heads):
        super().__init__()
        rank, size = dist.get_rank(), dist.get_world_size()
        d = w_out.shape[0]
        self.local_heads = num_heads // size
        self.head_dim = d // num_heads
        local = slice(rank * d // size, (rank + 1) * d // size)  # this rank's heads' features
        self.qkv_weight = torch.nn.Parameter(w_qkv.view(3, d, d)[:, local].reshape(-1, d).clone())
        self.qkv_bias = None if b_qkv is None else torch.nn.Parameter(b_qkv.view(3, d)[:, local].reshape(-1).clone())
        self.out_weight = torch.nn.Parameter(w_out[:, local].clone())
        self.out_bias = None if b_out is None else torch.nn.Parameter(b_out.clone())

    def forward(self, x):
        batch, seq, _ = x.shape
        qkv = F.linear(_CopyToRanks.apply(x), self.qkv_weight, self.qkv_bias)
        q, k, v = (t.reshape(batch, seq, self.local_heads, self.head_dim).transpose(1, 2) for t in qkv.chunk(3, -1))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, seq, -1)
        y = dist_nn.all_reduce(F.linear(context, self.out_weight))
        return y if self.out_bias is None else y + self.out_bias
