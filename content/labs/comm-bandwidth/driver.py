"""Public driver for comm-bandwidth: how the grader calls your three functions on each rank.

Not secret: read it to see exactly what runs. ``benchmark`` gives your ``measure`` the interconnect of
``interconnect.py`` (real gloo all-reduces, timed on a virtual clock) and returns your times;
``convert`` and ``analyse`` call ``bandwidths`` and ``fit`` on measurements the grader made up
outside your processes (each rank its own set). What they return is compared, outside your code,
with the reference method replayed on the same model and with the model the measurements came from.
"""

from __future__ import annotations

from typing import Any

import torch
from interconnect import Interconnect, Link

FIT_KEYS = ("alpha", "beta", "busbw", "crossover")


def _floats(values: Any, count: int, what: str) -> torch.Tensor:
    """``values`` (a list, tuple or tensor of ``count`` numbers) as a float64 tensor, or a clear error."""
    if isinstance(values, torch.Tensor):
        values = values.detach().reshape(-1)
    if hasattr(values, "tolist"):  # a tensor or a numpy array
        values = values.tolist()
    if not isinstance(values, list | tuple) or len(values) != count:
        shown = f"{len(values)} values" if isinstance(values, list | tuple) else type(values).__name__
        raise ValueError(f"{what} must return a list of {count} numbers, one per size; it returned {shown}")
    return torch.tensor([float(v) for v in values], dtype=torch.float64)


def benchmark(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Your ``measure(ic, sizes, warmup, reps)`` on the virtual interconnect; the time it reports per size."""
    ic = Interconnect(Link(**inputs["link"]))
    sizes = [int(s) for s in inputs["sizes"]]
    times = submission.measure(ic, sizes, int(inputs["warmup"]), int(inputs["reps"]))
    return {"times": _floats(times, len(sizes), "measure")}


def convert(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Your ``bandwidths(sizes, times, world_size)`` on this rank's made-up measurements."""
    sizes, times = [int(s) for s in inputs["sizes"]], inputs["times"].tolist()
    out = submission.bandwidths(sizes, times, int(inputs["world_size"]))
    if not isinstance(out, list | tuple) or len(out) != 2:
        raise ValueError("bandwidths must return two lists: (algbw, busbw)")
    return {
        "algbw": _floats(out[0], len(sizes), "bandwidths (algbw)"),
        "busbw": _floats(out[1], len(sizes), "bandwidths (busbw)"),
    }


def analyse(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Your ``fit(sizes, times, world_size)`` on this rank's made-up measurements: four numbers."""
    sizes, times = [int(s) for s in inputs["sizes"]], inputs["times"].tolist()
    out = submission.fit(sizes, times, int(inputs["world_size"]))
    if not isinstance(out, dict) or any(k not in out for k in FIT_KEYS):
        raise ValueError(f"fit must return a dict with the keys {', '.join(FIT_KEYS)}")
    return {k: float(out[k]) for k in FIT_KEYS}
