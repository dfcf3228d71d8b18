"""Studying the flashcards of missed quiz questions.

A question names the cards that teach it (``cards:`` in its quiz file). After an attempt, the
cards of the questions the student got wrong or left blank are *flagged* at the moment the
attempt was submitted; a flagged card is *pending* until the student reviews it after that
moment. Reviews here are ordinary ratings (``study.rate``): the same FSRS scheduler, the same
review log, so a card rated Again comes back in the normal queue like any other. The cards of a
failed lab check (``checks``) are studied the same way. Undo, bury and suspend work as in the
normal queue; undo takes back only a review of one of the session's cards.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from app.content.records import Card, Deck, Question
from app.errors import NotFound
from app.flashcards.checks import FailedCheck, check_flags, failed_check
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
    if hidden_keys({(attempt.quiz_id, attempt.course_id)}, session=session, now=now):
        return []  # which questions were missed is part of the key the quiz's policy hides
    missed = [m["id"] for m in attempt.result.get("marks", []) if not m["correct"]]
    cards_of = dict(session.execute(select(Question.id, Question.card_ids).where(Question.id.in_(missed))).all())
    return [(card, attempt.submitted_at) for qid in missed for card in (cards_of.get(qid) or [])]


@dataclass(frozen=True)
class Focus:
    """Which cards a focused session studies: one attempt's missed questions, one failed lab check's
    (``submission`` and ``check``), or (neither) every missed question's still pending."""

    attempt: int | None = None
    submission: int | None = None
    check: str | None = None

    def fields(self) -> dict[str, str]:
        """The form fields and query parameters that name this session."""
        if self.submission is not None and self.check is not None:
            return {"submission": str(self.submission), "check": self.check}
        return {"attempt": str(self.attempt)} if self.attempt is not None else {}


def _flags(
    user_id: int, attempt_id: int | None, session: Session, now: datetime, failed: FailedCheck | None = None
) -> list[tuple[str, datetime]]:
    if failed is not None:
        return check_flags(failed)
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


def _studyable(user_id: int, card_ids: list[str], session: Session, now: datetime) -> list[Card]:
    """Live cards among ``card_ids`` that the student has neither suspended nor buried, in the order given."""
    if not card_ids:
        return []
    live = {c.id: c for c in session.scalars(select(Card).where(Card.id.in_(card_ids), Card.retired_at.is_(None)))}
    hidden = set(
        session.scalars(
            select(CardState.card_id).where(
                CardState.user_id == user_id,
                CardState.card_id.in_(card_ids),
                or_(CardState.suspended.is_(True), CardState.buried_until > now),
            )
        )
    )
    return [live[c] for c in card_ids if c in live and c not in hidden]


def pending_cards(
    user_id: int, *, session: Session, now: datetime, attempt_id: int | None = None, failed: FailedCheck | None = None
) -> list[Card]:
    """Cards still to study: a failed check's, one attempt's missed questions', or every attempt's (newest first)."""
    flags = _flags(user_id, attempt_id, session, now, failed)
    last = _last_reviews(user_id, {c for c, _ in flags}, session)
    return _studyable(user_id, pending(flags, last), session, now)


def failed_of(user_id: int, focus: Focus, *, session: Session) -> FailedCheck | None:
    """The failed check a session studies, checked to be the student's own; None for missed questions."""
    if focus.submission is None and focus.check is None:
        return None
    if focus.submission is None or focus.check is None:
        raise NotFound("Name both the submission and the check whose cards to study.")
    return failed_check(focus.submission, focus.check, user_id, session=session)


def session_cards(user_id: int, focus: Focus, *, session: Session, now: datetime) -> set[str]:
    """Every card the session flags, studied or not: the cards its undo may take a review of."""
    failed = failed_of(user_id, focus, session=session)
    return {card for card, _ in _flags(user_id, focus.attempt, session, now, failed)}


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
    failed: FailedCheck | None = None  # the lab check the session studies, if it is one's


def focus_view(
    user_id: int, *, session: Session, now: datetime, attempt_id: int | None = None, focus: Focus | None = None
) -> FocusView:
    """The first pending card, its state and each button's interval; ``card`` is None when all are studied."""
    focus = focus or Focus(attempt=attempt_id)
    if focus.attempt is not None and focus.attempt <= 0:
        raise NotFound(f"No attempt {focus.attempt} of yours.")
    failed = failed_of(user_id, focus, session=session)
    cards = pending_cards(user_id, session=session, now=now, attempt_id=focus.attempt, failed=failed)
    decks = tuple(session.scalars(select(Deck.id).where(Deck.retired_at.is_(None)).order_by(Deck.id)))
    if not cards:
        return FocusView(None, None, 0, Snapshot(), 0, {}, decks, failed)
    card = cards[0]
    state = session.scalar(select(CardState).where(CardState.user_id == user_id, CardState.card_id == card.id))
    snap = (
        Snapshot()
        if state is None
        else Snapshot(state.state, state.step, state.stability, state.difficulty, state.due, state.last_review)
    )
    intervals = previews(snap, now, get_prefs(user_id, session=session))
    deck = session.get(Deck, card.deck_id)
    return FocusView(card, deck, len(cards), snap, state.version if state else 0, intervals, decks, failed)
