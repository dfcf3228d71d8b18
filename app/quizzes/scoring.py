"""Pure scoring: marks, pass mark, scoring-guide tier, per-section breakdown, option order.

Everything here takes plain data and returns new objects; nothing touches the database.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Item:
    """What scoring needs to know about one question."""

    id: str
    section: str | None
    answer: str


@dataclass(frozen=True)
class Tier:
    level: str
    recommendation: str
    recommendation_html: str = ""


@dataclass(frozen=True)
class SectionScore:
    id: str | None
    title: str
    score: int
    max_score: int

    @property
    def percent(self) -> float:
        return percent(self.score, self.max_score)


@dataclass(frozen=True)
class Marked:
    id: str
    choice: str | None
    answer: str
    correct: bool


@dataclass(frozen=True)
class Result:
    score: int
    max_score: int
    passed: bool | None
    tier: Tier | None
    sections: tuple[SectionScore, ...]
    marks: tuple[Marked, ...]

    @property
    def percent(self) -> float:
        return percent(self.score, self.max_score)

    @property
    def unanswered(self) -> int:
        return sum(1 for m in self.marks if m.choice is None)


def percent(score: int, max_score: int) -> float:
    """Score as a percentage, one decimal; 0 for an empty quiz."""
    return round(100 * score / max_score, 1) if max_score else 0.0


def pass_mark(passing_score: float | None, max_score: int) -> int | None:
    """Raw score needed to pass: the fraction of the questions, rounded up (0.8 of 25 is 20)."""
    if passing_score is None:
        return None
    # The epsilon keeps 0.7 * 10 = 7.000000000000001 from asking for 8.
    return math.ceil(passing_score * max_score - 1e-9)


def passed(score: int, max_score: int, passing_score: float | None) -> bool | None:
    """True or False against the pass mark; None when the quiz has none."""
    mark = pass_mark(passing_score, max_score)
    return None if mark is None else score >= mark


def tier_for(score: int, guide: Sequence[Mapping[str, Any]]) -> Tier | None:
    """The scoring-guide tier whose inclusive raw-score range holds ``score``."""
    for tier in guide:
        if int(tier["min"]) <= score <= int(tier["max"]):
            return Tier(tier["level"], tier["recommendation"], tier.get("recommendation_html", ""))
    return None


def score(
    items: Sequence[Item],
    choices: Mapping[str, str],
    *,
    sections: Sequence[Mapping[str, Any]] = (),
    passing_score: float | None = None,
    guide: Sequence[Mapping[str, Any]] = (),
) -> Result:
    """Mark ``choices`` (question id -> chosen key) against ``items``; one point per right answer."""
    marks = tuple(Marked(i.id, choices.get(i.id), i.answer, choices.get(i.id) == i.answer) for i in items)
    total = sum(m.correct for m in marks)
    titles = {s["id"]: s["title"] for s in sections}
    order = [s["id"] for s in sections]
    per: dict[str | None, list[int]] = {}
    for item, mark in zip(items, marks, strict=True):
        got = per.setdefault(item.section if item.section in titles else None, [0, 0])
        got[0] += mark.correct
        got[1] += 1
    keys = [k for k in order if k in per] + ([None] if None in per else [])
    section_scores = tuple(
        SectionScore(k, titles.get(k, "Questions") if k else "Questions", per[k][0], per[k][1]) for k in keys
    )
    return Result(
        score=total,
        max_score=len(items),
        passed=passed(total, len(items), passing_score),
        tier=tier_for(total, guide),
        sections=section_scores,
        marks=marks,
    )


def option_order(keys: Sequence[str], *, seed: int, question_id: str, shuffle: bool) -> list[str]:
    """The order to show options in: as authored, or shuffled stably per (attempt seed, question)."""
    order = list(keys)
    if shuffle:
        random.Random(f"{seed}:{question_id}").shuffle(order)
    return order


def question_order(questions: Sequence[tuple[str, str | None]], sections: Sequence[Mapping[str, Any]]) -> list[str]:
    """Question ids grouped by section in the quiz's section order, authored order within a section.

    ``questions`` is ``(id, section)`` pairs in authored order.
    """
    rank = {s["id"]: n for n, s in enumerate(sections)}
    ordered = sorted(enumerate(questions), key=lambda p: (rank.get(p[1][1], len(rank)), p[0]))
    return [q[0] for _, q in ordered]
