"""Class counts for the instructor home: who is active, what was submitted, how the labs go, the grading queue."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import case, distinct, func, select, union
from sqlalchemy.orm import Session

from app.content.courses import DEFAULT_COURSE
from app.courses.models import CourseRole, Enrollment
from app.flashcards.models import Review
from app.labs import catalog, service
from app.labs.models import SCORED, Submission
from app.labs.queue_view import Board
from app.quizzes.models import QuizAttempt


@dataclass(frozen=True)
class LabRate:
    lab_id: str
    title: str
    students: int  # who submitted at least once
    passed: int  # of them, with a graded submission at full marks

    @property
    def rate(self) -> float | None:
        return self.passed / self.students if self.students else None


@dataclass(frozen=True)
class Overview:
    students: int
    active_week: int
    attempts_submitted: int
    attempts_week: int
    submissions_today: int
    cards_reviewed: int
    cards_week: int
    labs: list[LabRate]
    queue: Board  # depth, oldest job, alive workers and their recent rates


def day_start(now: datetime) -> datetime:
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def overview(*, session: Session, now: datetime, course_id: str = DEFAULT_COURSE) -> Overview:
    """The figures at the top of /instructor for one course; "today" is the UTC day, "this week" the last 7 days."""
    week = now - timedelta(days=7)
    students = select(Enrollment.user_id).where(
        Enrollment.course_id == course_id, Enrollment.role == CourseRole.student
    )
    active = union(
        select(QuizAttempt.user_id).where(QuizAttempt.started_at >= week, QuizAttempt.course_id == course_id),
        select(Submission.user_id).where(Submission.submitted_at >= week, Submission.course_id == course_id),
        select(Review.user_id).where(Review.reviewed_at >= week, Review.course_id == course_id),
    ).subquery()
    active_week = session.scalar(select(func.count(distinct(active.c.user_id))).where(active.c.user_id.in_(students)))
    submitted = QuizAttempt.submitted_at.is_not(None) & (QuizAttempt.course_id == course_id)
    attempts_total, attempts_week = session.execute(
        select(func.count(), func.sum(case((QuizAttempt.submitted_at >= week, 1), else_=0))).where(submitted)
    ).one()
    today = session.scalar(
        select(func.count())
        .select_from(Submission)
        .where(Submission.submitted_at >= day_start(now), Submission.course_id == course_id)
    )
    cards_total, cards_week = session.execute(
        select(func.count(), func.sum(case((Review.reviewed_at >= week, 1), else_=0))).where(
            Review.undone_at.is_(None), Review.course_id == course_id
        )
    ).one()
    labs = catalog.all_labs(session)
    full = func.max(case((Submission.status.in_(SCORED), Submission.score), else_=None))
    per_student = (
        select(Submission.lab_id, Submission.user_id, full.label("best"), func.max(Submission.max_score).label("max"))
        .where(Submission.user_id.in_(students), Submission.course_id == course_id)
        .group_by(Submission.lab_id, Submission.user_id)
        .subquery()
    )
    rates = {
        lab_id: (n, int(p or 0))
        for lab_id, n, p in session.execute(
            select(
                per_student.c.lab_id,
                func.count(),
                func.sum(case((per_student.c.best >= per_student.c.max, 1), else_=0)),
            ).group_by(per_student.c.lab_id)
        )
    }
    return Overview(
        students=int(session.scalar(select(func.count()).select_from(students.subquery())) or 0),
        active_week=int(active_week or 0),
        attempts_submitted=int(attempts_total or 0),
        attempts_week=int(attempts_week or 0),
        submissions_today=int(today or 0),
        cards_reviewed=int(cards_total or 0),
        cards_week=int(cards_week or 0),
        labs=[LabRate(lab.id, lab.spec.title, *rates.get(lab.id, (0, 0))) for lab in labs.values()],
        queue=service.board(session=session, now=now),
    )
