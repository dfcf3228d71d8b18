"""Studying a student's own cards: the same queue rules and FSRS scheduler as a deck's.

The pure parts are shared (``queue.build``, ``scheduling.review``); only the storage differs,
since a personal card holds its own state. Every change bumps ``PersonalCard.version`` with a
compare-and-set update, and the unique (card, version_before) of the review log lets only one
of two racing ratings in, as in ``study``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.errors import Conflict, InvalidInput
from app.flashcards import queue as q
from app.flashcards.models import NEW, REVIEW, PersonalCard, PersonalReview
from app.flashcards.personal import MyDeck, get_card
from app.flashcards.preferences import get_prefs
from app.flashcards.scheduling import Snapshot, day_start, map_rating, next_day_start, previews, review, scheduler
from app.flashcards.study import REFRESH


def snapshot(card: PersonalCard) -> Snapshot:
    return Snapshot(card.state, card.step, card.stability, card.difficulty, card.due, card.last_review)


def item(card: PersonalCard) -> q.Item:
    """The card as the queue sees it; its id is the queue's position, so older cards come first."""
    return q.Item(str(card.id), card.id, snapshot(card), card.suspended, card.buried_until)


def done_today(user_id: int, since: datetime, *, session: Session) -> q.Done:
    rows = session.execute(
        select(PersonalReview.state_before, func.count())
        .where(
            PersonalReview.user_id == user_id, PersonalReview.reviewed_at >= since, PersonalReview.undone_at.is_(None)
        )
        .group_by(PersonalReview.state_before)
    ).all()
    by_state: dict[int, int] = {state: n for state, n in rows}
    return q.Done(new=by_state.get(NEW, 0), reviews=by_state.get(REVIEW, 0))


@dataclass(frozen=True)
class MineView:
    """What the study page shows for the student's own cards (as ``study.StudyView`` for a deck)."""

    deck: MyDeck
    counts: q.Counts
    card: PersonalCard | None
    kind: str | None
    snap: Snapshot
    version: int
    intervals: dict[int, timedelta]
    comes_back_at: datetime | None


def study_view(user_id: int, *, session: Session, now: datetime) -> MineView:
    """The card to show now, the counts left today and each button's interval."""
    prefs = get_prefs(user_id, session=session)
    done = done_today(user_id, day_start(now, prefs.time_zone), session=session)
    cards = {str(c.id): c for c in session.scalars(select(PersonalCard).where(PersonalCard.user_id == user_id))}
    items = [item(c) for c in cards.values()]
    built = q.build(items, done, prefs, now)
    if built.next_card is None:
        return MineView(MyDeck(), built.counts, None, None, Snapshot(), 0, {}, q.waiting_learning(items, prefs, now))
    card = cards[built.next_card]
    snap = snapshot(card)
    return MineView(MyDeck(), built.counts, card, built.next_kind, snap, card.version, previews(snap, now, prefs), None)


def _move(card: PersonalCard, values: dict[str, Any], session: Session, now: datetime) -> None:
    moved = session.execute(
        update(PersonalCard)
        .where(PersonalCard.id == card.id, PersonalCard.version == card.version)
        .values(**values, version=card.version + 1, updated_at=now)
    )
    if moved.rowcount != 1:  # type: ignore[attr-defined]
        raise Conflict(REFRESH)
    session.expire(card)


def rate(
    user_id: int, card_id: int, raw: int, *, session: Session, now: datetime, duration_ms: int | None = None,
    expected_version: int | None = None, fuzz: bool = True,
) -> Snapshot:  # fmt: skip
    """Record a 1-5 rating of one of the student's cards and reschedule it with FSRS; returns its new state."""
    if raw not in range(1, 6):
        raise InvalidInput(f"Rating must be 1 to 5, got {raw}.", field="rating")
    card = get_card(user_id, card_id, session=session)
    session.refresh(card)
    if expected_version is not None and expected_version != card.version:
        raise Conflict(REFRESH)
    if card.suspended:
        raise Conflict("This card is suspended; unsuspend it on your cards page to study it again.")
    before = snapshot(card)
    after = review(before, raw, now, scheduler(get_prefs(user_id, session=session), fuzz=fuzz), duration_ms)
    entry = PersonalReview(
        user_id=user_id, card_id=card.id, raw_rating=raw, rating=int(map_rating(raw)), reviewed_at=now,
        duration_ms=duration_ms, state_before=before.state, version_before=card.version, before=before.to_dict(),
        after=after.to_dict(),
    )  # fmt: skip
    try:
        with session.begin_nested():
            session.add(entry)
    except IntegrityError:
        raise Conflict(REFRESH) from None
    values = {
        "state": after.state, "step": after.step, "stability": after.stability, "difficulty": after.difficulty,
        "due": after.due, "last_review": after.last_review, "buried_until": None,
    }  # fmt: skip
    _move(card, values, session, now)
    return after


def undo(user_id: int, *, session: Session, now: datetime) -> int:
    """Undo the student's last review of their own cards; returns the card's id."""
    last = session.scalar(
        select(PersonalReview)
        .where(PersonalReview.user_id == user_id, PersonalReview.undone_at.is_(None))
        .order_by(PersonalReview.id.desc())
        .limit(1)
    )
    if last is None:
        raise Conflict("There is no review to undo.")
    card = get_card(user_id, last.card_id, session=session)
    session.refresh(card)
    before = Snapshot.from_dict(last.before)
    values = {
        "state": before.state, "step": before.step, "stability": before.stability, "difficulty": before.difficulty,
        "due": before.due, "last_review": before.last_review,
    }  # fmt: skip
    _move(card, values, session, now)
    marked = session.execute(
        update(PersonalReview)
        .where(PersonalReview.id == last.id, PersonalReview.undone_at.is_(None))
        .values(undone_at=now)
    )
    if marked.rowcount != 1:  # type: ignore[attr-defined]
        raise Conflict(REFRESH)
    return card.id


def bury(user_id: int, card_id: int, *, session: Session, now: datetime) -> None:
    """Hide the card until the student's next study day (4 am local)."""
    card = get_card(user_id, card_id, session=session)
    tz = get_prefs(user_id, session=session).time_zone
    _move(card, {"buried_until": next_day_start(now, tz)}, session, now)


def set_suspended(user_id: int, card_id: int, suspended: bool, *, session: Session, now: datetime) -> None:
    """Suspend one of the student's cards (kept out of the queue) or bring it back."""
    _move(get_card(user_id, card_id, session=session), {"suspended": suspended}, session, now)
