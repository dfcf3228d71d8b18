"""What staff may add to an LMS course by deep linking: the course's quizzes, labs, exercise sets and decks.

Quizzes and labs come with a gradebook column (their maximum score: questions, points); the others are
links without grades.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.content.records import Deck, ExerciseSet
from app.db import utcnow
from app.instructors.course_context import Context
from app.instructors.gradebook import LabSource, QuizSource


@dataclass(frozen=True)
class Offer:
    kind: str  # claims.KINDS
    item_id: str
    title: str
    max_score: float | None  # None: no gradebook column

    @property
    def resource(self) -> str:
        return f"{self.kind}:{self.item_id}"

    @property
    def group(self) -> str:
        return {"quiz": "Quizzes", "lab": "Labs", "exercises": "Exercise sets", "deck": "Flashcard decks"}[self.kind]


def offers(course_id: str, *, session: Session) -> list[Offer]:
    ctx = Context.for_course(course_id, now=utcnow(), session=session)
    found = [
        Offer(kind, column.key.partition(":")[2], column.title, float(column.max_score or 0))
        for kind, source in (("quiz", QuizSource()), ("lab", LabSource()))
        for column in source.columns(session=session, ctx=ctx)
    ]
    for kind, model in (("exercises", ExerciseSet), ("deck", Deck)):
        rows = session.execute(select(model.id, model.title).where(model.retired_at.is_(None)).order_by(model.position))
        found += [Offer(kind, item_id, title, None) for item_id, title in rows if ctx.assigned(kind, item_id)]
    return found


def chosen(course_id: str, resources: list[str], *, session: Session) -> list[Offer]:
    """The offers named by ``resources`` ("kind:id"), in the course's order; unknown ones are ignored."""
    wanted = set(resources)
    return [o for o in offers(course_id, session=session) if o.resource in wanted]
