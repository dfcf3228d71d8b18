"""Quiz queries. Answers and explanations stay on the server until an attempt is submitted."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.content.records import Question, Quiz
from app.errors import NotFound


@dataclass(frozen=True)
class QuizSummary:
    quiz: Quiz
    question_count: int
    section_counts: dict[str, int]


def _live_questions(quiz_id: str):  # type: ignore[no-untyped-def]
    return select(Question).where(Question.quiz_id == quiz_id, Question.retired_at.is_(None))


def list_quizzes(*, session: Session) -> list[QuizSummary]:
    counts = dict(
        session.execute(
            select(Question.quiz_id, func.count()).where(Question.retired_at.is_(None)).group_by(Question.quiz_id)
        ).all()
    )
    quizzes = session.scalars(select(Quiz).where(Quiz.retired_at.is_(None)).order_by(Quiz.position))
    return [QuizSummary(q, counts.get(q.id, 0), {}) for q in quizzes]


def get_quiz(quiz_id: str, *, session: Session) -> QuizSummary:
    quiz = session.get(Quiz, quiz_id)
    if quiz is None or quiz.retired_at is not None:
        raise NotFound(f"No quiz '{quiz_id}'.")
    section_counts: dict[str, int] = {}
    for question in session.scalars(_live_questions(quiz_id)):
        key = question.section_id or ""
        section_counts[key] = section_counts.get(key, 0) + 1
    return QuizSummary(quiz, sum(section_counts.values()), section_counts)
