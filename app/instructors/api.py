"""JSON API for instructors (bearer token): the gradebook, as the CSV export has it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel

from app.db import utcnow
from app.deps import ApiUser, SessionDep
from app.errors import Forbidden
from app.instructors import exports, gradebook

router = APIRouter(prefix="/api/v1/instructor", tags=["api: instructors"])


class ColumnOut(BaseModel):
    key: str
    group: str
    title: str
    fields: list[str]
    max_score: int | None
    due: str | None


class GradebookOut(BaseModel):
    """``fields`` are the CSV header; each record maps every field to its value (null when empty)."""

    fields: list[str]
    columns: list[ColumnOut]
    students: list[dict[str, Any]]


@router.get("/gradebook", response_model=GradebookOut)
def gradebook_api(request: Request, user: ApiUser, session: SessionDep) -> GradebookOut:
    if not user.is_instructor:
        raise Forbidden("The gradebook is for instructors.")
    ctx = gradebook.Context(now=utcnow())
    book = gradebook.build(session=session, ctx=ctx, per_page=None)
    columns = [
        ColumnOut(
            key=c.key,
            group=c.group,
            title=c.title,
            fields=exports.column_fields(c),
            max_score=c.max_score,
            due=c.due_at.isoformat() if c.due_at else None,
        )
        for c in book.columns
    ]
    return GradebookOut(
        fields=exports.gradebook_fields(book.columns), columns=columns, students=exports.gradebook_records(book)
    )
