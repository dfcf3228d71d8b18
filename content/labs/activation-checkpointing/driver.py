"""Public driver for activation-checkpointing: the 12-block transformer and how the grader runs it.

Not secret: read it to see exactly what the grader does. For each case it builds a stack of ``L``
pre-norm transformer blocks (float64, dropout on) from the seed it is given, seeds the random
generator, and runs ``y = checkpointed_forward(blocks, x, k)`` (yours), then ``(y * w).sum().backward()``
(``w``: fixed random weights). The output and gradients it returns are compared, outside your code,
with plain backpropagation (``reference``); the order in which the blocks ran is returned too.

The memory cases run alone, each in its own process, on a larger stack: the kernel counts the
memory that process holds (its control group's high-water, read outside your code). Their bound
comes from ``LiveBytes``, which follows every tensor an operation creates until it is freed, run by
the grader on plain backpropagation and on a reference checkpointing of each ``k``. See your own
peak of live bytes with ``run(checkpointed_forward, inputs, k)["peak_bytes"]``.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import torch
import torch.nn.functional as F
from heap import release_freed_buffers
from torch.utils._python_dispatch import TorchDispatchMode

# Every block call appends (phase, block index): "forward" while your function runs,
# "backward" during loss.backward() (a recomputation).
CALLS: list[tuple[str, int]] = []
PHASE = ["forward"]


class Block(torch.nn.Module):
    """A pre-norm transformer block: causal multi-head self-attention, then a GELU MLP, with dropout."""

    def __init__(self, index: int, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.index, self.heads, self.dropout = index, heads, dropout
        kw: dict[str, Any] = {"dtype": torch.float64}
        self.norm1 = torch.nn.LayerNorm(dim, **kw)
        self.qkv = torch.nn.Linear(dim, 3 * dim, **kw)
        self.proj = torch.nn.Linear(dim, dim, **kw)
        self.norm2 = torch.nn.LayerNorm(dim, **kw)
        self.fc1 = torch.nn.Linear(dim, 4 * dim, **kw)
        self.fc2 = torch.nn.Linear(4 * dim, dim, **kw)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        CALLS.append((PHASE[0], self.index))
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        attention = F.dropout(scores.masked_fill(mask, float("-inf")).softmax(-1), self.dropout, self.training)
        x = x + self.proj((attention @ v).transpose(1, 2).reshape(b, t, d))
        return x + F.dropout(self.fc2(F.gelu(self.fc1(self.norm2(x)))), self.dropout, self.training)


def build_blocks(inputs: dict[str, Any]) -> torch.nn.ModuleList:
    """``inputs["layers"]`` float64 blocks in training mode (dropout on), parameters drawn from the seed."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(inputs["seed"]))
        blocks = torch.nn.ModuleList(
            Block(i, int(inputs["dim"]), int(inputs["heads"]), float(inputs["dropout"]))
            for i in range(int(inputs["layers"]))
        )
    return blocks.train()


