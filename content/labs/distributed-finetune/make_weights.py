"""Make ``pretrained.py``: the "pre-trained" weights the lab fine-tunes, from a seeded run on a synthetic corpus.

Run from this folder (``python make_weights.py``); the result is committed, so no grading ever runs this.
The pre-training corpus is a Markov chain over ``task.VOCAB`` tokens drawn from ``CHAIN_SEED``: each token
has a few likely successors. The model trains on it for ``STEPS`` AdamW steps in float32, one thread, and
its weights are stored rounded to bfloat16 (as released checkpoints often are), base64-encoded.
"""

from __future__ import annotations

import base64
import io
import sys
import textwrap
from pathlib import Path

import torch

CHAIN_SEED, TRAIN_SEED, STEPS, BATCH = 20240, 7, 400, 32

HEADER = '''"""The pre-trained weights of ``task.LanguageModel`` and the chain of its pre-training corpus (generated).

Written by ``make_weights.py`` (a seeded pre-training run on a synthetic corpus, {steps} AdamW steps); do not
edit. ``state_dict()`` decodes the weights (bfloat16 values, returned as float32); ``chain()`` is the
transition matrix of the pre-training corpus, from which the fine-tuning corpus is derived.
"""

from __future__ import annotations

import base64
import io

import torch

CHAIN_SEED = {seed}
VOCAB = {vocab}


def chain() -> torch.Tensor:
    """The pre-training corpus's transition matrix (float64, rows sum to 1): a few likely successors per token."""
    gen = torch.Generator().manual_seed(CHAIN_SEED)
    logits = torch.randn(VOCAB, VOCAB, generator=gen, dtype=torch.float64) * 3.0
    return torch.softmax(logits, dim=-1)


def state_dict() -> dict[str, torch.Tensor]:
    """The pre-trained weights, float32 tensors holding bfloat16 values."""
    raw = torch.load(io.BytesIO(base64.b64decode(_WEIGHTS)), weights_only=True)
    return {{name: t.float() for name, t in raw.items()}}


_WEIGHTS = """
{data}
"""
'''


def write(data: str) -> None:
    text = HEADER.format(steps=STEPS, seed=CHAIN_SEED, vocab=32, data=data)
    Path(__file__).with_name("pretrained.py").write_text(text)


def main() -> None:
    torch.set_num_threads(1)
    here = Path(__file__).parent
    sys.path.insert(0, str(here))
    if not (here / "pretrained.py").exists():
        write("")
    import pretrained
    import task

    torch.manual_seed(TRAIN_SEED)
    model = task.LanguageModel()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=task.WEIGHT_DECAY)
    gen = torch.Generator().manual_seed(TRAIN_SEED)
    chain = pretrained.chain()
    for step in range(STEPS):
        batch = task._sample(chain, BATCH, gen)
        loss = task.loss_fn(model, batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 100 == 0 or step == STEPS - 1:
            print(f"step {step} loss {loss.item():.4f}")
    buffer = io.BytesIO()
    torch.save({k: v.detach().to(torch.bfloat16).clone() for k, v in model.state_dict().items()}, buffer)
    write("\n".join(textwrap.wrap(base64.b64encode(buffer.getvalue()).decode(), 116)))


if __name__ == "__main__":
    main()
