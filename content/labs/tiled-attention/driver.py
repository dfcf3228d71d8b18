"""Public driver for tiled-attention: the inputs, and how the grader measures your call.

Not secret: read it to see exactly what the grader does. For each case it draws ``q``, ``k``
and ``v`` of shape (batch, heads, N, d) in float64 from the seed it is given (multiplied by
``inputs["scale"]``: 20 makes scores of several hundred, whose exp overflows), and calls

    out, lse = tiled_attention(q, k, v, tile_size)       # yours

under ``LiveBytes``, a dispatch mode that sees every tensor an operation creates and follows
each storage until it is freed, keeping the peak of live bytes during your call (the inputs
are not counted). What it returns is compared, outside your code, with
``softmax(q k^T / sqrt(d)) v`` and ``logsumexp(q k^T / sqrt(d))`` computed in full.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class LiveBytes(TorchDispatchMode):
    """Follows every storage an operation creates until it is freed; keeps the peak of live bytes.

    Storages that existed before (the inputs) are not counted. Each storage is counted once, at
    its whole size, however many views of it there are. Frees are looked for only when a new
    storage could raise the peak (the peak only rises when a storage is created).
    """

    def __init__(self, ignore: set[int]) -> None:
        super().__init__()
        self.ignore = ignore
        self.live: dict[int, tuple[int, int]] = {}  # data_ptr -> (weak ref, bytes)
        self.current = 0  # bytes of the storages in self.live (some may have been freed since)
        self.peak = 0
        self.largest = 0

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
        self.largest = max(self.largest, n)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor):
            self._add(out)
        elif isinstance(out, tuple | list):
            for t in out:
                if isinstance(t, torch.Tensor):
                    self._add(t)
        return out

    def close(self) -> None:
        for ref, _ in self.live.values():
            torch.UntypedStorage._free_weak_ref(ref)
        self.live.clear()


def make_qkv(inputs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``q, k, v`` of shape (batch, heads, n, d), float64, drawn from the seed; q and k times the scale."""
    gen = torch.Generator().manual_seed(int(inputs["seed"]))
    shape = (int(inputs["batch"]), int(inputs["heads"]), int(inputs["n"]), int(inputs["d"]))
    q, k, v = (torch.randn(shape, generator=gen, dtype=torch.float64) for _ in range(3))
    scale = float(inputs["scale"])
    return q * scale, k * scale, v


def reference(inputs: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Attention computed in full: ``softmax(q k^T / sqrt(d)) v`` and each query's logsumexp."""
    q, k, v = make_qkv(inputs)
    scores = q @ (k.transpose(-2, -1) / q.shape[-1] ** 0.5)
    lse = torch.logsumexp(scores, dim=-1)
    return {"out": torch.exp(scores.sub_(lse[..., None])) @ v, "lse": lse}


def attention(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Your ``tiled_attention`` on this case's inputs, measured."""
    q, k, v = make_qkv(inputs)
    mode = LiveBytes({t.untyped_storage().data_ptr() for t in (q, k, v)})
    try:
        with mode:
            got = submission.tiled_attention(q, k, v, int(inputs["tile_size"]))
    finally:
        mode.close()
    if not isinstance(got, tuple | list) or len(got) != 2:
        raise TypeError(f"tiled_attention returned {type(got).__name__}, not a tuple (out, lse)")
    out, lse = got
    return {
        "out": out.detach().clone() if isinstance(out, torch.Tensor) else out,
        "lse": lse.detach().clone() if isinstance(lse, torch.Tensor) else lse,
        "peak_bytes": mode.peak,
        "largest_bytes": mode.largest,
    }
