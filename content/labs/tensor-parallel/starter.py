"""Tensor-parallel linear layers: a column-parallel layer followed by a row-parallel one.

The default process group (gloo) is already initialised when this module is
imported: use dist.get_rank() and dist.get_world_size(). Both layers are given
a FULL-SHAPED weight, shape (out_features, in_features) as in torch.nn.Linear, and
bias (or None), in which only this rank's chunk is filled in: the other ranks'
chunks are NaN (no rank ever holds another rank's weights), except the row-parallel
layer's bias, which every rank holds in full. Each keeps only its own part as
torch.nn.Parameter attributes named ``weight`` and ``bias``.

The grader runs ``RowParallelLinear(w2, b2)(gelu(ColumnParallelLinear(w1, b1)(x)))``
on every rank, then calls ``.backward()`` on the output. Inputs have shape
(..., in_features).
"""

import torch
import torch.distributed as dist


class ColumnParallelLinear(torch.nn.Module):
    """y = x W^T + b split by output features: this rank computes its slice of y.

    Keep ``self.weight = weight.chunk(N, dim=0)[rank]`` and
    ``self.bias = bias.chunk(N, dim=0)[rank]`` (or None). ``forward(x)`` takes the
    full input, the same on every rank, and returns this rank's slice of the
    outputs, shape (..., out_features // N). In backward, the gradient of ``x``
    must be the full one on every rank, not only this rank's share.
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None):
        super().__init__()
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class RowParallelLinear(torch.nn.Module):
    """y = x W^T + b split by input features: the ranks' partial products are summed.

    Keep ``self.weight = weight.chunk(N, dim=1)[rank]`` and the full
    ``self.bias = bias`` (or None). ``forward(x)`` takes this rank's slice of the
    features, shape (..., in_features // N), and returns the full output, the same
    on every rank.
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None):
        super().__init__()
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError
