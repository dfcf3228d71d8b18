"""Studying: the queue, rating, undo, bury and suspend, on the database.

Concurrency: every change bumps ``CardState.version`` with a compare-and-set update,
and each review row carries the version it was made against under a unique
constraint, so of two ratings made against the same state only one is recorded; the
other gets ``Conflict`` (409, "refresh"). A client that says which version it saw
(the review page always does) is refused as soon as that version is stale.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any, cast

from sqlalchemy import Table, and_, bindparam, delete, func, or_, select, union_all, update
from sqlalchemy.orm import Session

from app.content.courses import DEFAULT_COURSE
from app.content.records import Card, Deck
from app.db import insert_for
from app.errors import Conflict, InvalidInput, NotFound
from app.flashcards import queue as q
from app.flashcards.models import LEARNING, NEW, RELEARNING, REVIEW, CardState, Review
from app.flashcards.preferences import get_prefs
from app.flashcards.scheduling import (
    Prefs,
    Snapshot,
    day_start,
    map_rating,
    next_day_start,
    previews,
    review,
    scheduler,
)  # fmt: skip

REFRESH = "This card changed in another tab or window. Refresh to see where it stands now."


def snapshot_of(state: CardState | None) -> Snapshot:
    if state is None:
        return Snapshot()
    return Snapshot(state.state, state.step, state.stability, state.difficulty, state.due, state.last_review)


# The queries run for every card shown or rated are built once, with bound parameters, on the
# tables rather than the ORM classes: building a statement costs more than running it on
# SQLite, and the ORM's layer over a plain query about as much again.
_CARDS, _STATES, _REVIEWS = cast(Table, Card.__table__), cast(Table, CardState.__table__), cast(Table, Review.__table__)
cards, states, reviews = _CARDS.c, _STATES.c, _REVIEWS.c
# Ratings write the state with plain statements, which leave the session's copy alone: always reload it.
_STATE = (
    select(CardState)
    .where(CardState.user_id == bindparam("user_id"), CardState.card_id == bindparam("card_id"))
    .execution_options(populate_existing=True)
)
_ITEMS = (
    select(cards.id, cards.position, states.state, states.step, states.stability, states.difficulty)
    .add_columns(states.due, states.last_review, states.suspended, states.buried_until, states.version)
    .select_from(_CARDS.outerjoin(_STATES, and_(states.card_id == cards.id, states.user_id == bindparam("user_id"))))
    .where(cards.deck_id == bindparam("deck_id"), cards.retired_at.is_(None))
)
# The rows the queue can use today, filtered by the database: a student's deck is mostly
# reviews that are not due, and a new student's mostly new cards past the day's limit.
# queue.build applies the same rules again to what is left, so this only saves work.
_AVAILABLE = and_(
    states.suspended.is_not(True),
    or_(states.buried_until.is_(None), states.buried_until <= bindparam("now")),
)
_SEEN_TODAY = _ITEMS.where(
    _AVAILABLE,
    or_(
        states.state.in_((LEARNING, RELEARNING)),
        and_(states.state == REVIEW, states.due < bindparam("day_end")),
    ),
)
_FIRST_NEW = (
    _ITEMS.where(_AVAILABLE, or_(states.state.is_(None), states.state == NEW))
    .order_by(cards.position)
    .limit(bindparam("new_left"))
    .subquery()
)
_DUE_ITEMS = union_all(_SEEN_TODAY, select(_FIRST_NEW))
_DONE = (
    select(reviews.state_before, func.count())
    .where(
        reviews.user_id == bindparam("user_id"), reviews.reviewed_at >= bindparam("since"), reviews.undone_at.is_(None)
    )
    .group_by(reviews.state_before)
)
_DONE_IN_DECK = _DONE.where(reviews.deck_id == bindparam("deck_id"))
_REPLAY = select(reviews.id, reviews.card_id, reviews.deck_id, reviews.after).where(
    reviews.user_id == bindparam("user_id"), reviews.review_key == bindparam("key")
)
# What a rating reads: the card's deck and the student's state of it (none for a new card).
_CONTEXT = (
    select(cards.deck_id, states.id, states.version, states.suspended, states.state, states.step)
    .add_columns(states.stability, states.difficulty, states.due, states.last_review)
    .select_from(_CARDS.outerjoin(_STATES, and_(states.card_id == cards.id, states.user_id == bindparam("user_id"))))
    .where(cards.id == bindparam("card_id"), cards.retired_at.is_(None))
)
_MOVE_STATE = update(_STATES).where(states.id == bindparam("state_id"), states.version == bindparam("planned"))
_TAKE_BACK = delete(_REVIEWS).where(reviews.id == bindparam("review_id"))


@cache
def _rating_inserts(insert: Any) -> tuple[Any, Any]:
    """A rating's review row and first state row: each inserts nothing on a unique conflict."""
    return (
        insert(_REVIEWS).on_conflict_do_nothing().returning(reviews.id),
        insert(_STATES).on_conflict_do_nothing().returning(states.id),
    )


