"""The residual network the FSDP labs train: every Linear ``width x width`` (with a bias), all the same size.

Net(embed: Linear, blocks: ModuleList of Block (x + down(tanh(up(x)))), norm: LayerNorm, head: Linear)
"""

from __future__ import annotations

import torch
from torch import nn


class Block(nn.Module):
    """A residual block: ``x + down(tanh(up(x)))``."""

    def __init__(self, width: int, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.up = nn.Linear(width, width, dtype=dtype)
        self.down = nn.Linear(width, width, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.tanh(self.up(x)))


class Net(nn.Module):
    """``embed`` (Linear), ``blocks`` (a ModuleList of Block), ``norm`` (LayerNorm), ``head`` (Linear)."""

    def __init__(self, width: int, blocks: int, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.embed = nn.Linear(width, width, dtype=dtype)
        self.blocks = nn.ModuleList([Block(width, dtype) for _ in range(blocks)])
        self.norm = nn.LayerNorm(width, dtype=dtype)
        self.head = nn.Linear(width, width, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))
