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

from sqlalchemy import select
from sqlalchemy.orm import Session

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


def _role(user_id: int, course_id: str, session: Session) -> CourseRole | None:
    return session.scalar(
        select(Enrollment.role).where(Enrollment.user_id == user_id, Enrollment.course_id == course_id)
    )
