"""The fine-tuning task your script runs (public): the model, its pre-trained weights, the corpus, the loss.

Import it in your script (``import task``). Everything here is deterministic: the pre-trained weights
are shipped in ``pretrained.py`` (nothing is downloaded), and the fine-tuning corpus and the held-out
set depend only on ``SEED``, so every rank builds the same dataset and the grader builds it too.
"""

from __future__ import annotations

import math

import pretrained
import torch
import torch.nn.functional as F

VOCAB, DIM, HEADS, LAYERS, CONTEXT = 32, 32, 2, 1, 16
LOCAL_BATCH = 2  # sequences per rank per micro-batch (the DataLoader's batch_size)
ACCUMULATION = 2  # micro-batches per optimizer step
EPOCHS = 2
BASE_LR = 3e-3  # the peak learning rate for ONE rank; scale it linearly with the world size
WARMUP_STEPS = 2  # optimizer steps of linear warmup
MIN_LR_RATIO = 0.1  # the cosine decays to MIN_LR_RATIO x the peak at the last step
BETAS, WEIGHT_DECAY = (0.9, 0.95), 0.01  # torch.optim.AdamW
EVAL_SEQUENCES = 16


class Block(torch.nn.Module):
    """A pre-norm transformer block without biases: causal self-attention, then a GELU MLP (2 x DIM wide)."""

    def __init__(self) -> None:
        super().__init__()
        self.norm1 = torch.nn.LayerNorm(DIM, bias=False)
        self.qkv = torch.nn.Linear(DIM, 3 * DIM, bias=False)
        self.proj = torch.nn.Linear(DIM, DIM, bias=False)
        self.norm2 = torch.nn.LayerNorm(DIM, bias=False)
        self.fc1 = torch.nn.Linear(DIM, 2 * DIM, bias=False)
        self.fc2 = torch.nn.Linear(2 * DIM, DIM, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, HEADS, d // HEADS).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // HEADS)
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        attention = scores.masked_fill(mask, float("-inf")).softmax(-1)
        x = x + self.proj((attention @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class LanguageModel(torch.nn.Module):
    """A decoder-only transformer: ``blocks`` (a ModuleList: shard each with ``fully_shard``), then the root."""

    def __init__(self) -> None:
        super().__init__()
        self.token_embedding = torch.nn.Embedding(VOCAB, DIM)
        self.position_embedding = torch.nn.Embedding(CONTEXT, DIM)
        self.blocks = torch.nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = torch.nn.LayerNorm(DIM, bias=False)
        self.head = torch.nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """The logits ``(B, T, VOCAB)`` of a ``(B, T)`` batch of token ids."""
        x = self.token_embedding(tokens) + self.position_embedding(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def build_model() -> LanguageModel:
    """The model with its pre-trained weights, in float32 (build it on every rank, then shard it)."""
    model = LanguageModel()
    model.load_state_dict(pretrained.state_dict())
    return model


def loss_fn(model: torch.nn.Module, batch: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy of a ``(B, CONTEXT + 1)`` batch of sequences, computed in float32."""
    logits = model(batch[:, :-1])
    return F.cross_entropy(logits.float().reshape(-1, VOCAB), batch[:, 1:].reshape(-1))


def _chain(seed: int) -> torch.Tensor:
    """The transition matrix of the fine-tuning corpus: the pre-training chain's, re-weighted from ``seed``."""
    base = pretrained.chain()
    gen = torch.Generator().manual_seed(seed)
    shift = torch.randn(VOCAB, VOCAB, generator=gen, dtype=torch.float64) * 1.5
    return torch.softmax(base.log() + shift, dim=-1)


def _sample(chain: torch.Tensor, count: int, gen: torch.Generator) -> torch.Tensor:
    rows = torch.empty(count, CONTEXT + 1, dtype=torch.long)
    rows[:, 0] = torch.randint(0, VOCAB, (count,), generator=gen)
    for t in range(1, CONTEXT + 1):
        rows[:, t] = torch.multinomial(chain[rows[:, t - 1]], 1, generator=gen).squeeze(1)
    return rows


def corpus(seed: int, size: int) -> torch.Tensor:
    """The fine-tuning set: ``size`` sequences of ``CONTEXT + 1`` token ids (wrap it in a ``TensorDataset``)."""
    return _sample(_chain(seed), size, torch.Generator().manual_seed(seed + 1))


def held_out(seed: int) -> torch.Tensor:
    """``EVAL_SEQUENCES`` sequences from the same distribution, never trained on: the perplexity's."""
    return _sample(_chain(seed), EVAL_SEQUENCES, torch.Generator().manual_seed(seed + 2))
