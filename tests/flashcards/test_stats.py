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


def test_each_chart_has_its_numbers_as_a_table_and_a_summary() -> None:
    reviews = [
        LoggedReview(NOW - timedelta(days=d), r, max(1, r - 1), NEW) for d, r in ((0, 1), (0, 4), (1, 5), (9, 3))
    ]
    stats = compute([rev("a", 3, 1), rev("b", 3, 1), rev("c", 3, -4)], reviews, NOW, "UTC")

    calendar = charts.heatmap_table(stats)
    assert calendar.columns == ("Week", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
    # 26 weeks of days, from a Thursday: 27 calendar weeks, as the chart has 27 columns.
    assert len(calendar.rows) == 27 and calendar.rows[-1][0] == "Week of Mon 13 Jan"
    # 15 Jan 2025 is a Wednesday: Mon 0, Tue 1, Wed 2, then days the calendar does not reach yet.
    assert calendar.rows[-1][1:] == (0, 1, 2, "", "", "", "")
    assert calendar.rows[-2][1:] == (1, 0, 0, 0, 0, 0, 0)  # Mon 6 Jan, 9 days back
    cells = {row[0]: row[1:] for row in calendar.rows}
    assert sum(n for row in cells.values() for n in row if n != "") == sum(stats.heatmap.values()) == 4
    assert calendar.caption == "Reviews per day, 26 weeks to Wed 15 Jan: 4 in all"
    heat = charts.heatmap(stats)
    assert heat.count("<rect") == sum(1 for row in calendar.rows for n in row[1:] if n != "")  # a cell per day drawn
    assert (
        'aria-label="Reviews per day over the last 26 weeks: 4 reviews on 3 days, the most on Wed 15 Jan (2)"' in heat
    )

    forecast = charts.forecast_table(stats)
    assert [row[2] for row in forecast.rows] == stats.forecast and len(forecast.rows) == 30
    assert forecast.rows[:2] == (("today", "Wed 15 Jan", 1), ("+1d", "Thu 16 Jan", 2))
    assert 'aria-label="Cards due in the next 30 days: 3 in all, 1 today, the most on Thu 16 Jan (2)"' in (
        charts.forecast(stats)
    )

    names = {1: "Again", 2: "Again", 3: "Hard", 4: "Good", 5: "Easy"}
    buttons = charts.buttons_table(stats, names)
    assert buttons.rows == (("1", "Again", 1), ("2", "Again", 0), ("3", "Hard", 1), ("4", "Good", 1), ("5", "Easy", 1))
    assert {int(b): n for b, _, n in buttons.rows} == stats.buttons
    assert 'aria-label="Answer buttons pressed: 1 Again, 1, 2 Again, 0, 3 Hard, 1, 4 Good, 1, 5 Easy, 1"' in (
        charts.buttons(stats, names)
    )
    assert 'aria-label="Cards by state: new 0, learning 0, young 3, mature 0, suspended 0"' in charts.counts(stats)


def test_an_empty_deck_summarises_its_charts_without_a_busiest_day() -> None:
    stats = compute([], [], NOW, "UTC")
    assert 'aria-label="Reviews per day over the last 26 weeks: 0 reviews on 0 days"' in charts.heatmap(stats)
    assert 'aria-label="Cards due in the next 30 days: 0 in all, 0 today"' in charts.forecast(stats)
    assert all(n in (0, "") for row in charts.heatmap_table(stats).rows for n in row[1:])
