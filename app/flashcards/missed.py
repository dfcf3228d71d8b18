"""Studying the flashcards of missed quiz questions.

A question names the cards that teach it (``cards:`` in its quiz file). After an attempt, the
cards of the questions the student got wrong or left blank are *flagged* at the moment the
attempt was submitted; a flagged card is *pending* until the student reviews it after that
moment. Reviews here are ordinary ratings (``study.rate``): the same FSRS scheduler, the same
review log, so a card rated Again comes back in the normal queue like any other.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.content.records import Card, Deck, Question
from app.errors import NotFound
from app.flashcards.models import CardState, Review
from app.flashcards.preferences import get_prefs
from app.flashcards.scheduling import Snapshot, previews
from app.quizzes.models import QuizAttempt
from app.quizzes.service import cards_to_review, hidden_keys


def pending(flags: list[tuple[str, datetime]], last_reviews: dict[str, datetime]) -> list[str]:
    """The flagged cards not reviewed since they were flagged, in the order given (pure)."""
    out: list[str] = []
    for card_id, flagged_at in flags:
        reviewed = last_reviews.get(card_id)
        if (reviewed is None or reviewed < flagged_at) and card_id not in out:
            out.append(card_id)
    return out


def attempt_flags(attempt_id: int, user_id: int, *, session: Session, now: datetime) -> list[tuple[str, datetime]]:
    """The cards of the questions missed in one submitted attempt, in question order, flagged at its submission."""
    # Read only (a GET page calls this): an open attempt, even one past its deadline, has no result yet.
    attempt = session.get(QuizAttempt, attempt_id)
    if attempt is None or attempt.user_id != user_id:
        raise NotFound(f"No attempt {attempt_id} of yours.")
    if attempt.result is None or attempt.submitted_at is None:
        return []
    if hidden_keys({attempt.quiz_id}, session=session, now=now):
        return []  # which questions were missed is part of the key the quiz's policy hides
    missed = [m["id"] for m in attempt.result.get("marks", []) if not m["correct"]]
    cards_of = dict(session.execute(select(Question.id, Question.card_ids).where(Question.id.in_(missed))).all())
    return [(card, attempt.submitted_at) for qid in missed for card in (cards_of.get(qid) or [])]


def _flags(user_id: int, attempt_id: int | None, session: Session, now: datetime) -> list[tuple[str, datetime]]:
    if attempt_id is not None:
        return attempt_flags(attempt_id, user_id, session=session, now=now)
    return [(c.card_id, c.flagged_at) for c in cards_to_review(user_id, session=session, now=now)]


def _last_reviews(user_id: int, card_ids: set[str], session: Session) -> dict[str, datetime]:
    rows = session.execute(
        select(Review.card_id, func.max(Review.reviewed_at))
        .where(Review.user_id == user_id, Review.card_id.in_(card_ids), Review.undone_at.is_(None))
        .group_by(Review.card_id)
    ).all()
    return {card_id: at for card_id, at in rows}


def _studyable(user_id: int, card_ids: list[str], session: Session) -> list[Card]:
    """Live cards among ``card_ids`` that the student has not suspended, in the order given."""
    if not card_ids:
        return []
    live = {c.id: c for c in session.scalars(select(Card).where(Card.id.in_(card_ids), Card.retired_at.is_(None)))}
    suspended = set(
        session.scalars(
            select(CardState.card_id).where(
                CardState.user_id == user_id, CardState.card_id.in_(card_ids), CardState.suspended.is_(True)
            )
        )
    )
    return [live[c] for c in card_ids if c in live and c not in suspended]


def pending_cards(user_id: int, *, session: Session, now: datetime, attempt_id: int | None = None) -> list[Card]:
    """Cards of missed questions still to study: one attempt's, or every attempt's (newest first)."""
    flags = _flags(user_id, attempt_id, session, now)
    last = _last_reviews(user_id, {c for c, _ in flags}, session)
    return _studyable(user_id, pending(flags, last), session)


@dataclass(frozen=True)
class FocusView:
    """The next card of a missed-questions session, with what the reviewer shows for it."""

    card: Card | None
    deck: Deck | None
    left: int
    snap: Snapshot
    version: int
    intervals: dict[int, timedelta]
    deck_ids: tuple[str, ...]  # where the normal queue continues


def focus_view(user_id: int, *, session: Session, now: datetime, attempt_id: int | None = None) -> FocusView:
    """The first pending card, its state and each button's interval; ``card`` is None when all are studied."""
    if attempt_id is not None and attempt_id <= 0:
        raise NotFound(f"No attempt {attempt_id} of yours.")
    cards = pending_cards(user_id, session=session, now=now, attempt_id=attempt_id)
    decks = tuple(session.scalars(select(Deck.id).where(Deck.retired_at.is_(None)).order_by(Deck.id)))
    if not cards:
        return FocusView(None, None, 0, Snapshot(), 0, {}, decks)
    card = cards[0]
    state = session.scalar(select(CardState).where(CardState.user_id == user_id, CardState.card_id == card.id))
    snap = (
        Snapshot()
        if state is None
        else Snapshot(state.state, state.step, state.stability, state.difficulty, state.due, state.last_review)
    )
    intervals = previews(snap, now, get_prefs(user_id, session=session))
    deck = session.get(Deck, card.deck_id)
    return FocusView(card, deck, len(cards), snap, state.version if state else 0, intervals, decks)
