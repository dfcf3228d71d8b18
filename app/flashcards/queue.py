"""What to study next, as pure functions over plain data.

Order, as the issue and Anki have it: learning and relearning cards that are due, then
due reviews, then new cards within the day's limit. Learning cards due within the
next 20 minutes are shown early once nothing else is left (Anki's learn-ahead limit).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from app.flashcards.models import NEW, REVIEW
from app.flashcards.scheduling import Prefs, Snapshot, is_learning, next_day_start

LEARN_AHEAD = timedelta(minutes=20)


@dataclass(frozen=True)
class Item:
    """One card of a deck as the queue sees it."""

    card_id: str
    position: int
    snap: Snapshot
    suspended: bool = False
    buried_until: datetime | None = None

    def available(self, now: datetime) -> bool:
        return not self.suspended and (self.buried_until is None or self.buried_until <= now)


@dataclass(frozen=True)
class Done:
    """What the student has already done today (since 4 am local)."""

    new: int = 0
    reviews: int = 0


@dataclass(frozen=True)
class Counts:
    new: int
    learning: int
    review: int

    def as_dict(self) -> dict[str, int]:
        return {"new": self.new, "learning": self.learning, "review": self.review}

    @property
    def total(self) -> int:
        return self.new + self.learning + self.review


@dataclass(frozen=True)
class Queue:
    counts: Counts
    next_card: str | None
    next_kind: str | None  # "new", "learning" or "review"


def build(items: list[Item], done: Done, prefs: Prefs, now: datetime) -> Queue:
    """Counts of cards left today and the card to show now."""
    day_end = next_day_start(now, prefs.time_zone)
    live = [i for i in items if i.available(now)]
    learning = sorted((i for i in live if is_learning(i.snap.state)), key=lambda i: (i.snap.due or now, i.position))
    reviews = sorted(
        (i for i in live if i.snap.state == REVIEW and i.snap.due is not None and i.snap.due < day_end),
        key=lambda i: (i.snap.due or now, i.position),
    )
    new = sorted((i for i in live if i.snap.state == NEW), key=lambda i: i.position)
    review_left = max(0, prefs.reviews_per_day - done.reviews)
    new_left = max(0, prefs.new_per_day - done.new)
    reviews, new = reviews[:review_left], new[:new_left]
    learning_today = [i for i in learning if i.snap.due is None or i.snap.due < day_end]
    counts = Counts(new=len(new), learning=len(learning_today), review=len(reviews))

    due_learning = [i for i in learning_today if i.snap.due is None or i.snap.due <= now]
    if due_learning:
        return Queue(counts, due_learning[0].card_id, "learning")
    if reviews:
        return Queue(counts, reviews[0].card_id, "review")
    if new:
        return Queue(counts, new[0].card_id, "new")
    ahead = [i for i in learning_today if i.snap.due is not None and i.snap.due <= now + LEARN_AHEAD]
    if ahead:
        return Queue(counts, ahead[0].card_id, "learning")
    return Queue(counts, None, None)


def waiting_learning(items: list[Item], prefs: Prefs, now: datetime) -> datetime | None:
    """When the next learning card of today comes due, if one is still to come."""
    day_end = next_day_start(now, prefs.time_zone)
    dues = [
        i.snap.due for i in items
        if i.available(now) and is_learning(i.snap.state) and i.snap.due is not None and i.snap.due < day_end
    ]  # fmt: skip
    return min(dues) if dues else None
