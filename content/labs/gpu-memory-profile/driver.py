"""Public driver for gpu-memory-profile: the transformer, the warm-up, how the grader measures.

Not secret: read it to see exactly what the grader does. For each case ``profile`` warms the
GPU up (a small model's forward, backward and AdamW step, so that cuBLAS has its workspace
before anything is measured), makes the batch on the GPU, and calls your
``profile_memory(make_model, tokens, targets)``, where ``make_model()`` builds a fresh float32
transformer on the CPU (with ``frozen``, its embeddings do not train). It then calls
``chapter_formula(num_params, num_trainable)`` with the model's counts. Your figures are compared
with the grader's own measurement (``measure``, on a fresh copy of the model), made on the
grading worker outside your process: nothing measured in here is taken as the truth.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from transformer import Decoder

FIGURES = ("parameters", "gradients", "optimizer_states", "activations")


class Transformer(Decoder):
    """Token and position embeddings, ``layers`` blocks, a final LayerNorm and a language-model head.

    ``model(tokens, targets)`` returns the mean cross-entropy of predicting ``targets``.
    """

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def build_model(config: dict[str, Any]) -> Transformer:
    """A fresh float32 model on the CPU, from the seed; ``frozen``: the embeddings do not train."""
    torch.manual_seed(int(config["seed"]))
    model = Transformer(config["vocab"], config["dim"], config["heads"], config["layers"], config["context"])
    if config.get("frozen"):
        for p in (*model.token_embedding.parameters(), *model.position_embedding.parameters()):
            p.requires_grad_(False)
    return model


def make_batch(config: dict[str, Any], where: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(int(config["seed"]) + 1)
    shape = (int(config["batch"]), int(config["tokens"]))
    tokens = torch.randint(0, config["vocab"], shape, generator=gen)
    targets = torch.randint(0, config["vocab"], shape, generator=gen)
    return tokens.to(where), targets.to(where)


def device() -> torch.device:
    if not torch.cuda.is_available():
        raise RuntimeError("this lab measures GPU memory: it needs a CUDA GPU")
    return torch.device("cuda", torch.cuda.current_device())


def warm_up(config: dict[str, Any], where: torch.device) -> None:
    """One small step of every kind of kernel, so that no one-off allocation lands inside a measurement."""
    small = {**config, "layers": 1, "batch": 1, "tokens": 8, "frozen": False}
    model = build_model(small).to(where)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(*make_batch(small, where)).backward()
    optimizer.step()
    del model, optimizer
    torch.cuda.synchronize(where)
    torch.cuda.empty_cache()


def measure(make_model: Callable[[], torch.nn.Module], tokens: torch.Tensor, targets: torch.Tensor) -> dict[str, int]:
    """The grader's own measurement: ``torch.cuda.memory_allocated`` before and after each stage."""
    where = tokens.device
    torch.cuda.synchronize(where)
    start = torch.cuda.memory_allocated(where)
    model = make_model().to(where)
    after_model = torch.cuda.memory_allocated(where)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss = model(tokens, targets)
    after_forward = torch.cuda.memory_allocated(where)
    loss.backward()
    del loss
    after_backward = torch.cuda.memory_allocated(where)
    optimizer.step()
    torch.cuda.synchronize(where)
    after_step = torch.cuda.memory_allocated(where)
    figures = {
        "parameters": after_model - start,
        "activations": after_forward - after_model,
        "gradients": after_backward - after_model,
        "optimizer_states": after_step - after_backward,
    }
    del model, optimizer
    torch.cuda.empty_cache()
    return figures


def counts(config: dict[str, Any]) -> tuple[int, int]:
    """(P, trainable P) of the model ``config`` builds."""
    model = build_model(config)
    return sum(p.numel() for p in model.parameters()), sum(p.numel() for p in model.parameters() if p.requires_grad)


def profile(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Your figures and your formula, for one model."""
    where = device()
    warm_up(inputs, where)
    tokens, targets = make_batch(inputs, where)
    got = submission.profile_memory(lambda: build_model(inputs), tokens, targets)
    if not isinstance(got, dict):
        raise TypeError(f"profile_memory must return a dict, got {type(got).__name__}")
    figures = {k: number(got.get(k)) for k in FIGURES}
    torch.cuda.empty_cache()  # what your function left cached is not the next measurement's
    num_params, num_trainable = counts(inputs)
    formula = submission.chapter_formula(num_params, num_trainable)
    if not isinstance(formula, dict):
        raise TypeError(f"chapter_formula must return a dict, got {type(formula).__name__}")
    predicted = {k: number(formula.get(k)) for k in FIGURES[:3]}
    return {"figures": figures, "formula": predicted}


def number(value: Any) -> float | str:
    """A figure as a float (ints, floats, numpy and one-element tensors alike); anything else as text."""
    if isinstance(value, bool | str) or value is None:
        return repr(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return repr(value)
