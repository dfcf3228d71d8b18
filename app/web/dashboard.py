"""The dashboard: what a signed-in student should do next, in order.

An attempt in progress (resume at its first unanswered question), cards due today and the
cards of missed quiz questions, the next lab on the path through the labs, then recent results;
and the courses the student is in (the page names the one it is in, and lists them when there are several).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from app.accounts.models import AuthSession, User
from app.content.records import Deck, Quiz
from app.courses import extensions
from app.courses.service import Membership, memberships
from app.exercises.progress import SolvedPart, recent_solved_parts
from app.flashcards import missed
from app.flashcards import study as flashcards
from app.labs import catalog, listing
from app.labs.models import Submission
from app.quizzes import attempts
from app.quizzes.models import QuizAttempt

RECENT = 5
NEW_VISIT = timedelta(hours=3)  # an account younger than this, never signed in again, is on its first visit
SIGN_UP_SESSION = timedelta(minutes=1)  # the session that sign-up opens starts within this of the account


@dataclass(frozen=True)
class OpenAttempt:
    attempt_id: int
    quiz_title: str
    answered: int
    total: int
    resume_number: int  # the first unanswered question (1-based), else the last
    seconds_left: int | None

    @property
    def url(self) -> str:
        return f"/quizzes/attempts/{self.attempt_id}?q={self.resume_number}"


@dataclass(frozen=True)
class LabToDo:
    """The one lab to do next (``app.labs.path``), and how far the student is along the path."""

    next: listing.PathRow | None  # None once every lab is done
    in_flight: bool  # a submission to it is queued or being graded
    done: int
    total: int


@dataclass(frozen=True)
class QuizScore:
    attempt_id: int
    quiz_title: str
    score: int
    max_score: int
    percent: float
    passed: bool | None
    submitted_at: datetime


@dataclass(frozen=True)
class LabScore:
    submission_id: int
    lab_id: str
    title: str
    score: float | None  # points to one decimal
    max_score: int | None
    status: str
    submitted_at: datetime


@dataclass(frozen=True)
class Dashboard:
    returning: bool  # back after an earlier visit (not the visit that created the account)
    open_attempts: list[OpenAttempt]
    cards_due: int
    decks: list[tuple[str, str]]  # (id, title) of the decks to study
    missed_cards: int  # cards of missed quiz questions not reviewed since
    next_lab: LabToDo | None  # None when there are no labs
    quiz_scores: list[QuizScore]
    lab_scores: list[LabScore]
    exercise_parts: list[SolvedPart] = field(default_factory=list)
    courses: list[Membership] = field(default_factory=list)  # the student's live courses

    def course(self, course_id: str) -> Membership | None:
        """The student's membership of ``course_id`` (the request's course), if they are in it."""
        return next((m for m in self.courses if m.course.id == course_id), None)

    @property
    def has_results(self) -> bool:
        return bool(self.quiz_scores or self.lab_scores or self.exercise_parts)


def _open_attempts(user_id: int, session: Session, now: datetime) -> list[OpenAttempt]:
    rows = session.scalars(
        select(QuizAttempt)
        .where(QuizAttempt.user_id == user_id, QuizAttempt.submitted_at.is_(None))
        .order_by(QuizAttempt.started_at.desc())
    ).all()
    out = []
    for row in rows:
        if row.deadline is not None and now >= row.deadline:
            continue  # closed at its next touch; it shows under recent results then
        quiz = session.get(Quiz, row.quiz_id)
        answered = set(attempts.choices_of(row, session=session))
        left = None if row.deadline is None else max(0, int((row.deadline - now).total_seconds()))
        title = quiz.title if quiz else row.quiz_id
        resume = attempts.resume_number(row.question_ids, answered)
        done = len(answered & set(row.question_ids))
        out.append(OpenAttempt(row.id, title, done, len(row.question_ids), resume, left))
    return out


def _labs(user_id: int, session: Session, course_id: str | None) -> tuple[LabToDo | None, list[LabScore]]:
    labs = catalog.all_labs(session)
    subs = session.scalars(
        select(Submission).where(Submission.user_id == user_id).order_by(Submission.submitted_at.desc())
    ).all()
    assigned = extensions.assigned(course_id, "lab", session=session) if course_id else None
    on_path = listing.lab_path(user_id, session=session, assigned=assigned)
    step = on_path.suggested
    flying = step is not None and any(s.lab_id == step.lab.id and not s.done for s in subs)
    to_do = LabToDo(step, flying, on_path.done, len(on_path.rows)) if on_path.rows else None
    titles = {lab_id: lab.spec.title for lab_id, lab in labs.items()}
    scores = [
        # A score only for a run that could be judged; otherwise the label says why it could not run.
        LabScore(
            s.id,
            s.lab_id,
            titles.get(s.lab_id, s.lab_id),
            s.score if s.outcome.scored else None,
            s.max_score,
            s.outcome.text,
            s.submitted_at,
        )
        for s in subs[:RECENT]
    ]
    return to_do, scores


def _quiz_scores(user_id: int, session: Session) -> list[QuizScore]:
    rows = session.execute(
        select(QuizAttempt, Quiz.title)
        .join(Quiz, Quiz.id == QuizAttempt.quiz_id)
        .where(QuizAttempt.user_id == user_id, QuizAttempt.result.is_not(None))
        .order_by(QuizAttempt.submitted_at.desc(), QuizAttempt.id.desc())
        .limit(RECENT)
    ).all()
    return [
        QuizScore(a.id, title, r["score"], r["max_score"], r["percent"], r.get("passed"), a.submitted_at)
        for a, title in rows
        if (r := a.result) is not None and a.submitted_at is not None
    ]


def _returning(user_id: int, session: Session, now: datetime) -> bool:
    """Back after an earlier visit: signed in again since signing up, or the account is older than a visit."""
    created = session.scalar(select(User.created_at).where(User.id == user_id))
    if created is None or now - created >= NEW_VISIT:
        return True
    later = exists().where(AuthSession.user_id == user_id, AuthSession.created_at >= created + SIGN_UP_SESSION)
    return bool(session.scalar(select(later)))


def build(user_id: int, *, session: Session, now: datetime, course_id: str | None = None) -> Dashboard:
    """Everything the dashboard shows a student, read-only (an expired attempt is left for its next touch).

    ``course_id``: the course they are in; its labs are the path's (None: every lab).
    """
    next_lab, lab_scores = _labs(user_id, session, course_id)
    decks = [(d.id, d.title) for d in session.scalars(select(Deck).where(Deck.retired_at.is_(None)).order_by(Deck.id))]
    return Dashboard(
        returning=_returning(user_id, session, now),
        open_attempts=_open_attempts(user_id, session, now),
        cards_due=flashcards.cards_due(user_id, session=session, now=now),
        decks=decks,
        missed_cards=len(missed.pending_cards(user_id, session=session, now=now)),
        next_lab=next_lab,
        quiz_scores=_quiz_scores(user_id, session),
        lab_scores=lab_scores,
        exercise_parts=recent_solved_parts(user_id, session=session),
        courses=memberships(user_id, session=session),
    )
