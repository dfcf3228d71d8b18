"""Statistics and charts, over plain data."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from app.flashcards import charts
from app.flashcards.models import LEARNING, NEW, REVIEW
from app.flashcards.queue import Item
from app.flashcards.scheduling import Snapshot
from app.flashcards.stats import LoggedReview, compute, counts_by_state, forecast, retention

NOW = datetime(2025, 1, 15, 10, 0, tzinfo=UTC)


def rev(cid: str, interval: int, due_in: float) -> Item:
    due = NOW + timedelta(days=due_in)
    return Item(cid, 0, Snapshot(REVIEW, None, 5.0, 5.0, due, due - timedelta(days=interval)))


def test_counts_by_state() -> None:
    items = [
        Item("n", 0, Snapshot()), Item("l", 0, Snapshot(LEARNING, 0, 1.0, 5.0, NOW, NOW)),
        rev("young", 5, 2), rev("mature", 30, 2), Item("s", 0, Snapshot(), suspended=True),
    ]  # fmt: skip
    assert counts_by_state(items) == {"new": 1, "learning": 1, "young": 1, "mature": 1, "suspended": 1}


def test_forecast_counts_overdue_as_today_and_ignores_new() -> None:
    items = [
        rev("a", 3, -2),
        rev("b", 3, 0.5),
        rev("c", 3, 1),
        rev("d", 3, 29.5),
        rev("e", 3, 40),
        Item("n", 0, Snapshot()),
    ]
    due = forecast(items, NOW, "UTC")
    assert len(due) == 30
    assert due[0] == 2 and due[1] == 1 and due[29] == 1 and sum(due) == 4


def test_true_retention_counts_only_review_state_reviews() -> None:
    reviews = [
        LoggedReview(NOW, 4, 3, REVIEW), LoggedReview(NOW, 2, 1, REVIEW), LoggedReview(NOW, 5, 4, REVIEW),
        LoggedReview(NOW, 1, 1, NEW), LoggedReview(NOW - timedelta(days=40), 1, 1, REVIEW),
    ]  # fmt: skip
    assert (retention(reviews).passed, retention(reviews).total) == (2, 4)
    month = retention(reviews, NOW - timedelta(days=30))
    assert (month.passed, month.total, round(month.rate or 0, 3)) == (2, 3, 0.667)
    assert retention([]).rate is None


def test_compute_heatmap_buttons_and_svg() -> None:
    reviews = [
        LoggedReview(NOW - timedelta(days=d), r, max(1, r - 1), NEW) for d, r in ((0, 1), (0, 4), (1, 5), (400, 3))
    ]
    stats = compute([rev("a", 3, 1)], reviews, NOW, "UTC")
    assert stats.heatmap == {date(2025, 1, 15): 2, date(2025, 1, 14): 1}
    assert stats.buttons == {1: 1, 2: 0, 3: 1, 4: 1, 5: 1}
    assert stats.reviews_today == 2
    heat = charts.heatmap(stats)
    assert heat.startswith("<svg") and "2025-01-15: 2 reviews" in heat and "style=" not in heat
    bars = charts.forecast(stats)
    assert "+1d: 1" in bars and "style=" not in bars
    assert stats.as_dict()["answer_buttons"] == {"1": 1, "2": 0, "3": 1, "4": 1, "5": 1}
