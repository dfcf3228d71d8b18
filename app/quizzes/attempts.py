"""An attempt's life: start, save answers, submit (by the student or by the deadline), read back.

Every function takes ``now`` so the deadline can be tested with a controllable clock.
Writes open with an UPDATE of the attempt row: on PostgreSQL that locks the row, so a
save and a submit of the same attempt never interleave. On SQLite writer sessions
begin IMMEDIATE (app.db), so nothing interleaves there either.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import CursorResult, func, or_, select, update
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.content.courses import DEFAULT_COURSE
from app.content.records import Question, Quiz
from app.courses import extensions, policy
from app.db import insert_for
from app.errors import Conflict, InvalidInput, NotFound
from app.lti import outbox
from app.quizzes import accommodations, scoring
from app.quizzes.models import QuizAnswer, QuizAttempt


class AttemptClosed(Conflict):
    """The attempt was submitted (by the student or by its deadline): nothing more can change."""


class DeadlinePassed(AttemptClosed):
    """An answer arrived after the attempt's deadline."""


class QuizClosed(Conflict):
    """The course closes the quiz at its due date (``late: refuse``) and that date has passed."""


class NoAttemptsLeft(Conflict):
    """The student has used every attempt the quiz allows (``max_attempts``)."""


def _quiz(quiz_id: str, *, session: Session) -> Quiz:
    quiz = session.get(Quiz, quiz_id)
    if quiz is None or quiz.retired_at is not None:
        raise NotFound(f"No quiz '{quiz_id}'.")
    return quiz


def questions_of(attempt: QuizAttempt, *, session: Session) -> list[Question]:
    """The attempt's questions, in the order fixed when it started."""
    rows = {q.id: q for q in session.scalars(select(Question).where(Question.id.in_(attempt.question_ids)))}
    return [rows[qid] for qid in attempt.question_ids if qid in rows]


def _own(attempt_id: int, user_id: int, *, session: Session) -> QuizAttempt:
    attempt = session.get(QuizAttempt, attempt_id, populate_existing=True)
    # Someone else's attempt is reported exactly like a missing one.
    if attempt is None or attempt.user_id != user_id:
        raise NotFound(f"No attempt {attempt_id} of yours.")
    return attempt


def _expired(attempt: QuizAttempt, now: datetime) -> bool:
    return attempt.is_open and attempt.deadline is not None and now >= attempt.deadline


def start_attempt(
    quiz_id: str, user_id: int, *, session: Session, now: datetime, course_id: str = DEFAULT_COURSE
) -> tuple[QuizAttempt, bool]:
    """Start an attempt in ``course_id``, or resume the open one there: returns ``(attempt, created)``.

    The course's terms apply (app.courses.policy): it must assign the quiz, a ``late: refuse`` quiz
    closes at the student's due date, and attempts are counted in the course, extensions included.

    The deadline is fixed here, on the server's clock, from the quiz's time limit as the student's
    time accommodation stretches it (``accommodations.student_limit``).
    """
    # Write first (see the module docstring); on PostgreSQL also hold the student's row, so two
    # tabs pressing Start at once get one attempt.
    mine = (QuizAttempt.user_id == user_id) & (QuizAttempt.quiz_id == quiz_id) & (QuizAttempt.course_id == course_id)
    session.execute(
        update(QuizAttempt)
        .where(mine, QuizAttempt.submitted_at.is_(None))
        .values(updated_at=QuizAttempt.updated_at)
        .execution_options(synchronize_session=False)
    )
    session.execute(select(User.id).where(User.id == user_id).with_for_update())
    quiz = _quiz(quiz_id, session=session)
    open_ = session.scalars(select(QuizAttempt).where(mine, QuizAttempt.submitted_at.is_(None))).all()
    for attempt in open_:
        if _expired(attempt, now):
            _finalize(attempt, session=session, now=now)
        else:
            return attempt, False
    own = policy.Own(quiz.due_at, quiz.max_attempts, quiz.show_answers)
    extensions.admit(
        course_id, user_id, "quiz", quiz_id, own, session=session, now=now, closed=QuizClosed, used_up=NoAttemptsLeft,
        used=lambda: session.scalar(select(func.count()).select_from(QuizAttempt).where(mine)) or 0,
    )  # fmt: skip
    live = session.execute(
        select(Question.id, Question.section_id)
        .where(Question.quiz_id == quiz_id, Question.retired_at.is_(None))
        .order_by(Question.position)
    ).all()
    if not live:
        raise InvalidInput(f"Quiz '{quiz_id}' has no questions yet.")
    limit = accommodations.student_limit(quiz.time_limit_minutes, user_id, session=session)
    attempt = QuizAttempt(
        user_id=user_id,
        quiz_id=quiz_id,
        question_ids=scoring.question_order([(r[0], r[1]) for r in live], quiz.sections),
        seed=secrets.randbelow(2**31),
        started_at=now,
        updated_at=now,
        deadline=now + timedelta(minutes=limit) if limit else None,
        course_id=course_id,
    )
    session.add(attempt)
    session.flush()
    return attempt, True


def get_attempt(attempt_id: int, user_id: int, *, session: Session, now: datetime) -> QuizAttempt:
    """The student's attempt; one past its deadline is submitted first, with the answers saved so far."""
    attempt = _own(attempt_id, user_id, session=session)
    if _expired(attempt, now):
        _finalize(attempt, session=session, now=now)
    return attempt


