"""Studying: the queue, rating, undo, bury and suspend, on the database.

Concurrency: every change bumps ``CardState.version`` with a compare-and-set update,
and each review row carries the version it was made against under a unique
constraint, so of two ratings made against the same state only one is recorded; the
other gets ``Conflict`` (409, "refresh"). A client that says which version it saw
(the review page always does) is refused as soon as that version is stale.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, bindparam, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.content.records import Card, Deck
from app.errors import Conflict, InvalidInput, NotFound
from app.flashcards import queue as q
from app.flashcards.models import NEW, REVIEW, CardState, Review
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


# The queries run for every card shown or rated are built once, with bound parameters: building a
# statement costs more than running it on SQLite.
_LIVE_DECK_OF = select(Card.deck_id).where(Card.id == bindparam("card_id"), Card.retired_at.is_(None))
_STATE = select(CardState).where(CardState.user_id == bindparam("user_id"), CardState.card_id == bindparam("card_id"))
_ITEMS = (
    select(Card.id, Card.position, CardState.state, CardState.step, CardState.stability, CardState.difficulty)
    .add_columns(CardState.due, CardState.last_review, CardState.suspended, CardState.buried_until, CardState.version)
    .outerjoin(CardState, and_(CardState.card_id == Card.id, CardState.user_id == bindparam("user_id")))
    .where(Card.deck_id == bindparam("deck_id"), Card.retired_at.is_(None))
)
_DONE = (
    select(Review.state_before, func.count())
    .where(Review.user_id == bindparam("user_id"), Review.reviewed_at >= bindparam("since"), Review.undone_at.is_(None))
    .group_by(Review.state_before)
)
_DONE_IN_DECK = _DONE.where(Review.deck_id == bindparam("deck_id"))
_REPLAY = select(Review).where(Review.user_id == bindparam("user_id"), Review.review_key == bindparam("key"))


def _live_deck_of(card_id: str, session: Session) -> str:
    """The deck of a live card (one light query: rating needs nothing else of the card)."""
    deck_id = session.scalar(_LIVE_DECK_OF, {"card_id": card_id})
    if deck_id is None:
        raise NotFound(f"No card '{card_id}'.")
    return deck_id


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
    rows = session.execute(_ITEMS, {"user_id": user_id, "deck_id": deck_id}).all()
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
    pairs = deck_items(user_id, deck_id, session=session)
    items = [i for i, _ in pairs]
    done = done_today(user_id, deck_id, day_start(now, prefs.time_zone), session=session)
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


def _replay(user_id: int, card_id: str, key: str, session: Session) -> Rated | None:
    found = session.scalar(_REPLAY, {"user_id": user_id, "key": key})
    if found is None:
        return None
    if found.card_id != card_id:
        raise Conflict(f"review_id '{key}' was already used for card '{found.card_id}'; send a new one.")
    return Rated(found.card_id, found.deck_id, Snapshot.from_dict(found.after), found.id)


def rate(
    user_id: int, card_id: str, raw: int, *, session: Session, now: datetime, duration_ms: int | None = None,
    review_key: str | None = None, expected_version: int | None = None, fuzz: bool = True,
) -> Rated:  # fmt: skip
    """Record a 1-5 rating of a card and reschedule it with FSRS.

    The same ``review_key`` twice records one review (the second call returns the
    first's result). A stale ``expected_version``, or a rating that races another
    one of the same card, raises Conflict and records nothing.
    """
    if raw not in range(1, 6):
        raise InvalidInput(f"Rating must be 1 to 5, got {raw}.", field="rating")
    if review_key is not None and (done := _replay(user_id, card_id, review_key, session)):
        return done
    deck_id = _live_deck_of(card_id, session)
    state = _state(user_id, card_id, session)
    version = state.version if state else 0
    if expected_version is not None and expected_version != version:
        raise Conflict(REFRESH)
    if state is not None and state.suspended:
        raise Conflict("This card is suspended; unsuspend it in the browser to study it again.")
    prefs = get_prefs(user_id, session=session)
    before = snapshot_of(state)
    after = review(before, raw, now, scheduler(prefs, fuzz=fuzz), duration_ms)
    values: dict[str, Any] = {
        "state": after.state, "step": after.step, "stability": after.stability, "difficulty": after.difficulty,
        "due": after.due, "last_review": after.last_review, "buried_until": None, "version": version + 1,
        "updated_at": now,
    }  # fmt: skip
    entry = Review(
        user_id=user_id, card_id=card_id, deck_id=deck_id, review_key=review_key, raw_rating=raw,
        rating=int(map_rating(raw)), reviewed_at=now, duration_ms=duration_ms,
        state_before=before.state, version_before=version, before=before.to_dict(), after=after.to_dict(),
    )  # fmt: skip
    try:
        with session.begin_nested():
            if state is None:
                session.add(CardState(user_id=user_id, card_id=card_id, deck_id=deck_id, **values))
            else:
                _compare_and_set(state, version, values, session)
            session.add(entry)
            session.flush()
    except IntegrityError:
        if review_key is not None and (done := _replay(user_id, card_id, review_key, session)):
            return done
        raise Conflict(REFRESH) from None
    return Rated(card_id, deck_id, after, entry.id)


def _compare_and_set(state: CardState, version: int, values: dict[str, Any], session: Session) -> None:
    result = session.execute(
        update(CardState).where(CardState.id == state.id, CardState.version == version).values(**values)
    )
    if result.rowcount != 1:  # type: ignore[attr-defined]
        raise Conflict(REFRESH)
    session.expire(state)


def undo(user_id: int, *, session: Session, now: datetime, deck_id: str | None = None) -> str:
    """Undo the student's last review (in ``deck_id`` if given); returns the card's id.

    The review stays in the log, marked undone; the card gets back the state it had.
    """
    query = select(Review).where(Review.user_id == user_id, Review.undone_at.is_(None))
    if deck_id is not None:
        query = query.where(Review.deck_id == deck_id)
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
        items = [i for i, _ in deck_items(user_id, deck_id, session=session)]
        total += q.build(items, done_today(user_id, deck_id, since, session=session), prefs, now).counts.total
    return total