def _live_card(card_id: str, session: Session) -> Card:
    card = session.get(Card, card_id)
    if card is None or card.retired_at is not None:
        raise NotFound(f"No card '{card_id}'.")
    return card


def _state(user_id: int, card_id: str, session: Session) -> CardState | None:
    return session.scalar(_STATE, {"user_id": user_id, "card_id": card_id})


def deck_items(user_id: int, deck_id: str, *, session: Session) -> list[tuple[q.Item, int]]:
    """Every live card of the deck as the queue sees it, with the version of the student's state (0: none).

    Plain columns rather than ORM objects: this runs on every card shown.
    """
    return _items(session.execute(_ITEMS, {"user_id": user_id, "deck_id": deck_id}).all())


def due_items(
    user_id: int, deck_id: str, *, session: Session, now: datetime, prefs: Prefs, done: q.Done
) -> list[tuple[q.Item, int]]:
    """The cards of the deck the queue can still show today: what ``queue.build`` needs, no more.

    Learning and relearning cards, reviews due before the study day ends and the first new
    cards within the day's limit, none of them suspended or buried.
    """
    params = {
        "user_id": user_id, "deck_id": deck_id, "now": now, "day_end": next_day_start(now, prefs.time_zone),
        "new_left": max(0, prefs.new_per_day - done.new),
    }  # fmt: skip
    return _items(session.execute(_DUE_ITEMS, params).all())


def _items(rows: Any) -> list[tuple[q.Item, int]]:
    out = []
    for cid, pos, state, step, stability, difficulty, due, last, suspended, buried, version in rows:
        snap = Snapshot() if state is None else Snapshot(state, step, stability, difficulty, due, last)
        out.append((q.Item(cid, pos, snap, bool(suspended), buried), version or 0))
    return out


def done_today(user_id: int, deck_id: str | None, since: datetime, *, session: Session) -> q.Done:
    rows = session.execute(_DONE_IN_DECK if deck_id is not None else _DONE,
                           {"user_id": user_id, "since": since, "deck_id": deck_id})  # fmt: skip
    by_state: dict[int, int] = {state: n for state, n in rows.all()}
    return q.Done(new=by_state.get(NEW, 0), reviews=by_state.get(REVIEW, 0))


@dataclass(frozen=True)
class StudyView:
    deck: Deck
    counts: q.Counts
    card: Card | None
    kind: str | None
    snap: Snapshot
    version: int
    intervals: dict[int, timedelta]
    comes_back_at: datetime | None  # when nothing is due now but a learning card is later today


def study_view(
    user_id: int, deck_id: str, *, session: Session, now: datetime, with_intervals: bool = True
) -> StudyView:
    """The card to show now, the counts left today and (for the page) each button's interval."""
    deck = session.get(Deck, deck_id)
    if deck is None or deck.retired_at is not None:
        raise NotFound(f"No deck '{deck_id}'.")
    prefs = get_prefs(user_id, session=session)
    done = done_today(user_id, deck_id, day_start(now, prefs.time_zone), session=session)
    pairs = due_items(user_id, deck_id, session=session, now=now, prefs=prefs, done=done)
    items = [i for i, _ in pairs]
    built = q.build(items, done, prefs, now)
    if built.next_card is None:
        later = q.waiting_learning(items, prefs, now)
        return StudyView(deck, built.counts, None, None, Snapshot(), 0, {}, later)
    item, version = next(p for p in pairs if p[0].card_id == built.next_card)
    card = session.get(Card, built.next_card)
    assert card is not None
    intervals = previews(item.snap, now, prefs) if with_intervals else {}
    return StudyView(deck, built.counts, card, built.next_kind, item.snap, version, intervals, None)


@dataclass(frozen=True)
class Rated:
    card_id: str
    deck_id: str
    snap: Snapshot
    review_id: int


