"""Trusted helper: find tensors by value in the bytes a phase left on disk, without loading any file.

The files are the student's bytes: unpickling them (``torch.load`` without ``weights_only``,
``pickle``) would run their code here, outside the sandbox. They are never parsed at all.
``torch.save``, ``torch.distributed.checkpoint``, NumPy and safetensors all store a float64
tensor as one contiguous run of its little-endian values, so a tensor is found by reading each
file as float64 at each of the eight byte offsets and looking for a run of values equal to the
tensor's, within a tolerance (a sharded computation rounds differently from one process).
Shared by the labs that judge files by content (crash-resume, checkpoint-resharding); never mounted in a sandbox.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TypeVar

import torch

MAX_CANDIDATES = 256  # places one anchor value may match in one view of a file before the search gives up there


def _anchor(flat: torch.Tensor) -> int:
    """The index of the tensor's value least likely to repeat in a file: the largest in magnitude."""
    return int(torch.argmax(flat.abs()))


K = TypeVar("K", bound=Hashable)  # whatever a lab names its wanted tensors by


def locate(files: Mapping[str, bytes], wanted: Mapping[K, torch.Tensor], rtol: float, atol: float) -> dict[K, set[str]]:
    """For each wanted tensor (float64, any shape), the names of the files whose bytes hold its values.

    A file holds a tensor when some run of consecutive float64 values in it (at any byte offset)
    equals the flattened tensor within ``(rtol, atol)``. A tensor of zeros alone is never found
    (nothing tells its zeros from any other). One view of a file is sorted at a time, so the
    memory taken is about three times the largest file.
    """
    flats = {key: t.detach().reshape(-1).to(torch.float64) for key, t in wanted.items()}
    keys = [key for key, f in flats.items() if f.numel() and bool(f.abs().max() > 0)]
    anchors = [_anchor(flats[key]) for key in keys]
    values_at = torch.tensor([float(flats[key][j]) for key, j in zip(keys, anchors, strict=True)], dtype=torch.float64)
    tolerance = atol + rtol * values_at.abs()
    found: dict[K, set[str]] = {key: set() for key in wanted}
    for name, data in files.items():
        for offset in range(8):
            count = (len(data) - offset) // 8
            if count <= 0:
                continue
            view = torch.frombuffer(bytearray(data[offset : offset + 8 * count]), dtype=torch.float64)
            values, order = torch.sort(view)  # NaNs last: never a match
            lows = torch.searchsorted(values, values_at - tolerance).tolist()
            highs = torch.searchsorted(values, values_at + tolerance, right=True).tolist()
            for key, j, lo, hi in zip(keys, anchors, lows, highs, strict=True):
                if hi <= lo or name in found[key]:
                    continue
                flat = flats[key]
                n = flat.numel()
                for i in order[lo : min(hi, lo + MAX_CANDIDATES)].tolist():
                    start = i - j
                    if start >= 0 and start + n <= count and torch.allclose(view[start : start + n], flat, rtol, atol):
                        found[key].add(name)
                        break
    return found
