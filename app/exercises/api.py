"""JSON API for exercises (bearer token): a part's prompt and standing, answering it, and giving up on it.

A part's value and worked explanation are null until the student solved the part or gave up on it,
and its hint is null until it is offered (after two wrong answers).
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from app.db import utcnow
from app.deps import ApiUser, SessionDep
from app.exercises import progress

router = APIRouter(prefix="/api/v1", tags=["api: exercises"])


class PartOut(BaseModel):
    id: str
    prompt: str
    unit: str
    status: str = Field(description='"not tried", "tried", "solved" or "gave up"')
    solved: bool
    gave_up: bool
    attempts: int
    hint: str | None = Field(description="A nudge toward the method (Markdown), once offered after two wrong answers")
    value: float | None = Field(description="The accepted value, once the part is solved or given up")
    explanation: str | None = Field(description="The worked solution (Markdown), once the part is solved or given up")

    @classmethod
    def of(cls, part: progress.PartView) -> PartOut:
        return cls(
            id=part.id, prompt=part.prompt, unit=part.unit, status=part.standing.value, solved=part.solved,
            gave_up=part.given_up, attempts=part.attempts, hint=part.hint, value=part.value,
            explanation=part.explanation,
        )  # fmt: skip


class ExerciseOut(BaseModel):
    id: str
    number: str
    parts: list[PartOut]


class AnswerIn(BaseModel):
    value: str | float = Field(
        description='The answer as written: "2048", "2,048", "2.048e3", "1.46%" or a JSON number'
    )


class AnswerOut(BaseModel):
    correct: bool
    attempts: int
    hint: str | None = Field(description="The part's hint (Markdown), once offered after two wrong answers")
    explanation: str | None = Field(description="The worked solution (Markdown), once the part is solved or given up")
    part: PartOut


@router.get("/exercises/{exercise_id}", response_model=ExerciseOut)
def exercise(exercise_id: str, user: ApiUser, session: SessionDep) -> ExerciseOut:
    """An exercise's answer parts and this student's standing on each; values only once solved or given up."""
    ex = progress.get_exercise(exercise_id, session=session)
    parts = progress.part_views(ex, user.id, session=session)
    return ExerciseOut(id=ex.id, number=ex.number, parts=[PartOut.of(p) for p in parts])


@router.post("/exercises/{exercise_id}/parts/{part_id}/answer", response_model=AnswerOut)
def answer(exercise_id: str, part_id: str, body: AnswerIn, user: ApiUser, session: SessionDep) -> AnswerOut:
    """Check an answer on the server: 404 for an unknown exercise or part, 422 for a value that is not a number."""
    value = body.value if isinstance(body.value, str) else repr(body.value)
    result = progress.answer_part(
        exercise_id, part_id, user.id, value, session=session, now=utcnow(), course_id=user.course_id
    )
    part = result.part
    return AnswerOut(
        correct=result.correct,
        attempts=part.attempts,
        hint=part.hint,
        explanation=part.explanation,
        part=PartOut.of(part),
    )


@router.post("/exercises/{exercise_id}/parts/{part_id}/give-up", response_model=PartOut)
def give_up(exercise_id: str, part_id: str, user: ApiUser, session: SessionDep) -> PartOut:
    """Give up on a part ("Show the answer"): it no longer counts as solved; its value and explanation are returned."""
    part = progress.give_up_part(exercise_id, part_id, user.id, session=session, now=utcnow())
    return PartOut.of(part)
