"""JSON API for instructors (bearer token): the gradebook, as the CSV export has it; students' time accommodations."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field

from app.db import utcnow
from app.deps import ApiUser, RowId, SessionDep
from app.errors import Forbidden
from app.instructors import exports, gradebook, students
from app.quizzes import accommodations

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
    if not user.is_staff:
        raise Forbidden("The gradebook is for the course's staff.")
    ctx = gradebook.Context.for_course(user.course_id, now=utcnow(), session=session)
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


class AccommodationIn(BaseModel):
    """Extra time on every timed quiz: each limit x ``time_multiplier`` (rounded up) + ``extra_minutes``."""

    time_multiplier: float = Field(1.0, ge=1, le=accommodations.MAX_MULTIPLIER, examples=[1.5])
    extra_minutes: int = Field(0, ge=0, le=accommodations.MAX_EXTRA_MINUTES, examples=[10])
    note: str = Field("", max_length=accommodations.MAX_NOTE, description="for instructors; never shown to the student")


class AccommodationOut(BaseModel):
    """A student's time accommodation. It applies to attempts started after it was granted."""

    user_id: int
    student: str
    time_multiplier: float
    extra_minutes: int
    note: str
    granted_by: str | None = Field(description="the instructor who granted it; null when granted from the terminal")
    granted_at: datetime


def _instructor(user: ApiUser) -> None:
    if not user.is_staff:
        raise Forbidden("Time accommodations are granted by the course's staff.")


def _out(found: students.Granted) -> AccommodationOut:
    a = found.accommodation
    return AccommodationOut(
        user_id=found.student.id,
        student=found.student.username,
        time_multiplier=a.time_multiplier,
        extra_minutes=a.extra_minutes,
        note=a.note,
        granted_by=found.granted_by,
        granted_at=a.granted_at,
    )


@router.get("/students/{user_id}/accommodation", response_model=AccommodationOut)
def accommodation_api(user_id: RowId, user: ApiUser, session: SessionDep) -> AccommodationOut:
    """The student's time accommodation (404 when none is granted)."""
    _instructor(user)
    return _out(students.granted(user_id, session=session))


@router.put("/students/{user_id}/accommodation", response_model=AccommodationOut)
def grant_accommodation_api(
    user_id: RowId, body: AccommodationIn, user: ApiUser, session: SessionDep
) -> AccommodationOut:
    """Grant the student extra time on timed quizzes, or change it."""
    _instructor(user)
    accommodations.grant(
        user_id, multiplier=body.time_multiplier, extra_minutes=body.extra_minutes, note=body.note,
        granted_by=user.id, session=session, now=utcnow(),
    )  # fmt: skip
    return _out(students.granted(user_id, session=session))


@router.delete("/students/{user_id}/accommodation", status_code=204, response_class=Response)
def remove_accommodation_api(user_id: RowId, user: ApiUser, session: SessionDep) -> Response:
    """Take the student's extra time away (204, also when there was none)."""
    _instructor(user)
    students.get_user(user_id, session=session)
    accommodations.remove(user_id, session=session)
    return Response(status_code=204)
