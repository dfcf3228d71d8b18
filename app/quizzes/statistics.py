"""Pure item statistics over submitted attempts, as Moodle's quiz statistics report them.

- facility index: the share of attempts that got the question right;
- discrimination index: facility among the top 27% of attempts (by total score) minus
  facility among the bottom 27%;
- point-biserial: the correlation between getting the question right and the score on
  the *other* questions (so a question does not correlate with itself);
- option frequencies, with blanks counted apart.

A question is flagged when it discriminates badly (index or correlation below 0.2,
or negative), once there are enough attempts for the figures to mean something.
"""

from __future__ import annotations

import math
import statistics as st
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

GROUP = 0.27
POOR = 0.2
MIN_ATTEMPTS = 5


@dataclass(frozen=True)
class ItemInfo:
    id: str
    number: int
    keys: list[str]
    answer: str


@dataclass(frozen=True)
class ItemStats:
    id: str
    number: int
    answer: str
    facility: float | None
    discrimination: float | None
    point_biserial: float | None
    options: dict[str, int]
    blank: int
    flag: str | None


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    label: str
    count: int


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    baseline: float
    bars: tuple[Bar, ...]
    ymax: int


@dataclass(frozen=True)
class QuizStats:
    title: str
    attempts: int
    max_score: int
    mean: float | None
    median: float | None
    distribution: list[int]
    chart: Chart
    items: tuple[ItemStats, ...]

    @property
    def flagged(self) -> int:
        return sum(1 for i in self.items if i.flag)

    @property
    def mode_scores(self) -> list[int]:
        """The total scores most attempts got (ties all listed, lowest first); empty without attempts."""
        top = max(self.distribution, default=0)
        return [score for score, n in enumerate(self.distribution) if n == top] if top else []


def correlation(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson's r; None when either side does not vary."""
    n = len(xs)
    if n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def discrimination(correct: Sequence[int], totals: Sequence[int]) -> float | None:
    """Facility in the top 27% by total minus facility in the bottom 27%; None below 2 attempts."""
    n = len(totals)
    if n < 2:
        return None
    size = max(1, round(GROUP * n))
    ranked = sorted(range(n), key=lambda i: totals[i])
    lower, upper = ranked[:size], ranked[-size:]
    return sum(correct[i] for i in upper) / size - sum(correct[i] for i in lower) / size


def flag_for(disc: float | None, rpb: float | None, attempts: int) -> str | None:
    """Why a question deserves a look, or None."""
    if attempts < MIN_ATTEMPTS:
        return None
    figures = [f for f in (disc, rpb) if f is not None]
    if not figures:
        return "everyone scored the same on it"
    if min(figures) < 0:
        return "negative discrimination: weaker students do better on it"
    if min(figures) < POOR:
        return "discriminates poorly"
    return None


def histogram(scores: Sequence[int], max_score: int) -> list[int]:
    """How many attempts scored 0, 1, ..., max_score."""
    counts = [0] * (max_score + 1)
    for s in scores:
        counts[min(max(s, 0), max_score)] += 1
    return counts


def bar_chart(counts: Sequence[int], *, width: int = 640, height: int = 220, pad: int = 28) -> Chart:
    """Geometry for a server-rendered SVG bar chart of ``counts`` (x: score, y: attempts)."""
    ymax = max(max(counts, default=0), 1)
    slot = (width - 2 * pad) / max(len(counts), 1)
    baseline = height - pad
    bars = []
    for i, c in enumerate(counts):
        h = (baseline - pad / 2) * c / ymax
        bars.append(
            Bar(
                round(pad + i * slot + slot * 0.1, 2),
                round(baseline - h, 2),
                round(slot * 0.8, 2),
                round(h, 2),
                str(i),
                c,
            )
        )
    return Chart(width, height, baseline, tuple(bars), ymax)


def quiz_stats(title: str, items: Sequence[ItemInfo], results: Sequence[Mapping[str, Any]]) -> QuizStats:
    """Statistics for ``items`` over stored results (``{"score", "marks": [{"id", "choice", "correct"}]}``)."""
    max_score = max([len(items), *(int(r["max_score"]) for r in results)]) if results else len(items)
    totals = [int(r["score"]) for r in results]
    marks = [{m["id"]: m for m in r["marks"]} for r in results]
    stats = []
    for item in items:
        taken = [(i, m[item.id]) for i, m in enumerate(marks) if item.id in m]
        correct = [int(bool(m["correct"])) for _, m in taken]
        tot = [totals[i] for i, _ in taken]
        options = {k: 0 for k in item.keys}
        blank = 0
        for _, m in taken:
            if m["choice"] is None:
                blank += 1
            else:
                options[m["choice"]] = options.get(m["choice"], 0) + 1
        disc = discrimination(correct, tot)
        rpb = correlation(correct, [t - c for t, c in zip(tot, correct, strict=True)])
        stats.append(
            ItemStats(
                item.id,
                item.number,
                item.answer,
                sum(correct) / len(correct) if correct else None,
                disc,
                rpb,
                options,
                blank,
                flag_for(disc, rpb, len(taken)),
            )
        )
    counts = histogram(totals, max_score)
    return QuizStats(
        title=title,
        attempts=len(results),
        max_score=max_score,
        mean=round(st.fmean(totals), 2) if totals else None,
        median=st.median(totals) if totals else None,
        distribution=counts,
        chart=bar_chart(counts),
        items=tuple(stats),
    )
