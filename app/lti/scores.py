"""The score that counts, as the gradebook counts it: a student's best submitted quiz attempt, their best
graded lab submission, in the course (late ones included where the course accepts them)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.labs.models import SCORED, Submission
from app.quizzes.models import QuizAttempt


@dataclass(frozen=True)
class Counted:
    score: float
    maximum: float
    started_at: datetime | None
    submitted_at: datetime | None


def counted(resource: str, user_id: int, course_id: str, *, session: Session) -> Counted | None:
    """The row that counts for ``resource`` ("quiz:<id>" or "lab:<id>"); None before one is scored."""
    kind, _, item = resource.partition(":")
    if kind == "quiz":
        A = QuizAttempt
        attempt = session.scalars(
            select(A)
            .where(A.user_id == user_id, A.quiz_id == item, A.course_id == course_id, A.submitted_at.is_not(None))
            .order_by(A.score.desc().nulls_last(), A.submitted_at)
            .limit(1)
        ).first()
        if attempt is None or attempt.score is None:
            return None
        return Counted(float(attempt.score), float(attempt.max_score or 0), attempt.started_at, attempt.submitted_at)
    if kind == "lab":
        S = Submission
        sub = session.scalars(
            select(S)
            .where(S.user_id == user_id, S.lab_id == item, S.course_id == course_id, S.status.in_(SCORED))
            .order_by(S.score.desc().nulls_last(), S.submitted_at)
            .limit(1)
        ).first()
        if sub is None or sub.score is None:
            return None
        return Counted(float(sub.score), float(sub.max_score or 0), sub.started_at, sub.submitted_at)
    return None
