"""JSON API for quizzes (bearer token), on the same services as the pages."""

from __future__ import annotations

from fastapi import APIRouter, Response
from sqlalchemy.orm import Session

from app.db import utcnow
from app.deps import ApiUser, RowId, SessionDep, WriteSessionDep
from app.quizzes import attempts, service
from app.quizzes.models import QuizAttempt
from app.quizzes.schemas import AnswerIn, AnswerOut, AttemptOut, OptionOut, QuestionOut, QuizOut, ResultOut

router = APIRouter(prefix="/api/v1", tags=["api: quizzes"])


def _result(attempt: QuizAttempt, *, session: Session) -> ResultOut:
    page = service.result_page(attempt, session=session, now=utcnow())
    r = page.result
    assert attempt.submitted_at is not None
    return ResultOut.model_validate(
        {
            **{k: r[k] for k in ("score", "max_score", "percent", "passed", "sections")},
            "guide": r["guide"],
            "questions": [
                {
                    "id": i.question.id,
                    "choice": i.choice,
                    "answer": i.answer if page.key_shown else None,
                    "correct": i.correct if page.key_shown else None,
                    "explanation": i.explanation_text if page.key_shown else None,
                    "choice_label": i.question.label_of(i.choice) or None,
                    "answer_label": (i.question.label_of(i.answer) or None) if page.key_shown else None,
                }
                for i in page.items
            ],
            "submitted_at": attempt.submitted_at,
            "auto_submitted": attempt.auto_submitted,
            "key_shown": page.key_shown,
            "late": page.late,
            "rescores": [
                {
                    "question_id": x.question.id if x.question else None,
                    "old_answer": x.old_answer or None,
                    "new_answer": x.new_answer or None,
                    "old_score": x.old_score,
                    "new_score": x.new_score,
                    "max_score": x.max_score,
                    "rescored_at": x.rescored_at,
                }
                for x in page.rescores
            ],
        }
    )


def _attempt(attempt: QuizAttempt, *, session: Session) -> AttemptOut:
    page = service.attempt_page(attempt, session=session, now=utcnow())
    questions = [
        QuestionOut(
            id=q.id,
            section=q.section_id,
            prompt=q.prompt_text,
            options=[OptionOut(key=o.key, text=o.text, label=o.label) for o in q.options],
        )
        for q in page.questions
    ]
    return AttemptOut(
        id=attempt.id,
        quiz_id=attempt.quiz_id,
        status="open" if attempt.is_open else "submitted",
        started_at=attempt.started_at,
        deadline=attempt.deadline,
        submitted_at=attempt.submitted_at,
        questions=questions,
        choices=page.choices,
        result=None if attempt.is_open else _result(attempt, session=session),
    )


@router.get("/quizzes", response_model=list[QuizOut])
def quizzes(user: ApiUser, session: SessionDep) -> list[QuizOut]:
    return [
        QuizOut(
            id=s.quiz.id,
            title=s.quiz.title,
            question_count=s.question_count,
            passing_score=s.quiz.passing_score,
            time_limit_minutes=s.quiz.time_limit_minutes,
            due=s.due_at,
            max_attempts=s.max_attempts,
            closes_at_due=s.closes,
        )
        for s in service.list_quizzes(
            session=session, course_id=user.course_id if user.in_course else None, user_id=user.id
        )
    ]


@router.post("/quizzes/{quiz_id}/attempts", response_model=AttemptOut, status_code=201)
def start(quiz_id: str, user: ApiUser, session: SessionDep, response: Response) -> AttemptOut:
    """Start an attempt (201), or return the open one for this quiz (200)."""
    course = user.working_course()
    attempt, created = attempts.start_attempt(quiz_id, user.id, session=session, now=utcnow(), course_id=course)
    response.status_code = 201 if created else 200
    return _attempt(attempt, session=session)


@router.get("/attempts/{attempt_id}", response_model=AttemptOut)
def attempt(attempt_id: RowId, user: ApiUser, session: WriteSessionDep) -> AttemptOut:
    found = attempts.get_attempt(attempt_id, user.id, session=session, now=utcnow())
    return _attempt(found, session=session)


@router.put("/attempts/{attempt_id}/answers/{question_id}", response_model=AnswerOut)
def answer(attempt_id: RowId, question_id: str, body: AnswerIn, user: ApiUser, session: SessionDep) -> AnswerOut:
    now = utcnow()
    attempts.save_answer(attempt_id, user.id, question_id, body.choice, session=session, now=now)
    return AnswerOut(question_id=question_id, choice=body.choice, saved_at=now)


@router.post("/attempts/{attempt_id}/submit", response_model=ResultOut)
def submit(attempt_id: RowId, user: ApiUser, session: SessionDep) -> ResultOut:
    done = attempts.submit(attempt_id, user.id, session=session, now=utcnow())
    return _result(done, session=session)
