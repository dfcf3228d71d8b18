"""Which course a request is in, and the user's role there.

A request names its course with ``?course=<id>`` (the JSON API also with an ``X-Ringlab-Course``
header); a browser otherwise stays in the course it last entered (a cookie), if the user is in it
(or is a site administrator): the cookie outlives a sign-out, and the next person on a shared
browser must not land in a course that is not theirs. With none named, the default course if the
user is in it, else their first course. A course named but not enrolled in gives no role: every
per-course check then refuses (a site administrator's aside).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, ScalarSelect, Select, and_, bindparam, case, select
from sqlalchemy.orm import Session, aliased

from app.accounts import service as accounts
from app.accounts.models import Role
from app.content.courses import DEFAULT_COURSE
from app.content.records import Course
from app.courses.models import CourseRole, Enrollment

COOKIE = "ringlab_course"
HEADER = "x-ringlab-course"


@dataclass(frozen=True)
class Place:
    course_id: str
    role: CourseRole | None


def resolve(
    user_id: int, requested: str | None, *, session: Session, remembered: str | None = None, admin: bool = False
) -> Place:
    """The course a request of ``user_id`` is in: ``requested`` if given, else ``remembered`` (the course
    this browser last entered) if they are in it or ``admin``, else their usual one."""
    if requested:
        return Place(requested[:80], _role(user_id, requested[:80], session))
    if remembered:
        role = _role(user_id, remembered[:80], session)
        if role is not None or admin:
            return Place(remembered[:80], role)
    rows = session.execute(
        select(Enrollment.course_id, Enrollment.role)
        .join(Course, Course.id == Enrollment.course_id)
        .where(Enrollment.user_id == user_id, Course.retired_at.is_(None))
        .order_by(Course.position, Course.id)
    ).all()
    for course_id, role in rows:
        if course_id == DEFAULT_COURSE:
            return Place(course_id, role)
    return Place(rows[0][0], rows[0][1]) if rows else Place(DEFAULT_COURSE, None)


def _usual_course(user_id: ColumnElement[int]) -> ScalarSelect[str]:
    """The course of ``user_id`` (a column) a request that names none is in: the default course if they
    are in it, else their first course still running (None if none), as ``resolve`` chooses it."""
    mine = aliased(Enrollment)
    return (
        select(mine.course_id)
        .join(Course, Course.id == mine.course_id)
        .where(mine.user_id == user_id, Course.retired_at.is_(None))
        .order_by(case((mine.course_id == DEFAULT_COURSE, 0), else_=1), Course.position, Course.id)
        .limit(1)
        .scalar_subquery()
    )


def _token_place(named: bool) -> Select[Any]:
    """The token's user with their enrollment in the course named (``:course``) or their usual one."""
    user_id = accounts.USERS.c.id
    course = bindparam("course") if named else _usual_course(user_id)
    joined = and_(Enrollment.user_id == user_id, Enrollment.course_id == course)
    return accounts.TOKEN_USER.add_columns(Enrollment.course_id, Enrollment.role.label("course_role")).outerjoin(
        Enrollment, joined
    )


# Built once: one statement on every API request, the token and the course together.
_TOKEN_IN_NAMED, _TOKEN_IN_USUAL = _token_place(True), _token_place(False)


def token_place(
    token: str, requested: str | None, *, session: Session, now: datetime
) -> tuple[int, str, Role, Place] | None:
    """``(id, username, role, place)`` of an API token's user, or None for a token unknown or expired, in one
    statement (it runs on every API request): the place is the one ``resolve`` finds with no browser's cookie."""
    params = accounts.token_params(token, now)
    if requested:
        params["course"] = requested[:80]
    row = session.execute(_TOKEN_IN_NAMED if requested else _TOKEN_IN_USUAL, params).first()
    if row is None:
        return None
    if requested:
        place = Place(requested[:80], row.course_role)
    else:
        place = Place(row.course_id, row.course_role) if row.course_id is not None else Place(DEFAULT_COURSE, None)
    return row.id, row.username, row.role, place


def _role(user_id: int, course_id: str, session: Session) -> CourseRole | None:
    return session.scalar(
        select(Enrollment.role).where(Enrollment.user_id == user_id, Enrollment.course_id == course_id)
    )
