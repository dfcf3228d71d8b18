"""Queueing arithmetic for the capacity table: how many grading workers keep the wait short.

Pure functions over plain numbers (no server, no database). The model is M/M/c (Erlang C):
submissions arrive at random (Poisson) at rate ``lam`` per second, each of ``c`` workers grades
``mu`` per second, service times exponential. Grading times are far steadier than exponential,
so the model overstates the wait: the worker counts it gives err on the safe side.
"""

from __future__ import annotations

import math

STUDENTS = (50, 100, 200, 500, 1000)
PER_STUDENT = (1, 3, 5)  # submissions per student in the last hour
RUSH_S = 600  # the second figure of each cell: the whole hour's submissions in its last 10 minutes


def erlang_c(c: int, a: float) -> float:
    """Probability that a submission has to wait, with ``c`` workers and offered load ``a`` = lam/mu."""
    if a <= 0:
        return 0.0
    if a >= c:
        return 1.0
    b = 1.0  # Erlang B by its stable recursion, then C from B
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    return c * b / (c - a * (1 - b))


def wait_over(t: float, c: int, lam: float, mu: float) -> float:
    """P(time queued before a worker claims it > ``t`` seconds)."""
    if lam >= c * mu:
        return 1.0
    return erlang_c(c, lam / mu) * math.exp(-(c * mu - lam) * t)


def workers_needed(lam: float, mu: float, *, target_s: float = 60.0, q: float = 0.95) -> int | None:
    """The fewest workers for which submit -> verdict (queued, then one grading of 1/mu s) stays under
    ``target_s`` for a share ``q`` of submissions; None when one grading alone takes that long."""
    queued_for = target_s - 1 / mu
    if queued_for <= 0:
        return None
    c = max(1, math.ceil(lam / mu))
    while wait_over(queued_for, c, lam, mu) > 1 - q:
        c += 1
    return c


def capacity_table(per_worker_per_min: float, *, target_s: float = 60.0) -> list[str]:
    """Markdown rows: students x submissions each in the last hour -> workers, spread over the hour /
    all in its last 10 minutes, for a p95 submit -> verdict under ``target_s``."""
    mu = per_worker_per_min / 60
    head = " | ".join(
        f"{k} submission{'s' * (k > 1)} each in the last hour" if i == 0 else f"{k} each"
        for i, k in enumerate(PER_STUDENT)
    )
    rows = [f"| students | {head} |", "|---|" + "---|" * len(PER_STUDENT)]
    for students in STUDENTS:
        cells = []
        for k in PER_STUDENT:
            n = students * k
            hour, rush = (workers_needed(n / span, mu, target_s=target_s) for span in (3600, RUSH_S))
            cells.append(f"{_show(hour)} / {_show(rush)}")
        rows.append(f"| {students} | " + " | ".join(cells) + " |")
    return rows


def _show(workers: int | None) -> str:
    return "–" if workers is None else str(workers)
