"""JSON API for exercises (bearer token): a part's prompt and standing, and answering it."""

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
    solved: bool


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
    explanation: str | None = Field(description="The worked solution (Markdown), once the part is solved or shown")


@router.get("/exercises/{exercise_id}", response_model=ExerciseOut)
def exercise(exercise_id: str, user: ApiUser, session: SessionDep) -> ExerciseOut:
    """An exercise's answer parts and whether this student solved each; never their values."""
    ex = progress.get_exercise(exercise_id, session=session)
    parts = progress.part_views(ex, user.id, session=session)
    return ExerciseOut(
        id=ex.id,
        number=ex.number,
        parts=[PartOut(id=p.id, prompt=p.prompt, unit=p.unit, solved=p.solved) for p in parts],
    )


@router.post("/exercises/{exercise_id}/parts/{part_id}/answer", response_model=AnswerOut)
def answer(exercise_id: str, part_id: str, body: AnswerIn, user: ApiUser, session: SessionDep) -> AnswerOut:
    """Check an answer on the server: 404 for an unknown exercise or part, 422 for a value that is not a number."""
    value = body.value if isinstance(body.value, str) else repr(body.value)
    result = progress.answer_part(exercise_id, part_id, user.id, value, session=session, now=utcnow())
    return AnswerOut(correct=result.correct, attempts=result.part.attempts, explanation=result.part.explanation)