def resume_number(question_ids: list[str], answered: set[str] | dict[str, str]) -> int:
    """Where a resumed attempt opens: the first question not answered (1-based), else the last (pure)."""
    for number, qid in enumerate(question_ids, start=1):
        if qid not in answered:
            return number
    return max(len(question_ids), 1)


def choices_of(attempt: QuizAttempt, *, session: Session) -> dict[str, str]:
    """Question id -> the option saved for it."""
    rows = session.execute(
        select(QuizAnswer.question_id, QuizAnswer.choice).where(QuizAnswer.attempt_id == attempt.id)
    ).all()
    return {qid: choice for qid, choice in rows}


def save_answer(
    attempt_id: int, user_id: int, question_id: str, choice: str, *, session: Session, now: datetime
) -> QuizAttempt:
    """Record ``choice`` for ``question_id``, replacing an earlier one. Exactly one row per question.

    Raises NotFound (not the student's attempt), AttemptClosed (submitted), DeadlinePassed
    (nothing saved), InvalidInput (the question is not in the attempt, or the option not in it).
    """
    locked: CursorResult[Any] = session.execute(  # type: ignore[assignment]
        update(QuizAttempt)
        .where(
            QuizAttempt.id == attempt_id,
            QuizAttempt.user_id == user_id,
            QuizAttempt.submitted_at.is_(None),
            or_(QuizAttempt.deadline.is_(None), QuizAttempt.deadline > now),
        )
        .values(updated_at=now)
        .execution_options(synchronize_session=False)
    )
    attempt = _own(attempt_id, user_id, session=session)
    if locked.rowcount == 0:
        if _expired(attempt, now):
            # The request fails, so this submit is rolled back with it; the next read redoes it
            # identically, because no answer can be added after the deadline.
            raise DeadlinePassed("The time for this attempt is up; the answer was not saved.")
        raise AttemptClosed("This attempt has been submitted; answers can no longer change.")
    if question_id not in attempt.question_ids:
        raise InvalidInput(f"Question '{question_id}' is not part of this attempt.", field="question_id")
    question = session.get(Question, question_id)
    keys = [o["key"] for o in question.options] if question else []
    if choice not in keys:
        raise InvalidInput(
            f"'{choice}' is not an option of question '{question_id}'; choose one of {', '.join(keys)}.",
            field="choice",
        )
    stmt = insert_for(session)(QuizAnswer).values(
        attempt_id=attempt_id, question_id=question_id, choice=choice, answered_at=now
    )
    session.execute(
        stmt.on_conflict_do_update(
            index_elements=["attempt_id", "question_id"], set_={"choice": choice, "answered_at": now}
        )
    )
    return attempt


def submit(attempt_id: int, user_id: int, *, session: Session, now: datetime) -> QuizAttempt:
    """Submit and mark the attempt. Submitting again returns the first result unchanged."""
    session.execute(
        update(QuizAttempt)
        .where(QuizAttempt.id == attempt_id, QuizAttempt.user_id == user_id, QuizAttempt.submitted_at.is_(None))
        .values(updated_at=now)
        .execution_options(synchronize_session=False)
    )
    attempt = _own(attempt_id, user_id, session=session)
    if attempt.is_open:
        _finalize(attempt, session=session, now=now)
    return attempt


def sweep_expired(*, session: Session, now: datetime) -> int:
    """Submit every open attempt past its deadline, with the answers saved so far. Returns how many."""
    due = session.scalars(
        select(QuizAttempt).where(
            QuizAttempt.submitted_at.is_(None), QuizAttempt.deadline.is_not(None), QuizAttempt.deadline <= now
        )
    ).all()
    for attempt in due:
        _finalize(attempt, session=session, now=now)
    return len(due)


def _finalize(attempt: QuizAttempt, *, session: Session, now: datetime) -> None:
    quiz = session.get(Quiz, attempt.quiz_id)
    assert quiz is not None
    questions = questions_of(attempt, session=session)
    answers = {a.question_id: a for a in session.scalars(select(QuizAnswer).where(QuizAnswer.attempt_id == attempt.id))}
    result = scoring.score(
        [scoring.Item(q.id, q.section_id, q.answer) for q in questions],
        {qid: a.choice for qid, a in answers.items()},
        sections=quiz.sections,
        passing_score=quiz.passing_score,
        guide=quiz.scoring_guide,
    )
    for mark in result.marks:
        if mark.id in answers:
            answers[mark.id].correct = mark.correct
    auto = attempt.deadline is not None and now >= attempt.deadline
    # An attempt closed by its deadline counts as submitted at the deadline, whenever it is swept.
    attempt.submitted_at = attempt.deadline if auto and attempt.deadline else now
    attempt.auto_submitted = auto
    attempt.score, attempt.max_score, attempt.passed = result.score, result.max_score, result.passed
    outbox.score_changed(attempt.user_id, attempt.course_id, "quiz", attempt.quiz_id, session=session, now=now)
    attempt.result = result_dict(result)
    session.flush()


def result_dict(result: scoring.Result) -> dict[str, Any]:
    """The stored (and API) shape of a result, without explanations."""
    tier = result.tier
    return {
        "score": result.score,
        "max_score": result.max_score,
        "percent": result.percent,
        "passed": result.passed,
        "guide": None
        if tier is None
        else {
            "level": tier.level,
            "recommendation": tier.recommendation,
            "recommendation_html": tier.recommendation_html,
        },
        "sections": [
            {"id": s.id, "title": s.title, "score": s.score, "max_score": s.max_score, "percent": s.percent}
            for s in result.sections
        ],
        "marks": [{"id": m.id, "choice": m.choice, "answer": m.answer, "correct": m.correct} for m in result.marks],
    }
