"""A small class with histories, built with the factories, for the instructor tests."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.accounts.models import Role, User
from app.content.records import Card, Quiz
from app.labs.models import SubmissionStatus
from tests.factories import make_attempt, make_reviews, make_submission, make_user

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@dataclass
class Klass:
    ada: User
    bob: User
    cyd: User
    prof: User
    due: datetime


@pytest.fixture
def klass(session: Session) -> Klass:
    """ada: two Module 202 attempts (20, then 24 late) and two ring lab submissions (6, 10);
    bob: one Chapter 35 attempt (15/15), a failed lab submission, flashcard reviews; cyd: nothing."""
    due = T0 + timedelta(days=7)
    quiz = session.get(Quiz, "module-202")
    assert quiz is not None
    quiz.due_at = due
    session.commit()
    ada, bob, cyd = (make_user(session, n) for n in ("ada", "bob", "cyd"))
    prof = make_user(session, "prof", role=Role.admin)
    make_attempt(session, ada.id, "module-202", right=20, started_at=T0, submitted_at=T0 + timedelta(minutes=30))
    make_attempt(session, ada.id, "module-202", right=24, started_at=due, submitted_at=due + timedelta(hours=1))
    make_attempt(session, bob.id, "ch35-quiz", right=15, started_at=T0, submitted_at=T0 + timedelta(minutes=20))
    make_submission(session, ada.id, "ring-allreduce", score=6, submitted_at=T0)
    make_submission(session, ada.id, "ring-allreduce", score=10, submitted_at=T0 + timedelta(hours=1))
    make_submission(session, bob.id, "ring-allreduce", score=None, status=SubmissionStatus.failed, submitted_at=T0)
    cards = list(session.scalars(select(Card.id).where(Card.deck_id == "mire-dis-train").order_by(Card.id).limit(4)))
    # 4 first reviews (new), then 4 reviews in the review state: 3 passed, 1 Again.
    make_reviews(
        session, bob.id, "mire-dis-train", cards, ratings=[3, 3, 3, 3, 3, 1, 4, 3], start=T0, due=T0 + timedelta(days=2)
    )
    return Klass(ada, bob, cyd, prof, due)