@dataclass(frozen=True)
class RatingPlan:
    """A rating worked out against the state read (``version``), to be written by ``apply_rating``."""

    user_id: int
    card_id: str
    deck_id: str
    raw: int
    review_key: str | None
    duration_ms: int | None
    now: datetime
    state_id: int | None  # None: the student has no state row for this card yet
    version: int
    before: Snapshot
    after: Snapshot
    course_id: str = DEFAULT_COURSE  # the course the review counts in (the schedule is the student's own)


def _replay(user_id: int, card_id: str, key: str, session: Session) -> Rated | None:
    found = session.execute(_REPLAY, {"user_id": user_id, "key": key}).first()
    if found is None:
        return None
    if found.card_id != card_id:
        raise Conflict(f"review_id '{key}' was already used for card '{found.card_id}'; send a new one.")
    return Rated(found.card_id, found.deck_id, Snapshot.from_dict(found.after), found.id)


def plan_rating(
    user_id: int, card_id: str, raw: int, *, session: Session, now: datetime, duration_ms: int | None = None,
    review_key: str | None = None, expected_version: int | None = None, fuzz: bool = True,
    course_id: str = DEFAULT_COURSE,
) -> Rated | RatingPlan:  # fmt: skip
    """Check a 1-5 rating and reschedule the card with FSRS, reading only (a reader session will do).

    Returns the first result when ``review_key`` was already recorded, else the plan for
    ``apply_rating``. A stale ``expected_version`` raises Conflict.
    """
    if raw not in range(1, 6):
        raise InvalidInput(f"Rating must be 1 to 5, got {raw}.", field="rating")
    if review_key is not None and (done := _replay(user_id, card_id, review_key, session)):
        return done
    found = session.execute(_CONTEXT, {"user_id": user_id, "card_id": card_id}).first()
    if found is None:
        raise NotFound(f"No card '{card_id}'.")
    deck_id, state_id, version, suspended, *columns = found
    version = version or 0
    if expected_version is not None and expected_version != version:
        raise Conflict(REFRESH)
    if suspended:
        raise Conflict("This card is suspended; unsuspend it in the browser to study it again.")
    before = Snapshot() if state_id is None else Snapshot(*columns)
    after = review(before, raw, now, scheduler(get_prefs(user_id, session=session), fuzz=fuzz), duration_ms)
    return RatingPlan(
        user_id, card_id, deck_id, raw, review_key, duration_ms, now, state_id, version, before, after, course_id
    )


def apply_rating(plan: RatingPlan, *, session: Session) -> Rated:
    """Write a planned rating: one review row and the card's new state, or nothing.

    The review goes in first: its unique constraints (one review per card and state version,
    one per ``review_key``) let one of two racing ratings in, and the state is then changed
    only if it is still the version planned against. A rating that loses either race raises
    Conflict with nothing written, unless it is a replay of a recorded ``review_key``, which
    returns the first result.
    """
    before, after, now = plan.before, plan.after, plan.now
    add_review, add_state = _rating_inserts(insert_for(session))
    entry = {
        "user_id": plan.user_id, "card_id": plan.card_id, "deck_id": plan.deck_id, "review_key": plan.review_key,
        "raw_rating": plan.raw, "rating": int(map_rating(plan.raw)), "reviewed_at": now,
        "duration_ms": plan.duration_ms, "state_before": before.state, "version_before": plan.version,
        "before": before.to_dict(), "after": after.to_dict(), "undone_at": None, "course_id": plan.course_id,
    }  # fmt: skip
    review_id = session.scalar(add_review, entry)
    if review_id is None:
        if plan.review_key is not None and (done := _replay(plan.user_id, plan.card_id, plan.review_key, session)):
            return done
        raise Conflict(REFRESH)
    values: dict[str, Any] = {
        "state": after.state, "step": after.step, "stability": after.stability, "difficulty": after.difficulty,
        "due": after.due, "last_review": after.last_review, "buried_until": None, "version": plan.version + 1,
        "updated_at": now,
    }  # fmt: skip
    if plan.state_id is None:
        first = {"user_id": plan.user_id, "card_id": plan.card_id, "deck_id": plan.deck_id, "suspended": False}
        written = session.scalar(add_state, first | values) is not None
    else:
        moved = session.execute(_MOVE_STATE, {"state_id": plan.state_id, "planned": plan.version} | values)
        written = moved.rowcount == 1  # type: ignore[attr-defined]
    if not written:
        # The state moved on (an undo, a bury) after the plan read it. The review row is this
        # transaction's own and was never seen by anyone: take it back, so the caller can go on.
        session.execute(_TAKE_BACK, {"review_id": review_id})
        raise Conflict(REFRESH)
    return Rated(plan.card_id, plan.deck_id, after, review_id)


