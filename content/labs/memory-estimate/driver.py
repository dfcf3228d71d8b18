"""Public driver for memory-estimate: the two models, the figures, and how the grader calls you.

Not secret: read it to see exactly what the grader does. For each model the driver builds
it from the configuration it is given and calls your ``estimate_memory_consumption`` twice
(``checkpointing=False``, then ``True``), each time on a fresh copy. Your figures are compared,
outside your code, with the figures the grader computes there on its own copy of the model
(never with anything measured in your process):

- ``parameters``: the bytes of every parameter (``model.parameters()``);
- ``gradients``: the bytes of the ``.grad`` one backward pass leaves in every trainable parameter;
- ``optimizer_state``: the bytes of ``exp_avg`` and ``exp_avg_sq``, one of each per trainable
  parameter and of its size, as a real ``torch.optim.AdamW`` keeps after one ``step()`` (its
  4-byte ``step`` counters are left out);
- ``activations``: the bytes that autograd saves for backward during one forward pass
  ``model(batch)``, counted with ``torch.autograd.graph.saved_tensors_hooks``
  (``activation_bytes``): every distinct storage once, its whole size, parameters excluded
  (they are counted above).

``measure(config, checkpointing)`` makes those figures with a real backward pass and a real
AdamW step: run it yourself to check your function.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from transformer import MLP, Decoder

KEYS = ("parameters", "gradients", "optimizer_state", "activations", "total")


class TwoTowerModel(torch.nn.Module):
    """A recommender's two towers: user and item embeddings, each through its own MLP, scored by a dot product.

    ``batch`` is a ``LongTensor`` of shape ``(B, 2)``: column 0 the user ids, column 1 the item ids.
    With ``self.checkpointing`` each tower's MLP runs under ``torch.utils.checkpoint``.
    """

    def __init__(self, users: int, items: int, dim: int, hidden: int) -> None:
        super().__init__()
        self.user_embedding = torch.nn.Embedding(users, dim)
        self.item_embedding = torch.nn.Embedding(items, dim)
        self.user_tower = MLP(dim, hidden, dim)
        self.item_tower = MLP(dim, hidden, dim)
        self.checkpointing = False

    def _tower(self, tower: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        if self.checkpointing:
            return checkpoint(tower, x, use_reentrant=False)
        return tower(x)

    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        users = self._tower(self.user_tower, self.user_embedding(batch[:, 0]))
        items = self._tower(self.item_tower, self.item_embedding(batch[:, 1]))
        return (F.normalize(users, dim=-1) * F.normalize(items, dim=-1)).sum(-1)


class CheckpointedTransformer(Decoder):
    """A small decoder-only transformer; with ``self.checkpointing`` every block runs under ``torch.utils.checkpoint``.

    ``batch`` is a ``LongTensor`` of token ids of shape ``(B, T)``; the output is the logits ``(B, T, vocab)``.
    """

    def __init__(self, vocab: int, dim: int, heads: int, layers: int, context: int) -> None:
        super().__init__(vocab, dim, heads, layers, context)
        self.checkpointing = False

    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        x = self.embed(batch)
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.checkpointing else block(x)
        return self.head(self.norm(x))


def build_model(config: dict[str, Any]) -> TwoTowerModel | CheckpointedTransformer:
    """The float32 model described by ``config``, its parameters drawn from ``config["seed"]``."""
    with torch.random.fork_rng(devices=[]):  # leaves the caller's random state alone
        torch.manual_seed(int(config["seed"]))
        if config["model"] == "TwoTowerModel":
            return TwoTowerModel(*(int(config[k]) for k in ("users", "items", "dim", "hidden")))
        return CheckpointedTransformer(*(int(config[k]) for k in ("vocab", "dim", "heads", "layers", "context")))


def make_batch(config: dict[str, Any]) -> torch.Tensor:
    """The sample batch for ``config``'s model: ids drawn from ``config["seed"] + 1``."""
    gen = torch.Generator().manual_seed(int(config["seed"]) + 1)
    b = int(config["batch"])
    if config["model"] == "TwoTowerModel":
        users = torch.randint(0, int(config["users"]), (b, 1), generator=gen)
        items = torch.randint(0, int(config["items"]), (b, 1), generator=gen)
        return torch.cat([users, items], dim=1)
    return torch.randint(0, int(config["vocab"]), (b, int(config["tokens"])), generator=gen)


def loss_fn(output: torch.Tensor) -> torch.Tensor:
    """A scalar to call ``backward()`` on (its value does not matter here, only the gradients' sizes)."""
    return output.float().pow(2).mean()


def activation_bytes(model: torch.nn.Module, batch: torch.Tensor) -> tuple[int, int]:
    """``(bytes, tensors)`` that autograd saves for backward during ``model(batch)``.

    Every distinct storage is counted once, at its whole size (a view keeps all of it alive);
    storages of the model's parameters are left out.
    """
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in params and storage.nbytes():
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(batch)
    return sum(saved.values()), len(saved)


def measure(config: dict[str, Any], checkpointing: bool) -> dict[str, int]:
    """What the figures are, measured on a fresh model (see the module's docstring)."""
    model = build_model(config)
    batch = make_batch(config)
    model.checkpointing = checkpointing
    activations, tensors = activation_bytes(model, batch)
    parameters = sum(p.nbytes for p in model.parameters())
    loss_fn(model(batch)).backward()
    gradients = sum(p.grad.nbytes for p in model.parameters() if p.grad is not None)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    optimizer.step()
    state = sum(t.nbytes for s in optimizer.state.values() for k, t in s.items() if k in ("exp_avg", "exp_avg_sq"))
    figures = {"parameters": parameters, "gradients": gradients, "optimizer_state": state, "activations": activations}
    return {**figures, "total": sum(figures.values()), "saved_tensors": tensors}


def _number(value: Any) -> float | str:
    """A figure as a float, or why it is not one."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # numpy numbers too
        return f"not a number ({type(value).__name__})"
    if not math.isfinite(float(value)):
        return f"not finite ({value})"
    return float(value)


def _figures(estimate: Any) -> dict[str, Any]:
    if not isinstance(estimate, dict):
        return {"error": f"returned {type(estimate).__name__}, not a dict"}
    figures: dict[str, Any] = {key: _number(estimate[key]) for key in KEYS if key in estimate}
    missing = [key for key in KEYS if key not in estimate]
    if missing:
        figures["error"] = (
            f"the dict has no key {', '.join(map(repr, missing))} (its keys: {sorted(map(str, estimate))})"
        )
    return figures


def estimate(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Calls the student's function with and without checkpointing, each on a fresh model; returns both."""
    config = dict(inputs)
    return {
        "estimate": {
            name: _figures(submission.estimate_memory_consumption(build_model(config), make_batch(config), flag))
            for name, flag in (("plain", False), ("checkpointed", True))
        }
    }
