# scales the scores by 1/d instead of 1/sqrt(d)
import math

import torch


def tiled_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, tile_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    q = q / q.shape[-1]
    rows = q.shape[:-1]
    m = torch.full(rows, -math.inf, dtype=q.dtype)  # running max of each query's scores
    ell = torch.zeros(rows, dtype=q.dtype)  # running sum of exp(s - m)
    acc = torch.zeros_like(q)  # running sum of exp(s - m) v
    for start in range(0, k.shape[-2], tile_size):
        s = q @ k[..., start : start + tile_size, :].transpose(-2, -1)
        m_new = torch.maximum(m, s.amax(-1))
        correction = torch.exp(m - m_new)  # rescales what was summed under the old max
        p = torch.exp(s - m_new[..., None])
        ell = ell * correction + p.sum(-1)
        acc = acc * correction[..., None] + p @ v[..., start : start + tile_size, :]
        m = m_new
    return acc / ell[..., None], m + torch.log(ell)
