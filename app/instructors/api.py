"""JSON API for instructors (bearer token): the gradebook, as the CSV export has it; students' time accommodations."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from app.courses import extensions
from app.courses import service as courses
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


def _instructor(user: ApiUser, student_id: int | None = None, session: Session | None = None) -> None:
    if not user.is_staff:
        raise Forbidden("Time accommodations are granted by the course's staff.")
    if student_id is not None and session is not None:
        courses.require_student_of(student_id, user.course_id, session=session)


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
    _instructor(user, user_id, session)
    return _out(students.granted(user_id, session=session))


@router.put("/students/{user_id}/accommodation", response_model=AccommodationOut)
def grant_accommodation_api(
    user_id: RowId, body: AccommodationIn, user: ApiUser, session: SessionDep
) -> AccommodationOut:
    """Grant the student extra time on timed quizzes, or change it."""
    _instructor(user, user_id, session)
    accommodations.grant(
        user_id, multiplier=body.time_multiplier, extra_minutes=body.extra_minutes, note=body.note,
        granted_by=user.id, session=session, now=utcnow(),
    )  # fmt: skip
    return _out(students.granted(user_id, session=session))


@router.delete("/students/{user_id}/accommodation", status_code=204, response_class=Response)
def remove_accommodation_api(user_id: RowId, user: ApiUser, session: SessionDep) -> Response:
    """Take the student's extra time away (204, also when there was none)."""
    _instructor(user, user_id, session)
    accommodations.remove(user_id, session=session)
    return Response(status_code=204)


class ExtensionIn(BaseModel):
    """A new due date and/or extra attempts for one student on one quiz or lab of the course."""

    assessment: str = Field(max_length=100, examples=["quiz:module-202", "lab:ring-allreduce"])
    due: datetime | None = Field(None, description="the student's new due date (with its time zone)")
    extra_attempts: int = Field(0, ge=0, le=extensions.MAX_EXTRA_ATTEMPTS)
    reason: str = Field(max_length=extensions.MAX_REASON, description="kept with the grant; staff see it")


class ExtensionOut(BaseModel):
    id: int
    assessment: str
    title: str
    due: datetime | None
    extra_attempts: int
    reason: str
    granted_by: str | None
    granted_at: datetime
    in_force: bool = Field(description="the latest grant for its assessment (older ones are the record)")


@router.get("/students/{user_id}/extensions", response_model=list[ExtensionOut])
def extensions_api(user_id: RowId, user: ApiUser, session: SessionDep) -> list[ExtensionOut]:
    """Every extension granted to the student in the request's course, newest first."""
    _staff_of(user, user_id, session)
    return [_ext_out(g) for g in extensions.history(user.course_id, user_id, session=session)]


@router.post("/students/{user_id}/extensions", response_model=ExtensionOut, status_code=201)
def grant_extension_api(user_id: RowId, body: ExtensionIn, user: ApiUser, session: SessionDep) -> ExtensionOut:
    """Grant the student a new due date and/or extra attempts (201); a new grant replaces the last one's effect."""
    _staff_of(user, user_id, session)
    due = None if body.due is None else body.due.astimezone(UTC) if body.due.tzinfo else body.due.replace(tzinfo=UTC)
    extensions.grant(
        user.course_id, user_id, body.assessment, due_at=due, extra_attempts=body.extra_attempts,
        reason=body.reason, granted_by=user.id, session=session, now=utcnow(),
    )  # fmt: skip
    return _ext_out(extensions.history(user.course_id, user_id, session=session)[0])


def _staff_of(user: ApiUser, student_id: int, session: Session) -> None:
    if not user.is_staff:
        raise Forbidden("Extensions are granted by the course's staff.")
    courses.require_student_of(student_id, user.course_id, session=session)


def _ext_out(g: extensions.GrantRecord) -> ExtensionOut:
    return ExtensionOut(
        id=g.id, assessment=g.assessment, title=g.title, due=g.due_at, extra_attempts=g.extra_attempts,
        reason=g.reason, granted_by=g.granted_by, granted_at=g.granted_at, in_force=g.in_force,
    )  # fmt: skip
