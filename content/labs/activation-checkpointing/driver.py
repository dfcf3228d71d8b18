"""Public driver for activation-checkpointing: the 12-block transformer and how the grader measures it.

Not secret: read it to see exactly what the grader does. For each segment count ``k`` it
builds the same stack of ``L`` pre-norm transformer blocks (float64, dropout on) from the seed
it is given, seeds the random generator, and runs

    y = checkpointed_forward(blocks, x, k)        # yours
    (y * w).sum().backward()                     # w: fixed random weights

under ``LiveBytes``, a dispatch mode that sees every tensor any operation creates (in the
forward, in a recomputation, in the backward) and follows each storage until it is freed. It
returns the output, every gradient, the bytes still alive when your function returned (what
the forward kept for the backward), the peak of live bytes over forward and backward (the
parameters' ``.grad`` left out: those are the same with or without checkpointing), and the
order in which the blocks ran. What it returns is compared, outside your code, with plain
backpropagation (``reference``) measured the same way.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

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
    """Follows every storage an operation creates until it is freed: live bytes after each operation.

    Storages that existed before (the parameters, the input) are not counted. Each storage is
    counted once, at its whole size, however many views of it there are.
    """

    def __init__(self, ignore: set[int]) -> None:
        super().__init__()
        self.ignore = ignore
        self.live: dict[int, tuple[int, int, int]] = {}  # data_ptr -> (weak ref, bytes, entry)
        self.entries: list[list[int]] = []  # [bytes, born, died] per storage; died -1 while alive
        self.step = 0

    def _reap(self) -> None:
        dead = [p for p, (ref, _, _) in self.live.items() if torch.UntypedStorage._expired(ref)]
        for p in dead:
            ref, _, entry = self.live.pop(p)
            torch.UntypedStorage._free_weak_ref(ref)
            self.entries[entry][2] = self.step

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        self.step += 1
        self._reap()
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                storage = t.untyped_storage()
                p = storage.data_ptr()
                if p in self.live or p in self.ignore or not storage.nbytes():
                    continue
                self.live[p] = (storage._weak_ref(), storage.nbytes(), len(self.entries))
                self.entries.append([storage.nbytes(), self.step, -1])
        return out

    def mark(self) -> int:
        """The step count now (after freeing what is already dead)."""
        self.step += 1
        self._reap()
        return self.step

    def finish(self, exclude: set[int]) -> list[list[int]]:
        """The entries, those still alive at the end whose storage is in ``exclude`` left out."""
        self.mark()
        keep = [e for p, (_, _, e) in self.live.items() if p in exclude]
        for ref, _, _ in self.live.values():
            torch.UntypedStorage._free_weak_ref(ref)
        self.live.clear()
        dropped = set(keep)
        return [entry for i, entry in enumerate(self.entries) if i not in dropped]


def live_at(entries: list[list[int]], step: int) -> int:
    """Bytes alive at ``step``."""
    return sum(n for n, born, died in entries if born <= step and (died < 0 or died > step))


def peak(entries: list[list[int]]) -> int:
    """The largest number of bytes alive at once."""
    events: list[tuple[int, int]] = []
    for n, born, died in entries:
        events.append((born, n))
        if died >= 0:
            events.append((died, -n))
    current = best = 0
    for _, delta in sorted(events, key=lambda e: (e[0], e[1])):  # frees before births at the same step
        current += delta
        best = max(best, current)
    return best


def _storage(t: torch.Tensor | None) -> int | None:
    return None if t is None else t.untyped_storage().data_ptr()


def run(forward: Any, inputs: dict[str, Any], segments: int) -> dict[str, Any]:
    """One measured forward and backward of the stack through ``forward(blocks, x, segments)``."""
    blocks = build_blocks(inputs)
    x, w = make_input(inputs)
    params = dict(blocks.named_parameters())
    ignore = {_storage(p) for p in params.values()} | {_storage(x), _storage(w)}
    CALLS.clear()
    PHASE[0] = "forward"
    torch.manual_seed(int(inputs["seed"]) + 2)  # the dropout masks
    mode = LiveBytes({p for p in ignore if p is not None})
    with mode:
        y = forward(blocks, x, segments)
        if not isinstance(y, torch.Tensor):
            raise TypeError(f"checkpointed_forward returned {type(y).__name__}, not a tensor")
        forward_end = mode.mark()
        PHASE[0] = "backward"
        (y * w).sum().backward()
    PHASE[0] = "forward"
    grads = {"x": x.grad, **{name: p.grad for name, p in params.items()}}
    like = {"x": x, **params}
    entries = mode.finish({s for g in grads.values() if (s := _storage(g)) is not None})
    calls = list(CALLS)
    return {
        "output": y.detach().clone(),
        "grads": {
            name: g.detach().clone() if g is not None else torch.full_like(like[name], math.nan)
            for name, g in grads.items()
        },
        "kept_bytes": live_at(entries, forward_end),
        "peak_bytes": peak(entries),
        "forward_calls": torch.tensor([i for phase, i in calls if phase == "forward"], dtype=torch.int64),
        "recompute_calls": torch.tensor([i for phase, i in calls if phase == "backward"], dtype=torch.int64),
    }


def plain_forward(blocks: torch.nn.ModuleList, x: torch.Tensor, segments: int) -> torch.Tensor:
    """Plain backpropagation: every block in turn, everything kept for the backward."""
    for block in blocks:
        x = block(x)
    return x


def checkpointing(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Your ``checkpointed_forward`` measured with ``inputs["segments"]`` segments."""
    return run(submission.checkpointed_forward, inputs, int(inputs["segments"]))


def reference(inputs: dict[str, Any]) -> dict[str, Any]:
    """Plain backpropagation, measured the same way (what every segment count's values must equal)."""
    return run(plain_forward, inputs, 1)
