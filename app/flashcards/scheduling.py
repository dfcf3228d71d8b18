"""FSRS scheduling through the fsrs package, over plain data (no database).

Only ``fsrs.Scheduler`` computes intervals; this module maps the five-point scale onto
fsrs ratings, converts our stored state to and from ``fsrs.Card``, and works out the
student's study day, which starts at 4 am local time as in Anki.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from fsrs import Card, Rating, Scheduler, State

from app.flashcards.models import LEARNING, NEW, RELEARNING, REVIEW, STATE_NAMES

DAY_STARTS_AT = time(4, 0)
# Raw points 1 and 2 both mean "did not know it": Again.
RATING_MAP = {1: Rating.Again, 2: Rating.Again, 3: Rating.Hard, 4: Rating.Good, 5: Rating.Easy}
MATURE_DAYS = 21


@dataclass(frozen=True)
class Prefs:
    """The scheduling side of a student's settings."""

    desired_retention: float = 0.9
    learning_steps: tuple[int, ...] = (1, 10)  # minutes
    relearning_steps: tuple[int, ...] = (10,)
    new_per_day: int = 20
    reviews_per_day: int = 200
    time_zone: str = "UTC"


@dataclass(frozen=True)
class Snapshot:
    """A student's card state as plain data: what a review reads and writes."""

    state: int = NEW
    step: int | None = None
    stability: float | None = None
    difficulty: float | None = None
    due: datetime | None = None
    last_review: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state, "step": self.step, "stability": self.stability, "difficulty": self.difficulty,
            "due": self.due.isoformat() if self.due else None,
            "last_review": self.last_review.isoformat() if self.last_review else None,
        }  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Snapshot:
        def when(v: str | None) -> datetime | None:
            return datetime.fromisoformat(v).astimezone(UTC) if v else None

        return cls(d["state"], d["step"], d["stability"], d["difficulty"], when(d["due"]), when(d["last_review"]))

    @property
    def state_name(self) -> str:
        return STATE_NAMES[self.state]

    @property
    def interval_days(self) -> int:
        if self.due is None or self.last_review is None:
            return 0
        return (self.due - self.last_review).days


def map_rating(raw: int) -> Rating:
    """The fsrs rating for a raw 1-5 point; ValueError outside 1-5."""
    if raw not in RATING_MAP:
        raise ValueError(f"rating must be 1 to 5, got {raw}")
    return RATING_MAP[raw]


def scheduler(prefs: Prefs, *, fuzz: bool) -> Scheduler:
    return Scheduler(
        desired_retention=prefs.desired_retention,
        learning_steps=[timedelta(minutes=m) for m in prefs.learning_steps],
        relearning_steps=[timedelta(minutes=m) for m in prefs.relearning_steps],
        enable_fuzzing=fuzz,
    )


def _to_fsrs(snap: Snapshot, now: datetime) -> Card:
    if snap.state == NEW:
        return Card(card_id=0, state=State.Learning, step=0, due=now)
    return Card(
        card_id=0, state=State(snap.state), step=snap.step, stability=snap.stability, difficulty=snap.difficulty,
        due=snap.due or now, last_review=snap.last_review,
    )  # fmt: skip


def review(snap: Snapshot, raw: int, now: datetime, sched: Scheduler, duration_ms: int | None = None) -> Snapshot:
    """The state after rating ``snap`` with raw point ``raw`` at ``now`` (UTC)."""
    card, _log = sched.review_card(_to_fsrs(snap, now), map_rating(raw), now.astimezone(UTC), duration_ms)
    return Snapshot(int(card.state), card.step, card.stability, card.difficulty, card.due, card.last_review)


def previews(snap: Snapshot, now: datetime, prefs: Prefs) -> dict[int, timedelta]:
    """For each raw point 1-5, how long until the card comes back (unfuzzed, as Anki shows)."""
    sched = scheduler(prefs, fuzz=False)
    return {raw: review(snap, raw, now, sched).due - now for raw in RATING_MAP}  # type: ignore[operator]


def format_interval(delta: timedelta) -> str:
    """Anki-style short interval: 45s, 10m, 3h, 4d, 2.1mo, 1.3y."""
    seconds = max(0.0, delta.total_seconds())
    if seconds < 60:
        return f"{round(seconds)}s"
    if seconds < 3600:
        return f"{round(seconds / 60)}m"
    if seconds < 86400:
        return f"{round(seconds / 3600)}h"
    days = seconds / 86400
    if days < 30:
        return f"{round(days)}d"
    if days < 365:
        return f"{days / 30:.1f}mo"
    return f"{days / 365:.1f}y"


def retrievability(snap: Snapshot, now: datetime, prefs: Prefs) -> float | None:
    if snap.state == NEW:
        return None
    return float(scheduler(prefs, fuzz=False).get_card_retrievability(_to_fsrs(snap, now), now))


def day_start(now: datetime, time_zone: str) -> datetime:
    """When the student's current study day began (4 am local), in UTC."""
    local = now.astimezone(ZoneInfo(time_zone))
    start = datetime.combine(local.date(), DAY_STARTS_AT, tzinfo=local.tzinfo)
    if local.time() < DAY_STARTS_AT:
        start = datetime.combine(local.date() - timedelta(days=1), DAY_STARTS_AT, tzinfo=local.tzinfo)
    # Combine with a ZoneInfo resolves the offset for that date (DST-safe).
    return start.astimezone(UTC)


def next_day_start(now: datetime, time_zone: str) -> datetime:
    """When the student's next study day begins, in UTC."""
    start = day_start(now, time_zone).astimezone(ZoneInfo(time_zone))
    following = datetime.combine(start.date() + timedelta(days=1), DAY_STARTS_AT, tzinfo=start.tzinfo)
    return following.astimezone(UTC)


def study_date(moment: datetime, time_zone: str) -> Any:
    """The study day (a date) a moment belongs to."""
    local = moment.astimezone(ZoneInfo(time_zone))
    return (local - timedelta(hours=DAY_STARTS_AT.hour)).date()


def is_mature(snap: Snapshot) -> bool:
    return snap.state == REVIEW and snap.interval_days >= MATURE_DAYS


def is_learning(state: int) -> bool:
    return state in (LEARNING, RELEARNING)