def rate(
    user_id: int, card_id: str, raw: int, *, session: Session, now: datetime, duration_ms: int | None = None,
    review_key: str | None = None, expected_version: int | None = None, fuzz: bool = True,
    course_id: str = DEFAULT_COURSE,
) -> Rated:  # fmt: skip
    """Record a 1-5 rating of a card and reschedule it with FSRS, in one session.

    The same ``review_key`` twice records one review (the second call returns the
    first's result). A stale ``expected_version``, or a rating that races another
    one of the same card, raises Conflict and records nothing. Busy callers plan on a
    reader and apply in a short write transaction instead (``plan_rating``, ``apply_rating``).
    """
    planned = plan_rating(user_id, card_id, raw, session=session, now=now, duration_ms=duration_ms,
                          review_key=review_key, expected_version=expected_version, fuzz=fuzz,
                          course_id=course_id)  # fmt: skip
    return planned if isinstance(planned, Rated) else apply_rating(planned, session=session)


def _compare_and_set(state: CardState, version: int, values: dict[str, Any], session: Session) -> None:
    result = session.execute(
        update(CardState).where(CardState.id == state.id, CardState.version == version).values(**values)
    )
    if result.rowcount != 1:  # type: ignore[attr-defined]
        raise Conflict(REFRESH)
    session.expire(state)


def undo(
    user_id: int,
    *,
    session: Session,
    now: datetime,
    deck_id: str | None = None,
    card_ids: Collection[str] | None = None,
) -> str:
    """Undo the student's last review (in ``deck_id``, of one of ``card_ids``, if given); returns the card's id.

    The review stays in the log, marked undone; the card gets back the state it had.
    """
    query = select(Review).where(Review.user_id == user_id, Review.undone_at.is_(None))
    if deck_id is not None:
        query = query.where(Review.deck_id == deck_id)
    if card_ids is not None:
        query = query.where(Review.card_id.in_(card_ids))
    last = session.scalar(query.order_by(Review.id.desc()).limit(1))
    if last is None:
        raise Conflict("There is no review to undo.")
    state = _state(user_id, last.card_id, session)
    assert state is not None  # a review always leaves a state row
    before = Snapshot.from_dict(last.before)
    values: dict[str, Any] = {
        "state": before.state, "step": before.step, "stability": before.stability, "difficulty": before.difficulty,
        "due": before.due, "last_review": before.last_review, "version": state.version + 1, "updated_at": now,
    }  # fmt: skip
    _compare_and_set(state, state.version, values, session)
    marked = session.execute(
        update(Review).where(Review.id == last.id, Review.undone_at.is_(None)).values(undone_at=now)
    )
    if marked.rowcount != 1:  # type: ignore[attr-defined]
        raise Conflict(REFRESH)
    return last.card_id


def _flag(user_id: int, card_id: str, session: Session, now: datetime, **values: Any) -> None:
    card = _live_card(card_id, session)
    state = _state(user_id, card_id, session)
    if state is None:
        state = CardState(user_id=user_id, card_id=card_id, deck_id=card.deck_id, state=NEW, version=0)
        session.add(state)
        session.flush()
    _compare_and_set(state, state.version, {**values, "version": state.version + 1, "updated_at": now}, session)


def bury(user_id: int, card_id: str, *, session: Session, now: datetime) -> None:
    """Hide the card until the student's next study day (4 am local)."""
    tz = get_prefs(user_id, session=session).time_zone
    _flag(user_id, card_id, session, now, buried_until=next_day_start(now, tz))


def set_suspended(user_id: int, card_id: str, suspended: bool, *, session: Session, now: datetime) -> None:
    """Suspend a card (kept out of every queue) or bring it back."""
    _flag(user_id, card_id, session, now, suspended=suspended)


def card_status(user_id: int, card_id: str, *, session: Session) -> tuple[Card, CardState | None]:
    return _live_card(card_id, session), _state(user_id, card_id, session)


def cards_due(user_id: int, *, session: Session, now: datetime) -> int:
    """How many cards the student has left to study today, over every deck (for the dashboard)."""
    prefs: Prefs = get_prefs(user_id, session=session)
    since = day_start(now, prefs.time_zone)
    total = 0
    for deck_id in session.scalars(select(Deck.id).where(Deck.retired_at.is_(None))):
        done = done_today(user_id, deck_id, since, session=session)
        items = [i for i, _ in due_items(user_id, deck_id, session=session, now=now, prefs=prefs, done=done)]
        total += q.build(items, done, prefs, now).counts.total
    return total
