"""Trusted helper for ddp-scaling's checks (never mounted in a rank): the model clock.

``draw`` draws one submission's clock (compute per example, the optimizer step, a message's latency, a
link's bandwidth); ``step_seconds`` prices a step at N ranks from the all-reduces the kernel counted;
``breakdown`` writes that sum out for a student, term by term.
"""

from __future__ import annotations

import torch


def draw(gen: torch.Generator) -> dict[str, float]:
    """The model clock of one submission: whole microseconds, and a bandwidth in tens of MB/s.

    Chosen so that compute, the optimizer step, latency and bandwidth all weigh in the step time: on 4 ranks
    a flat all-reduce costs 0.6-3.1 ms beside 1.0-2.9 ms of compute, one per parameter 0.9-4.9 ms.

    The optimizer step is never a multiple of 4 alphas: on N = 2 or 4 ranks, u / N off the step equals m
    all-reduces fewer (2(N-1) m alpha) exactly when u = 2 N m alpha, and a figure that fits two mistakes
    tells the student neither.
    """

    def pick(low: int, high: int) -> int:
        return int(torch.randint(low, high + 1, (1,), generator=gen))

    sample_us, update_us, alpha_us = pick(20, 60), pick(2, 8) * 100, pick(10, 60)
    while update_us % (4 * alpha_us) == 0:
        alpha_us = pick(10, 60)
    return {
        "sample_s": sample_us * 1e-6,  # forward and backward of one example, on one rank
        "update_s": update_us * 1e-6,  # the optimizer step, taken whole on every rank
        "alpha_s": alpha_us * 1e-6,  # latency of one message
        "beta_Bps": pick(2, 10) * 1e7,  # bytes per second over one rank's link
    }


def step_seconds(clock: dict[str, float], n: int, batch: int, calls: float, nbytes: int) -> dict[str, float]:
    """The model clock's step at ``n`` ranks, by part: ``calls`` all-reduces per step of ``nbytes`` in all."""
    parts = {
        "compute": batch / n * clock["sample_s"],
        "update": clock["update_s"],
        "latency": calls * 2 * (n - 1) * clock["alpha_s"],
        "bandwidth": 2 * (n - 1) / n * nbytes / clock["beta_Bps"],
    }
    return {**parts, "step": sum(parts.values())}


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4g} ms"


def us(seconds: float) -> str:
    return f"{seconds * 1e6:.4g} µs"


def breakdown(parts: dict[str, float], n: int, calls: int, nbytes: int, clock: dict[str, float], batch: int) -> str:
    c, u, a, b = clock["sample_s"], clock["update_s"], clock["alpha_s"], clock["beta_Bps"]
    latency = f" + {calls} x 2({n}-1) x {us(a)}" if n > 1 else ""
    bandwidth = f" + 2({n}-1)/{n} x {nbytes:,} B / {b / 1e6:.4g} MB/s" if n > 1 else ""
    return (
        f"t = {batch}/{n} x {us(c)} + {us(u)}{latency}{bandwidth} = {ms(parts['step'])}"
        f" (compute {ms(parts['compute'])}, update {ms(parts['update'])}"
        + (f", latency {ms(parts['latency'])}, bandwidth {ms(parts['bandwidth'])}" if n > 1 else "")
        + f"), so {batch} / t"
    )
