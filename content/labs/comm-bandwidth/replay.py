"""Trusted helpers for comm-bandwidth's checks (never mounted in a rank).

- ``Method`` and ``replay``: a benchmark method run on the public model (``interconnect.Link``) alone,
  here, outside the ranks: the reference method, and the mistakes that ``checks.py`` tells apart by
  replaying them (warm-up calls timed, no barrier, a mean, the wrong number of bytes);
- ``draw_link``: one world size's interconnect, drawn so that every mistake shows;
- ``measurements``, ``fit_dataset``: made-up measurements for ``bandwidths`` and ``fit``, with the model
  they came from (the truth a fit is held to), drawn so that a right fit always meets the tolerances
  and the listed wrong ones always miss them;
- the fits a right and a wrong analysis give (``weighted_fit``, ``log_fit``, ``plain_fit``, ``loglog_fit``).
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

# W untimed calls first; none; W calls made but timed with the others; only 1 or 2 untimed calls (W is 3)
WARM = ("excluded", "none", "timed", "1", "2")
SYNC = ("each", "once", "none", "inside")  # barrier before each timed call; once per size; none; after t0
STAT = ("median", "min", "mean")
SCALE = (1, 2, 4, 8)  # bytes of the tensor / the size asked: float64, `size` float32 elements, `size` float64
ROBUST = ("median", "min")

# The fits' tolerances (relative to the model the measurements came from) and the margins the drawing keeps:
# a right fit lands within HALF of them, the listed wrong ones beyond TWICE them.
FIT_TOLERANCE = {"alpha": 0.10, "beta": 0.05, "busbw": 0.05, "crossover": 0.10}
NOISE, NOISE_CAP = 0.01, 0.03  # each made-up time is off by a gaussian 1 % (at most 3 %)
FIT_SIZES = [2**k for k in range(10, 31)]  # 1 KiB to 1 GiB, doubling
CONVERT_SIZES = [2**k for k in range(10, 31, 2)]  # 1 KiB to 1 GiB, by 4


def factor(n: int) -> float:
    """What each rank sends of an all-reduced buffer, in a ring: 2(N-1)/N (the bus bandwidth's factor)."""
    return 2 * (n - 1) / n


@dataclass(frozen=True)
class Method:
    """A way of benchmarking: the reference is ``Method()``; every other is a mistake ``checks.py`` names."""

    warm: str = "excluded"
    sync: str = "each"
    stat: str = "median"
    scale: int = 1

    def right(self, aspect: str) -> bool:
        """Whether this method gets ``aspect`` (a check id) right."""
        return {
            "warm-up": self.warm == "excluded",
            "synchronised": self.sync == "each",
            "robust-statistic": self.stat in ROBUST,
            "message-sizes": self.scale == 1,
        }[aspect]

    def describe(self, aspect: str) -> str:
        """What this method does wrong about ``aspect``, in words for a student ("" where it is right)."""
        value = {"warm-up": self.warm, "synchronised": self.sync, "robust-statistic": self.stat}.get(aspect)
        return WORDS.get((aspect, str(self.scale) if value is None else value), "")


WORDS = {
    ("warm-up", "none"): "times the first calls of each size: no untimed warm-up calls",
    ("warm-up", "timed"): "makes the warm-up calls but times them with the repetitions",
    ("warm-up", "1"): "makes only 1 untimed warm-up call of each size, not `warmup`",
    ("warm-up", "2"): "makes only 2 untimed warm-up calls of each size, not `warmup`",
    ("synchronised", "once"): "calls ic.barrier() once before a size's repetitions, not before each timed call",
    ("synchronised", "none"): "starts the timer without calling ic.barrier() first",
    ("synchronised", "inside"): "starts the timer before ic.barrier(), so the wait for the other ranks is timed",
    ("robust-statistic", "mean"): "reports the mean of the repetitions",
    ("message-sizes", "2"): "all-reduces 2 x size bytes (float64 elements?)",
    ("message-sizes", "4"): "all-reduces 4 x size bytes (`size` float32 elements?)",
    ("message-sizes", "8"): "all-reduces 8 x size bytes (`size` float64 elements?)",
}
STATISTICS: dict[str, Callable[[list[float]], float]] = {
    "median": statistics.median,
    "min": min,
    "mean": statistics.fmean,
}


REFERENCE = Method()
METHODS = [Method(*m) for m in itertools.product(WARM, SYNC, STAT, SCALE)]


def replay(
    link_class: Callable[..., Any], link: dict[str, Any], sizes: Sequence[int], warmup: int, reps: int, method: Method
) -> list[float]:
    """The times ``method`` reports on the model ``link`` (the rank's ``interconnect.Link``), replayed here."""
    model = link_class(**link)
    out = []
    for size in sizes:
        nbytes = size * method.scale
        untimed = {"excluded": warmup, "none": 0, "timed": 0}.get(method.warm)
        for _ in range(int(method.warm) if untimed is None else untimed):
            model.all_reduce(nbytes)
        calls = reps + (warmup if method.warm == "timed" else 0)
        if method.sync == "once":
            model.barrier()
        samples = []
        for _ in range(calls):
            if method.sync == "each":
                model.barrier()
            start = model.time
            if method.sync == "inside":
                model.barrier()
            model.all_reduce(nbytes)
            samples.append(model.time - start)
        out.append(STATISTICS[method.stat](samples))
    return out


def close(got: Sequence[float], want: Sequence[float], rtol: float) -> bool:
    return len(got) == len(want) and all(abs(g - w) <= rtol * abs(w) for g, w in zip(got, want, strict=True))


def log_uniform(rng: random.Random, low: float, high: float) -> float:
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def draw_link(rng: random.Random, n: int, sizes: Sequence[int], warmup: int, reps: int) -> dict[str, Any]:
    """One interconnect for ``n`` ranks: the regimes change inside ``sizes``, each effect big enough to see.

    Latency 20-60 us, bus bandwidth 1-8 GB/s with the crossover alpha * beta between the second and the
    next-to-last size; a warm-up penalty of 0.5-2 ms; each rank's lag 0.2-1.5 alpha (the largest at least 0.5
    alpha); (reps - 1) // 2 hiccups in every size's repetitions (at least one), each adding 1-3 times the call.
    """
    f = factor(n)
    while True:
        alpha, bus = log_uniform(rng, 20e-6, 60e-6), log_uniform(rng, 1e9, 8e9)
        if sizes[1] <= alpha * bus / f <= sizes[-2]:
            break
    lag = [rng.uniform(0.2, 1.5) * alpha for _ in range(n)]
    lag[rng.randrange(n)] = max(max(lag), 0.5 * alpha)
    hiccups: list[list[Any]] = []
    for size in sizes:
        calls = rng.sample(range(warmup, warmup + reps), max(1, (reps - 1) // 2))
        call_time = alpha + f * size / bus
        hiccups.extend([size, k, rng.uniform(1.0, 3.0) * call_time] for k in sorted(calls))
    return {
        "world_size": n,
        "alpha": alpha,
        "bus_bandwidth": bus,
        "warmup_calls": warmup,
        "warmup_penalty": rng.uniform(0.5e-3, 2e-3),
        "lag": lag,
        "hiccups": hiccups,
        "barrier": alpha,
    }


def measurements(rng: random.Random, sizes: Sequence[int], n: int) -> tuple[list[float], float, float]:
    """Times of all-reduces of ``sizes`` on ``n`` ranks, with 1 % noise; with their alpha and bus bandwidth."""
    alpha, bus = log_uniform(rng, 5e-6, 100e-6), log_uniform(rng, 1e9, 50e9)
    beta = bus / factor(n)
    noise = [max(-NOISE_CAP, min(NOISE_CAP, rng.gauss(0.0, NOISE))) for _ in sizes]
    return [(alpha + s / beta) * (1 + e) for s, e in zip(sizes, noise, strict=True)], alpha, bus


# ---- fits: t = alpha + s / beta ---------------------------------------------------------------------------------


def _lstsq(columns: list[list[float]], target: list[float]) -> list[float]:
    """Least squares with two columns, by the normal equations on columns scaled to 1 (sizes reach 1e9)."""
    (a, b), y = columns, target
    sa, sb = max(abs(x) for x in a), max(abs(x) for x in b)
    a, b = [x / sa for x in a], [x / sb for x in b]
    aa, ab, bb = sum(x * x for x in a), sum(x * z for x, z in zip(a, b, strict=True)), sum(z * z for z in b)
    ay, by = sum(x * v for x, v in zip(a, y, strict=True)), sum(z * v for z, v in zip(b, y, strict=True))
    det = aa * bb - ab * ab
    return [(ay * bb - by * ab) / det / sa, (by * aa - ay * ab) / det / sb]


def weighted_fit(sizes: Sequence[int], times: Sequence[float]) -> tuple[float, float]:
    """The reference: least squares on relative errors (each equation divided by its time)."""
    w = [1 / t for t in times]
    alpha, inverse = _lstsq([w, [s * x for s, x in zip(sizes, w, strict=True)]], [1.0] * len(times))
    return alpha, 1 / inverse


def log_fit(sizes: Sequence[int], times: Sequence[float]) -> tuple[float, float]:
    """Least squares of log t against log(alpha + s / beta) (Gauss-Newton from the weighted fit): also right."""
    alpha, beta = weighted_fit(sizes, times)
    for _ in range(8):  # quadratic convergence from the weighted fit, which is close
        model = [alpha + s / beta for s in sizes]
        residual = [math.log(t / m) for t, m in zip(times, model, strict=True)]
        d_alpha, d_beta = _lstsq(
            [[1 / m for m in model], [-s / beta**2 / m for s, m in zip(sizes, model, strict=True)]], residual
        )
        alpha, beta = alpha + d_alpha, beta + d_beta
    return alpha, beta


def plain_fit(sizes: Sequence[int], times: Sequence[float]) -> tuple[float, float]:
    """An unweighted least-squares line (numpy.polyfit(s, t, 1)): the largest messages decide alpha."""
    inverse, alpha = _lstsq([[float(s) for s in sizes], [1.0] * len(sizes)], list(times))
    return alpha, 1 / inverse


def loglog_fit(sizes: Sequence[int], times: Sequence[float]) -> tuple[float, float]:
    """A straight line through log t against log s, read as alpha = e^intercept, beta = 1 / slope: a mistake."""
    slope, intercept = _lstsq([[math.log(s) for s in sizes], [1.0] * len(sizes)], [math.log(t) for t in times])
    return math.exp(intercept), 1 / slope


def _errors(fit: tuple[float, float], alpha: float, beta: float) -> tuple[float, float, float]:
    a, b = fit
    return abs(a / alpha - 1), abs(b / beta - 1), abs(a * b / (alpha * beta) - 1)


def fit_dataset(rng: random.Random, n: int) -> dict[str, Any]:
    """Made-up measurements on ``n`` ranks for ``fit``, and the model they came from.

    Redrawn until the crossover lies between 16 KiB and 16 MiB and 2^0.2 from every measured size
    (12 % and more: a crossover read off a measured size then misses it), the weighted and the log-space fits
    land within half the tolerances, and the unweighted line's alpha and the log-log line miss by twice them.
    """
    tol = FIT_TOLERANCE
    while True:
        times, alpha, bus = measurements(rng, FIT_SIZES, n)
        beta = bus / factor(n)
        crossover = alpha * beta
        where = math.log2(crossover)
        if not (14 <= where <= 24 and 0.2 <= where % 1 <= 0.8):
            continue
        right = all(
            ea <= tol["alpha"] / 2 and eb <= tol["beta"] / 2 and ec <= tol["crossover"] / 2
            for ea, eb, ec in (_errors(fit(FIT_SIZES, times), alpha, beta) for fit in (weighted_fit, log_fit))
        )
        plain = _errors(plain_fit(FIT_SIZES, times), alpha, beta)
        loglog = _errors(loglog_fit(FIT_SIZES, times), alpha, beta)
        wrong = plain[0] > 2 * tol["alpha"] and (loglog[0] > 2 * tol["alpha"] or loglog[1] > 2 * tol["beta"])
        if right and wrong:
            return {
                "inputs": {"sizes": FIT_SIZES, "times": torch.tensor(times, dtype=torch.float64), "world_size": n},
                "truth": {"alpha": alpha, "beta": beta, "busbw": bus, "crossover": crossover},
            }