def make_input(inputs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """The stack's input ``x`` (a leaf that requires grad) and the loss weights ``w``, from the seed."""
    gen = torch.Generator().manual_seed(int(inputs["seed"]) + 1)
    shape = (int(inputs["batch"]), int(inputs["tokens"]), int(inputs["dim"]))
    x = torch.randn(shape, generator=gen, dtype=torch.float64).requires_grad_()
    w = torch.randn(shape, generator=gen, dtype=torch.float64)
    return x, w


class LiveBytes(TorchDispatchMode):
    """Follows every storage an operation creates until it is freed; keeps the peak of live bytes.

    Storages that existed before (the parameters, their ``.grad``, the input) are not counted.
    Each storage is counted once, at its whole size, however many views of it there are. Frees
    are looked for only when a new storage could raise the peak (the peak can only rise when a
    storage is created), which gives the exact peak at a fraction of the cost.
    """

    def __init__(self, ignore: set[int]) -> None:
        super().__init__()
        self.ignore = ignore
        self.live: dict[int, tuple[Any, int]] = {}  # data_ptr -> (weak ref, bytes)
        self.current = 0  # bytes of the storages in self.live (some may have been freed since)
        self.peak = 0

    def _reap(self) -> None:
        dead = [p for p, (ref, _) in self.live.items() if torch.UntypedStorage._expired(ref)]
        for p in dead:
            ref, n = self.live.pop(p)
            torch.UntypedStorage._free_weak_ref(ref)
            self.current -= n

    def _add(self, t: torch.Tensor) -> None:
        storage = t.untyped_storage()
        p, n = storage.data_ptr(), storage.nbytes()
        if p in self.ignore or not n:
            return
        if p in self.live:
            if not torch.UntypedStorage._expired(self.live[p][0]):
                return  # a view of a storage already counted
            self._reap()  # that storage was freed and its memory reused
        if self.current + n > self.peak:
            self._reap()
        self.live[p] = (storage._weak_ref(), n)
        self.current += n
        self.peak = max(self.peak, self.current)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor):
            self._add(out)
        elif isinstance(out, tuple | list):
            for t in out:
                if isinstance(t, torch.Tensor):
                    self._add(t)
        return out

    def now(self) -> int:
        """Bytes alive now."""
        self._reap()
        return self.current

    def close(self) -> None:
        for ref, _ in self.live.values():
            torch.UntypedStorage._free_weak_ref(ref)
        self.live.clear()


def run(forward: Any, inputs: dict[str, Any], segments: int, measure: bool = True) -> dict[str, Any]:
    """One forward and backward of the stack through ``forward(blocks, x, segments)``, measured unless told not to."""
    blocks = build_blocks(inputs)
    x, w = make_input(inputs)
    named = {"x": x, **dict(blocks.named_parameters())}
    for t in named.values():  # gradients accumulate into storages that exist before the measurement
        t.grad = torch.zeros_like(t)
    grads = [t.grad for t in named.values() if t.grad is not None]  # every one, just made
    ignore = {t.untyped_storage().data_ptr() for t in [w, *named.values(), *grads]}
    CALLS.clear()
    PHASE[0] = "forward"
    torch.manual_seed(int(inputs["seed"]) + 2)  # the dropout masks
    mode = LiveBytes(ignore)
    try:
        with mode if measure else contextlib.nullcontext():
            y = forward(blocks, x, segments)
            if not isinstance(y, torch.Tensor):
                raise TypeError(f"checkpointed_forward returned {type(y).__name__}, not a tensor")
            kept = mode.now()
            PHASE[0] = "backward"
            (y * w).sum().backward()
    finally:
        PHASE[0] = "forward"
        mode.close()
    calls = list(CALLS)
    return {
        "output": y.detach().clone(),
        "grads": {name: t.grad.detach().clone() for name, t in named.items()},  # type: ignore[union-attr]
        "kept_bytes": kept,
        "peak_bytes": mode.peak,
        "forward_calls": torch.tensor([i for phase, i in calls if phase == "forward"], dtype=torch.int64),
        "recompute_calls": torch.tensor([i for phase, i in calls if phase == "backward"], dtype=torch.int64),
    }


def plain_forward(blocks: torch.nn.ModuleList, x: torch.Tensor, segments: int) -> torch.Tensor:
    """Plain backpropagation: every block in turn, everything kept for the backward."""
    for block in blocks:
        x = block(x)
    return x


def checkpointing(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Your ``checkpointed_forward`` with ``inputs["segments"]`` segments.

    In a memory case (``inputs["memory"]``), malloc first returns freed buffers to the kernel at once.
    """
    if inputs.get("memory"):
        release_freed_buffers()
    tree = run(submission.checkpointed_forward, inputs, int(inputs["segments"]), measure=False)
    return {k: v for k, v in tree.items() if k not in ("kept_bytes", "peak_bytes")}


def reference(inputs: dict[str, Any], measure: bool = False) -> dict[str, Any]:
    """Plain backpropagation (what every segment count's values must equal); ``measure``: its bytes too."""
    return run(plain_forward, inputs, 1, measure)
