"""Public driver for bf16-vs-fp16: the model, the batches and the loop every rank runs around your code.

Not secret: read it to see exactly what the grader does. Rank 0 trains in float16, rank 1 in
bfloat16: the same tiny transformer (the same initial weights) on the same batches, one format per
rank, side by side. Each step:

    loss, overflowed = trainer.step(x, y)     # yours: autocast forward, backward, step or skip
    record loss, overflowed and trainer.scale()

The model's ``forward(tokens, targets)`` returns the mean cross-entropy: run it under
``torch.autocast("cpu", dtype=...)`` and the Linear layers and matrix products compute in the
16-bit format while the parameters stay float32.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from transformer import Decoder

VOCAB, DIM, HEADS, LAYERS, CONTEXT = 16, 32, 2, 2, 8
LR, MOMENTUM = 0.1, 0.9
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}
FORMAT_OF_RANK = ["float16", "bfloat16"]  # rank 0 trains in float16, rank 1 in bfloat16


class TinyLM(Decoder):
    """2 pre-norm blocks of width 32 (2 heads), a vocabulary of 16, 8 positions: 27k float32 parameters."""

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The mean cross-entropy of predicting ``targets`` (``(B, T)`` token ids) from ``tokens``."""
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def build_model(seed: int) -> TinyLM:
    """The float32 model, its weights drawn from ``seed`` (the same on both ranks and in the reference)."""
    torch.manual_seed(seed)
    return TinyLM(VOCAB, DIM, HEADS, LAYERS, CONTEXT)


def make_optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)


def make_batches(gen: torch.Generator, steps: int, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``steps`` batches of ``batch`` sequences counting up mod ``VOCAB`` by 1 to 3: x, and y = x shifted by one."""
    start = torch.randint(0, VOCAB, (steps, batch, 1), generator=gen)
    stride = torch.randint(1, 4, (steps, batch, 1), generator=gen)
    seq = (start + stride * torch.arange(CONTEXT + 1)) % VOCAB
    return seq[..., :-1].contiguous(), seq[..., 1:].contiguous()


def train(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """This rank's run: its format's training, what each step returned and the scale after it."""
    dtype = DTYPES[inputs["dtype"]]
    model = build_model(int(inputs["seed"]))
    optimizer = make_optimizer(model)
    trainer = submission.MixedPrecisionTrainer(
        model, optimizer, dtype, float(inputs["init_scale"]), int(inputs["growth_interval"]), float(inputs["max_norm"])
    )
    losses: list[float] = []
    overflows: list[bool] = []
    scales: list[float] = []
    for x, y in zip(inputs["x"], inputs["y"], strict=True):
        loss, overflowed = trainer.step(x, y)
        losses.append(float(loss))
        overflows.append(bool(overflowed))
        scales.append(float(trainer.scale()))
    return {
        "losses": torch.tensor(losses, dtype=torch.float64),
        "overflows": torch.tensor(overflows, dtype=torch.bool),
        "scales": torch.tensor(scales, dtype=torch.float64),
    }


def ranges(submission: Any, inputs: dict[str, Any]) -> dict[str, torch.Tensor]:
    """``format_range`` of each (exponent bits, mantissa bits) pair of this rank's, as float64 tensors."""
    found: dict[str, list[float]] = {"max": [], "min_normal": [], "epsilon": []}
    for exponent_bits, mantissa_bits in inputs["formats"]:
        said = submission.format_range(int(exponent_bits), int(mantissa_bits))
        for key, values in found.items():
            values.append(float(said[key]))
    return {key: torch.tensor(values, dtype=torch.float64) for key, values in found.items()}
