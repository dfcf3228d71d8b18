"""Study statistics as pure functions over plain data (no database)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from app.flashcards.models import NEW, REVIEW
from app.flashcards.queue import Item
from app.flashcards.scheduling import is_learning, is_mature, study_date

FORECAST_DAYS = 30
HEATMAP_WEEKS = 26


@dataclass(frozen=True)
class LoggedReview:
    reviewed_at: datetime
    raw_rating: int
    rating: int  # fsrs: 1 Again .. 4 Easy
    state_before: int


@dataclass(frozen=True)
class Retention:
    passed: int
    total: int

    @property
    def rate(self) -> float | None:
        return self.passed / self.total if self.total else None


@dataclass
class Stats:
    counts: dict[str, int]
    forecast: list[int]
    heatmap: dict[date, int]
    today: date
    retention_month: Retention
    retention_all: Retention
    buttons: dict[int, int]
    reviews_today: int = 0
    first_day: date = field(default_factory=date.today)

    def as_dict(self) -> dict[str, object]:
        def ret(r: Retention) -> dict[str, object]:
            return {"passed": r.passed, "total": r.total, "rate": r.rate}

        return {
            "counts": self.counts,
            "forecast": self.forecast,
            "reviews_by_day": {d.isoformat(): n for d, n in sorted(self.heatmap.items())},
            "true_retention": {"last_30_days": ret(self.retention_month), "all_time": ret(self.retention_all)},
            "answer_buttons": {str(k): v for k, v in self.buttons.items()},
            "reviews_today": self.reviews_today,
        }


def counts_by_state(items: list[Item]) -> dict[str, int]:
    """new, learning, young, mature, suspended (a suspended card counts only as suspended)."""
    counts = dict.fromkeys(("new", "learning", "young", "mature", "suspended"), 0)
    for item in items:
        if item.suspended:
            counts["suspended"] += 1
        elif item.snap.state == NEW:
            counts["new"] += 1
        elif is_learning(item.snap.state):
            counts["learning"] += 1
        else:
            counts["mature" if is_mature(item.snap) else "young"] += 1
    return counts


def forecast(items: list[Item], now: datetime, time_zone: str, days: int = FORECAST_DAYS) -> list[int]:
    """Cards due on each of the next ``days`` study days; overdue cards count today."""
    today = study_date(now, time_zone)
    due = [0] * days
    for item in items:
        if item.suspended or item.snap.state == NEW or item.snap.due is None:
            continue
        offset = max(0, (study_date(item.snap.due, time_zone) - today).days)
        if offset < days:
            due[offset] += 1
    return due


def retention(reviews: list[LoggedReview], since: datetime | None = None) -> Retention:
    """True retention: of reviews of cards in the review state, how many were not Again."""
    graded = [r for r in reviews if r.state_before == REVIEW and (since is None or r.reviewed_at >= since)]
    return Retention(sum(1 for r in graded if r.rating > 1), len(graded))


def compute(items: list[Item], reviews: list[LoggedReview], now: datetime, time_zone: str) -> Stats:
    today = study_date(now, time_zone)
    first = today - timedelta(days=7 * HEATMAP_WEEKS - 1)
    heatmap: dict[date, int] = {}
    for r in reviews:
        day = study_date(r.reviewed_at, time_zone)
        if day >= first:
            heatmap[day] = heatmap.get(day, 0) + 1
    buttons = dict.fromkeys(range(1, 6), 0)
    for r in reviews:
        buttons[r.raw_rating] += 1
    return Stats(
        counts=counts_by_state(items), forecast=forecast(items, now, time_zone), heatmap=heatmap, today=today,
        retention_month=retention(reviews, now - timedelta(days=30)), retention_all=retention(reviews),
        buttons=buttons, reviews_today=heatmap.get(today, 0), first_day=first,
    )  # fmt: skip
