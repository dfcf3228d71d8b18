"""Queue order and daily limits, over plain data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.flashcards.models import LEARNING, NEW, RELEARNING, REVIEW
from app.flashcards.queue import Done, Item, build, waiting_learning
from app.flashcards.scheduling import Prefs, Snapshot

NOW = datetime(2025, 1, 15, 10, 0, tzinfo=UTC)  # 10:00 UTC: the study day began at 04:00 UTC


def item(cid: str, pos: int, state: int = NEW, due: datetime | None = None, **kw: object) -> Item:
    return Item(cid, pos, Snapshot(state=state, due=due, stability=1.0 if state else None), **kw)  # type: ignore[arg-type]


def test_learning_first_then_reviews_then_new() -> None:
    items = [
        item("n1", 1), item("n2", 2),
        item("r1", 3, REVIEW, NOW - timedelta(days=1)),
        item("l1", 4, LEARNING, NOW - timedelta(minutes=1)),
        item("rl", 5, RELEARNING, NOW - timedelta(minutes=2)),
    ]  # fmt: skip
    order = []
    remaining = list(items)
    while remaining:
        queue = build(remaining, Done(), Prefs(), NOW)
        order.append((queue.next_card, queue.next_kind))
        remaining = [i for i in remaining if i.card_id != queue.next_card]
    assert order == [("rl", "learning"), ("l1", "learning"), ("r1", "review"), ("n1", "new"), ("n2", "new")]


def test_counts_and_new_limit() -> None:
    items = [item(f"n{i}", i) for i in range(30)] + [item("r", 99, REVIEW, NOW + timedelta(hours=3))]
    queue = build(items, Done(new=5), Prefs(new_per_day=20), NOW)
    assert queue.counts.as_dict() == {"new": 15, "learning": 0, "review": 1}
    assert queue.next_card == "r"  # due later today (before 4 am tomorrow) counts as due today
    assert build(items, Done(new=20), Prefs(new_per_day=20), NOW).counts.new == 0


def test_review_limit() -> None:
    items = [item(f"r{i}", i, REVIEW, NOW - timedelta(days=1)) for i in range(10)]
    assert build(items, Done(reviews=7), Prefs(reviews_per_day=8), NOW).counts.review == 1
    done = build(items, Done(reviews=8), Prefs(reviews_per_day=8), NOW)
    assert (done.counts.review, done.next_card) == (0, None)


def test_reviews_due_tomorrow_wait() -> None:
    tomorrow = datetime(2025, 1, 16, 4, 30, tzinfo=UTC)  # after the next 4 am
    queue = build([item("r", 1, REVIEW, tomorrow)], Done(), Prefs(), NOW)
    assert queue.next_card is None and queue.counts.review == 0


def test_suspended_and_buried_cards_are_left_out() -> None:
    items = [
        item("s", 1, suspended=True),
        item("b", 2, buried_until=NOW + timedelta(hours=5)),
        item("b-old", 3, buried_until=NOW - timedelta(hours=1)),
    ]  # fmt: skip
    queue = build(items, Done(), Prefs(), NOW)
    assert queue.next_card == "b-old" and queue.counts.new == 1


def test_learning_card_waits_then_comes_early_within_20_minutes() -> None:
    soon = item("l", 1, LEARNING, NOW + timedelta(minutes=10))
    later = item("l2", 2, LEARNING, NOW + timedelta(minutes=50))
    assert build([soon, later], Done(), Prefs(), NOW).next_card == "l"
    queue = build([later], Done(), Prefs(), NOW)
    assert queue.next_card is None and queue.counts.learning == 1
    assert waiting_learning([later], Prefs(), NOW) == NOW + timedelta(minutes=50)
    # A new card comes before a learning card that is not due yet.
    assert build([item("n", 3), soon], Done(), Prefs(), NOW).next_card == "n"
