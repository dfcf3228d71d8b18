"""Tensor-parallel multi-head self-attention: each rank computes h/N whole heads.

The default process group (gloo) is already initialised when this module is
imported: use dist.get_rank() and dist.get_world_size(). The layer is given
FULL-SHAPED weights of one attention layer, in the layout of
torch.nn.MultiheadAttention, in which only this rank's heads are filled in: the
other ranks' rows of w_qkv and b_qkv and columns of w_out are NaN (no rank ever
holds another rank's heads); b_out is given in full on every rank:

    w_qkv (3d, d): W_Q, W_K, W_V stacked in that order; head i owns rows
                   i*d_h .. (i+1)*d_h - 1 of each block (d_h = d // num_heads)
    b_qkv (3d,) or None
    w_out (d, d), b_out (d,) or None

Rank r computes heads r*h/N .. (r+1)*h/N - 1 and keeps only these parameters:

    self.qkv_weight  (3d/N, d)  w_qkv.view(3, d, d)[:, r*d//N:(r+1)*d//N].reshape(-1, d)
    self.qkv_bias    (3d/N,)    the same entries of b_qkv (or None)
    self.out_weight  (d, d/N)   w_out[:, r*d//N:(r+1)*d//N]
    self.out_bias    (d,)       the full b_out (or None)

The grader runs ``y = ParallelSelfAttention(w_qkv, b_qkv, w_out, b_out, h)(x)`` on
every rank with the whole x, shape (B, s, d), then calls ``.backward()`` on a loss of y.
"""

import torch
import torch.distributed as dist


class ParallelSelfAttention(torch.nn.Module):
    """Self-attention with this rank's heads: column-parallel QKV, row-parallel output projection.

    ``forward(x)`` returns the whole output (B, s, d), the same on every rank: one
    all-reduce forward (the partial outputs), one backward (the gradient of x).
    """

    def __init__(self, w_qkv, b_qkv, w_out, b_out, num_heads: int):
        super().__init__()
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError
