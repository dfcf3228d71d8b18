"""Test data builders."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.accounts.models import Role, User
from app.accounts.service import hasher
from app.content.records import Question, Quiz
from app.courses.access import Place
from app.courses.models import CourseRole, Enrollment
from app.flashcards.models import NEW, REVIEW, CardState, Review
from app.labs.models import Submission, SubmissionStatus
from app.quizzes import scoring
from app.quizzes.attempts import result_dict
from app.quizzes.models import QuizAccommodation, QuizAnswer, QuizAttempt
from app.web.auth import Principal

PASSWORD = "correct-horse-battery"


@lru_cache(maxsize=8)
def _hash(password: str) -> str:
    # Argon2 is slow on purpose; hash each test password once per run.
    return hasher().hash(password)


def make_user(
    session: Session, username: str, *, role: Role = Role.student, password: str = PASSWORD,
    course: str | None = "default", course_role: CourseRole = CourseRole.student,
) -> User:  # fmt: skip
    """An account, enrolled in ``course`` (None: in none) with ``course_role``; a site admin is in none."""
    user = User(username=username, username_key=username.lower(), password_hash=_hash(password), role=role)
    session.add(user)
    session.flush()
    if course is not None and role != Role.admin:
        session.add(Enrollment(user_id=user.id, course_id=course, role=course_role))
    session.commit()
    return user


def student_principal(user: User) -> Principal:
    """``user`` as a request in the default course, as a student of it, sees them."""
    return Principal.of(user, place=Place("default", CourseRole.student))


def csrf_token(client: TestClient) -> str:
    """The CSRF token a page would embed for this client (fetching a page sets it)."""
    if "ringlab_csrf" not in client.cookies:
        client.get("/signin")
    return client.cookies["ringlab_csrf"]


def sign_in(client: TestClient, username: str, password: str = PASSWORD) -> None:
    response = client.post(
        "/signin", data={"username": username, "password": password, "csrf_token": csrf_token(client)},
        follow_redirects=False,
    )  # fmt: skip
    assert response.status_code == 303, response.text


def api_token(client: TestClient, username: str, password: str = PASSWORD) -> dict[str, str]:
    response = client.post("/api/v1/auth/token", json={"username": username, "password": password})
    assert response.status_code == 200, response.text
    return {"Authorization": f"Bearer {response.json()['access_token']}"}


def make_attempt(
    session: Session,
    user_id: int,
    quiz_id: str,
    *,
    right: int,
    started_at: datetime,
    submitted_at: datetime | None = None,
    commit: bool = True,
    course: str = "default",
) -> QuizAttempt:
    """A submitted attempt (open when ``submitted_at`` is None) that got the first ``right`` questions right.

    Marked with the app's own scoring, so its frozen result is what a real submit would store.
    """
    quiz = session.get(Quiz, quiz_id)
    assert quiz is not None
    questions = list(
        session.scalars(select(Question).where(Question.quiz_id == quiz_id, Question.retired_at.is_(None)))
    )
    order = scoring.question_order([(q.id, q.section_id) for q in questions], quiz.sections)
    by_id = {q.id: q for q in questions}
    choices = {
        qid: by_id[qid].answer
        if n < right
        else next(o["key"] for o in by_id[qid].options if o["key"] != by_id[qid].answer)
        for n, qid in enumerate(order)
    }
    attempt = QuizAttempt(
        user_id=user_id, quiz_id=quiz_id, question_ids=order, seed=1, started_at=started_at, updated_at=started_at,
        course_id=course,
    )  # fmt: skip
    session.add(attempt)
    session.flush()
    for qid, choice in choices.items():
        session.add(QuizAnswer(attempt_id=attempt.id, question_id=qid, choice=choice, answered_at=started_at,
                               correct=None if submitted_at is None else choice == by_id[qid].answer))  # fmt: skip
    if submitted_at is not None:
        result = scoring.score(
            [scoring.Item(q, by_id[q].section_id, by_id[q].answer) for q in order], choices,
            sections=quiz.sections, passing_score=quiz.passing_score, guide=quiz.scoring_guide,
        )  # fmt: skip
        attempt.submitted_at = submitted_at
        attempt.score, attempt.max_score, attempt.passed = result.score, result.max_score, result.passed
        attempt.result = result_dict(result)
    if commit:
        session.commit()
    return attempt


def make_accommodation(
    session: Session,
    user_id: int,
    *,
    multiplier: float = 1.0,
    extra_minutes: int = 0,
    note: str = "",
    granted_by: int | None = None,
    granted_at: datetime = datetime(2026, 3, 1, 9, 0, tzinfo=UTC),
) -> QuizAccommodation:
    """A student's extra time on timed quizzes, as an instructor would grant it."""
    row = QuizAccommodation(
        user_id=user_id, time_multiplier=multiplier, extra_minutes=extra_minutes, note=note,
        granted_by=granted_by, granted_at=granted_at,
    )  # fmt: skip
    session.add(row)
    session.commit()
    return row


def make_submission(
    session: Session,
    user_id: int,
    lab_id: str,
    *,
    score: int | None,
    max_score: int = 10,
    submitted_at: datetime,
    status: SubmissionStatus = SubmissionStatus.graded,
    code: str = "def ring_allreduce(tensor):\n    return tensor\n",
    commit: bool = True,
    course: str = "default",
) -> Submission:
    """A lab submission as a worker would leave it (graded with ``score``, or ``status``)."""
    done = status not in (SubmissionStatus.queued, SubmissionStatus.running)
    submission = Submission(
        user_id=user_id, lab_id=lab_id, code=code, status=status, gpus_needed=0, attempts=1 if done else 0,
        regrades=0, submitted_at=submitted_at, queued_at=submitted_at, max_score=max_score, course_id=course,
        started_at=submitted_at if done else None, finished_at=submitted_at + timedelta(seconds=1) if done else None,
        score=score if done else None,
        verdict={"status": "ok" if status == SubmissionStatus.graded else "runtime_error", "message": "graded",
                 "checks": [], "output": {}} if done else None,
    )  # fmt: skip
    session.add(submission)
    if commit:
        session.commit()
    return submission


def make_reviews(
    session: Session,
    user_id: int,
    deck_id: str,
    card_ids: list[str],
    *,
    ratings: list[int],
    start: datetime,
    due: datetime,
    commit: bool = True,
) -> None:
    """Card states for ``card_ids`` (in review, due at ``due``) and one logged review per rating, a day apart.

    A review's ``state_before`` is review from the second review of a card on, as the scheduler's would be.
    """
    for card_id in card_ids:
        session.add(CardState(user_id=user_id, card_id=card_id, deck_id=deck_id, state=REVIEW, stability=10.0,
                              difficulty=5.0, due=due, last_review=start, version=0, updated_at=start))  # fmt: skip
    for n, rating in enumerate(ratings):
        card_id = card_ids[n % len(card_ids)]
        session.add(
            Review(
                user_id=user_id,
                card_id=card_id,
                deck_id=deck_id,
                raw_rating=rating + 1,
                rating=rating,
                reviewed_at=start + timedelta(days=n // len(card_ids), minutes=n % len(card_ids)),
                state_before=REVIEW if n >= len(card_ids) else NEW,
                version_before=n // len(card_ids),
                before={},
                after={},
            )
        )
    if commit:
        session.commit()
