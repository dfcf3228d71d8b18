"""One student's work as an instructor sees it: quiz attempts, lab submissions, flashcard statistics,
and the student's time accommodation on timed quizzes."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.content.courses import DEFAULT_COURSE
from app.content.records import Deck, Quiz
from app.courses import extensions, policy
from app.courses.service import get_course, require_student_of
from app.errors import NotFound
from app.flashcards import service as flashcards
from app.flashcards.stats import Stats
from app.labs import catalog
from app.labs import hints as lab_hints
from app.labs.models import Submission
from app.quizzes import accommodations
from app.quizzes import attempts as quiz_attempts
from app.quizzes import service as quizzes
from app.quizzes.models import QuizAccommodation, QuizAttempt
from app.quizzes.policy import is_late


@dataclass(frozen=True)
class AttemptRow:
    attempt: QuizAttempt
    quiz_title: str
    late: bool


@dataclass(frozen=True)
class SubmissionRow:
    submission: Submission
    lab_title: str
    late: bool


@dataclass(frozen=True)
class TimedQuiz:
    """A timed quiz's limit and the one this student gets (the same without an accommodation)."""

    title: str
    limit: int
    student_limit: int


@dataclass(frozen=True)
class StudentPage:
    user: User
    attempts: list[AttemptRow]
    submissions: list[SubmissionRow]
    decks: list[tuple[Deck, Stats]]
    accommodation: QuizAccommodation | None = None
    granted_by: str | None = None  # the instructor who granted it, if not the terminal
    timed: list[TimedQuiz] = field(default_factory=list)
    hints: list[lab_hints.HintUse] = field(default_factory=list)  # lab hints revealed, newest first
    extensions: list[extensions.GrantRecord] = field(default_factory=list)  # in this course, newest first
    assessments: list[tuple[str, str]] = field(default_factory=list)  # (quiz:<id> / lab:<id>, title) to extend

    @property
    def accommodation_words(self) -> str:
        """The accommodation in words ("1.5× the time limit + 10 extra minutes"), or ""."""
        return accommodations.describe(self.accommodation) if self.accommodation else ""


@dataclass(frozen=True)
class Granted:
    """A student's time accommodation with the names an instructor reads."""

    student: User
    accommodation: QuizAccommodation
    granted_by: str | None  # None when granted from the terminal


def granted(user_id: int, *, session: Session) -> Granted:
    """The student's time accommodation; NotFound when there is no such student, or none granted."""
    student = get_user(user_id, session=session)
    found = accommodations.get(user_id, session=session)
    if found is None:
        raise NotFound(f"{student.username} has no time accommodation.")
    granter = session.get(User, found.granted_by) if found.granted_by else None
    return Granted(student, found, granter.username if granter else None)


def get_user(user_id: int, *, session: Session) -> User:
    user = session.get(User, user_id)
    if user is None:
        raise NotFound(f"There is no student {user_id}.")
    return user


def student_page(user_id: int, *, session: Session, now: datetime, course_id: str = DEFAULT_COURSE) -> StudentPage:
    """Everything one student of ``course_id`` did there, newest first (at most the 200 latest submissions).

    A student not in the course reads as not found: staff see only their own course's students.
    """
    user = get_user(user_id, session=session)
    require_student_of(user_id, course_id, session=session)
    course = get_course(course_id, session=session)
    grants = extensions.in_force(course_id, None, [user_id], session=session)

    def due(kind: str, item_id: str, own: datetime | None) -> datetime | None:
        assigned = policy.assignment(course.assignments, kind, item_id)
        return policy.terms(assigned, policy.Own(own), grants.get((user_id, f"{kind}:{item_id}"))).due_at

    quizzes_by_id = {q.id: q for q in session.scalars(select(Quiz))}
    attempts = [
        AttemptRow(
            a,
            quizzes_by_id[a.quiz_id].title,
            is_late(a.submitted_at, due("quiz", a.quiz_id, quizzes_by_id[a.quiz_id].due_at)),
        )
        for a in session.scalars(
            select(QuizAttempt)
            .where(QuizAttempt.user_id == user_id, QuizAttempt.course_id == course_id)
            .order_by(QuizAttempt.started_at.desc(), QuizAttempt.id.desc())
        )
    ]
    labs = catalog.all_labs(session)
    submissions = []
    for s in session.scalars(
        select(Submission)
        .where(Submission.user_id == user_id, Submission.course_id == course_id)
        .order_by(Submission.id.desc())
        .limit(200)
    ):
        lab = labs.get(s.lab_id)
        lab_due = due("lab", s.lab_id, lab.spec.due if lab else None)
        submissions.append(SubmissionRow(s, lab.spec.title if lab else s.lab_id, is_late(s.submitted_at, lab_due)))
    assessments = [
        (f"quiz:{q.id}", q.title)
        for q in sorted(quizzes_by_id.values(), key=lambda q: q.position)
        if q.retired_at is None and policy.assignment(course.assignments, "quiz", q.id) is not None
    ] + [
        (f"lab:{lab.id}", lab.spec.title)
        for lab in labs.values()
        if policy.assignment(course.assignments, "lab", lab.id) is not None
    ]
    decks = [
        flashcards.deck_stats(user_id, deck_id, session=session, now=now)
        for deck_id in session.scalars(select(Deck.id).where(Deck.retired_at.is_(None)).order_by(Deck.position))
    ]
    accommodation = accommodations.get(user_id, session=session)
    granter = granted(user_id, session=session).granted_by if accommodation else None
    timed = []
    for quiz in sorted(quizzes_by_id.values(), key=lambda q: q.position):
        if quiz.time_limit_minutes and quiz.retired_at is None:
            mine = accommodations.student_limit(quiz.time_limit_minutes, user_id, session=session)
            timed.append(TimedQuiz(quiz.title, quiz.time_limit_minutes, mine or quiz.time_limit_minutes))
    used = lab_hints.usage(user_id, labs, session=session)
    history = extensions.history(course_id, user_id, session=session)
    return StudentPage(user, attempts, submissions, decks, accommodation, granter, timed, used, history, assessments)


def attempt_for_instructor(
    attempt_id: int, *, session: Session, now: datetime, course_id: str | None = None
) -> quizzes.ResultPage:
    """A student's submitted attempt made in ``course_id`` (None: any course), read-only, with the key
    (an open one has no result yet)."""
    attempt = session.get(QuizAttempt, attempt_id)
    if attempt is None or (course_id is not None and attempt.course_id != course_id):
        raise NotFound(f"There is no quiz attempt {attempt_id}.")
    if attempt.result is None:
        raise quiz_attempts.AttemptClosed("This attempt is still open: it has no result yet.")
    student = get_user(attempt.user_id, session=session)
    page = quizzes.result_page(attempt, session=session, now=now, reviewer=True)
    return replace(page, key_shown=True, student=student.username)
