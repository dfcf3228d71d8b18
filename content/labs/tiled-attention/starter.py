"""Tiled attention: softmax(q k^T / sqrt(d)) v one key/value tile at a time, with the online softmax.

Write ``tiled_attention(q, k, v, tile_size) -> (out, lse)``:

    q, k, v    float64 tensors of shape (batch, heads, N, d)
    tile_size  T: the keys and values are processed in tiles of T rows, k[..., j:j + T, :];
               T need not divide N (the last tile is then shorter)

Return ``out`` = softmax(q k^T / sqrt(d)) v, of the shape of q, and ``lse`` of shape
(batch, heads, N): each query's log sum_j exp(s_j), what FlashAttention keeps for the backward pass.
Never build the whole N x N score matrix: keep, per query, the running maximum m, the running sum
l of exp(s - m) and the running output acc, and update them after each tile (the statement has the
equations). Scores can be large (several hundred): exp(s) alone overflows float64.
"""

import math

import torch


def tiled_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, tile_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    n, d = k.shape[-2], q.shape[-1]
    m = torch.full(q.shape[:-1], -math.inf, dtype=q.dtype)  # running max of each query's scores
    ell = torch.zeros(q.shape[:-1], dtype=q.dtype)  # running sum of exp(s - m) (the exercise's l)
    acc = torch.zeros_like(q)  # running sum of exp(s - m) v
    for start in range(0, n, tile_size):
        s = q @ k[..., start : start + tile_size, :].transpose(-2, -1) / math.sqrt(d)
        # TODO: the online softmax update for this tile: the new maximum, the correction factor
        # exp(m - m_new) for what was summed so far, then ell, acc and m.
        raise NotImplementedError(f"update m, ell and acc with this tile's scores, shape {tuple(s.shape)}")
    return acc / ell[..., None], m + torch.log(ell)
