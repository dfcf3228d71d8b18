"""The pre-norm transformer block that the memory labs' models are made of.

Public, as a lab's driver is: it runs in every rank beside your code. The layers are created in
the order the parameters are drawn (after ``torch.manual_seed``): ``norm1, qkv, proj, norm2,
mlp.fc1, mlp.fc2``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


class MLP(torch.nn.Module):
    """``Linear, GELU, Linear``."""

    def __init__(self, dim: int, hidden: int, out: int) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(dim, hidden)
        self.fc2 = torch.nn.Linear(hidden, out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class Block(torch.nn.Module):
    """A pre-norm transformer block: causal multi-head self-attention, then a GELU MLP (``4 * dim`` wide)."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.norm2 = torch.nn.LayerNorm(dim)
        self.mlp = MLP(dim, 4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        attention = scores.masked_fill(mask, float("-inf")).softmax(-1)
        x = x + self.proj((attention @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


class Decoder(torch.nn.Module):
    """A small decoder-only transformer's layers, made in this order: token and position embeddings,
    ``layers`` blocks, a final LayerNorm and a language-model head (no bias). A lab's model adds its ``forward``."""

    def __init__(self, vocab: int, dim: int, heads: int, layers: int, context: int) -> None:
        super().__init__()
        self.token_embedding = torch.nn.Embedding(vocab, dim)
        self.position_embedding = torch.nn.Embedding(context, dim)
        self.blocks = torch.nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, vocab, bias=False)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """Token plus position embeddings of a ``(B, T)`` batch of token ids."""
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        return self.token_embedding(tokens) + self.position_embedding(positions)
