"""Marking submitted attempts again after an answer key is corrected.

A submitted attempt's result is frozen (``QuizAttempt.result``), so a later edit of the scoring
guide or a question's wording never changes a grade. A corrected *key* is the exception: the
grade was given against a wrong key. Content sync calls ``rescore_keys`` in its own transaction,
so the new key and every re-marked attempt commit together; each re-marked attempt gets a
``QuizRescore`` row per changed question, which the result page shows the student.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.content.records import Question, Quiz
from app.quizzes import scoring
from app.quizzes.attempts import result_dict
from app.quizzes.models import QuizAnswer, QuizAttempt, QuizRescore


@dataclass(frozen=True)
class KeyChange:
    """Question ``question_id``'s key went from ``old`` to ``new``; ``note_html`` says why."""

    question_id: str
    old: str
    new: str
    note_html: str = ""


def remark(
    result: dict[str, Any], answers: dict[str, str], *, quiz: Quiz, sections: dict[str, str | None]
) -> scoring.Result:
    """``result``'s marks scored again with the keys in ``answers`` (question id -> key) (pure).

    The student's choices and the attempt's questions are the stored ones; the pass mark and
    scoring guide are the quiz's current ones.
    """
    marks = result["marks"]
    items = [scoring.Item(m["id"], sections.get(m["id"]), answers.get(m["id"], m["answer"])) for m in marks]
    choices = {m["id"]: m["choice"] for m in marks if m["choice"] is not None}
    return scoring.score(
        items, choices, sections=quiz.sections, passing_score=quiz.passing_score, guide=quiz.scoring_guide
    )


def rescore_keys(changes: list[KeyChange], *, session: Session, now: datetime) -> int:
    """Re-mark every submitted attempt that was marked against a key in ``changes``; returns how many."""
    by_question = {c.question_id: c for c in changes}
    questions = {q.id: q for q in session.scalars(select(Question).where(Question.id.in_(by_question)))}
    quiz_ids = {q.quiz_id for q in questions.values()}
    attempts = session.scalars(
        select(QuizAttempt)
        .where(QuizAttempt.quiz_id.in_(quiz_ids), QuizAttempt.submitted_at.is_not(None))
        .where(QuizAttempt.result.is_not(None))
        .order_by(QuizAttempt.id)
        .with_for_update()
    ).all()
    done = 0
    for attempt in attempts:
        assert attempt.result is not None
        stale = [
            m for m in attempt.result["marks"] if m["id"] in by_question and m["answer"] != by_question[m["id"]].new
        ]
        if not stale:
            continue
        quiz = session.get(Quiz, attempt.quiz_id)
        assert quiz is not None
        sections = _sections(attempt, session=session)
        keys: dict[str, str] = {}
        score = int(attempt.result["score"])
        for mark in stale:  # one row per corrected question; their scores chain from the old one
            change = by_question[mark["id"]]
            keys[mark["id"]] = change.new
            result = remark(attempt.result, keys, quiz=quiz, sections=sections)
            session.add(
                QuizRescore(
                    attempt_id=attempt.id, question_id=mark["id"], old_answer=mark["answer"], new_answer=change.new,
                    choice=mark["choice"], old_score=score, new_score=result.score, max_score=result.max_score,
                    note_html=change.note_html, rescored_at=now,
                )
            )  # fmt: skip
            score = result.score
        _apply(attempt, result, session=session)
        done += 1
    return done


def _sections(attempt: QuizAttempt, *, session: Session) -> dict[str, str | None]:
    rows = session.execute(select(Question.id, Question.section_id).where(Question.id.in_(attempt.question_ids)))
    return {qid: section for qid, section in rows}


def _apply(attempt: QuizAttempt, result: scoring.Result, *, session: Session) -> None:
    attempt.score, attempt.max_score, attempt.passed = result.score, result.max_score, result.passed
    attempt.result = result_dict(result)
    correct = {m.id: m.correct for m in result.marks}
    for answer in session.scalars(select(QuizAnswer).where(QuizAnswer.attempt_id == attempt.id)):
        if answer.question_id in correct:
            answer.correct = correct[answer.question_id]


def rescores_of(attempt_id: int, *, session: Session) -> list[QuizRescore]:
    """The re-markings of one attempt, oldest first."""
    return list(
        session.scalars(select(QuizRescore).where(QuizRescore.attempt_id == attempt_id).order_by(QuizRescore.id))
    )
