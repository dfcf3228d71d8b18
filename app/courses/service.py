"""Courses and their members: enrolling, roles, join codes, and what each course assigns.

Queries and writes take a keyword ``session``; the caller commits. A course is content (its file), so
nothing here creates or deletes one: staff manage who is in it and how students join.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.content.courses import DEFAULT_COURSE
from app.content.records import Course
from app.courses.models import CourseRole, Enrollment
from app.errors import Forbidden, InvalidInput, NotFound

JOIN_CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O or 1/I to misread


@dataclass(frozen=True)
class Membership:
    course: Course
    role: CourseRole


def get_course(course_id: str, *, session: Session) -> Course:
    course = session.get(Course, course_id)
    if course is None or course.retired_at is not None:
        raise NotFound(f"There is no course '{course_id}'.")
    return course


def live_courses(*, session: Session) -> list[Course]:
    return list(session.scalars(select(Course).where(Course.retired_at.is_(None)).order_by(Course.position, Course.id)))


def memberships(user_id: int, *, session: Session) -> list[Membership]:
    """The live courses ``user_id`` is in, with their role in each (the default course first)."""
    rows = session.execute(
        select(Course, Enrollment.role)
        .join(Enrollment, Enrollment.course_id == Course.id)
        .where(Enrollment.user_id == user_id, Course.retired_at.is_(None))
        .order_by(Course.position, Course.id)
    ).all()
    return [Membership(course, role) for course, role in rows]


def enroll(user_id: int, course_id: str, role: CourseRole, *, session: Session, now: datetime | None = None) -> None:
    """Put ``user_id`` in the course with ``role`` (changing their role if they are in it already)."""
    get_course(course_id, session=session)
    row = session.scalar(select(Enrollment).where(Enrollment.user_id == user_id, Enrollment.course_id == course_id))
    if row is None:
        kwargs = {"created_at": now} if now else {}
        session.add(Enrollment(user_id=user_id, course_id=course_id, role=role, **kwargs))
    else:
        row.role = role
    session.flush()


def unenroll(user_id: int, course_id: str, *, session: Session) -> bool:
    """Take ``user_id`` out of the course; their work stays, in the course it was made in."""
    result = session.execute(delete(Enrollment).where(Enrollment.user_id == user_id, Enrollment.course_id == course_id))
    return bool(getattr(result, "rowcount", 0))


def role_in(user_id: int, course_id: str, *, session: Session) -> CourseRole | None:
    return session.scalar(
        select(Enrollment.role).where(Enrollment.user_id == user_id, Enrollment.course_id == course_id)
    )


def roster(course_id: str, *, session: Session) -> list[tuple[User, CourseRole]]:
    """Everyone in the course, staff first, then by username."""
    rows = session.execute(
        select(User, Enrollment.role)
        .join(Enrollment, Enrollment.user_id == User.id)
        .where(Enrollment.course_id == course_id)
        .order_by(User.username_key)
    ).all()
    order = {CourseRole.instructor: 0, CourseRole.ta: 1, CourseRole.student: 2}
    return sorted(((u, r) for u, r in rows), key=lambda pair: order[pair[1]])


def student_ids(course_id: str, *, session: Session) -> list[int]:
    return list(
        session.scalars(
            select(Enrollment.user_id).where(Enrollment.course_id == course_id, Enrollment.role == CourseRole.student)
        )
    )


def require_student_of(user_id: int, course_id: str, *, session: Session) -> None:
    """Staff of a course see only its own students: anyone else reads as not found."""
    if role_in(user_id, course_id, session=session) is None:
        raise NotFound("There is no such student in this course.")


def new_join_code(course_id: str, *, session: Session) -> str:
    """Give the course a fresh join code (the old one stops working) and return it."""
    course = get_course(course_id, session=session)
    code = "".join(secrets.choice(JOIN_CODE_ALPHABET) for _ in range(8))
    course.join_code = code
    session.flush()
    return code


def clear_join_code(course_id: str, *, session: Session) -> None:
    get_course(course_id, session=session).join_code = None


def course_for_code(code: str | None, default_code: str | None, *, session: Session) -> str:
    """The course a sign-up (or a signed-in student) joins with ``code``.

    ``default_code`` is RINGLAB_JOIN_CODE: the default course's. With no code, the default course,
    when it has no code of its own (an open server).
    """
    code = (code or "").strip()
    if not code:
        if default_code is None and default_is_open(session=session):
            return DEFAULT_COURSE
        raise Forbidden("A course join code is needed. Ask your instructor for it.", field="join_code")
    if default_code is not None and secrets.compare_digest(code, default_code):
        return DEFAULT_COURSE
    course_id = session.scalar(select(Course.id).where(Course.join_code == code.upper(), Course.retired_at.is_(None)))
    if course_id is None:
        raise Forbidden("That course join code is not right. Ask your instructor for it.", field="join_code")
    return course_id


def default_is_open(*, session: Session) -> bool:
    """Whether signing up without a code joins the default course (it has no join code of its own)."""
    return session.scalar(select(Course.join_code).where(Course.id == DEFAULT_COURSE)) is None


def check_role(value: str) -> CourseRole:
    try:
        return CourseRole(value)
    except ValueError:
        raise InvalidInput(f"Unknown role '{value}': use student, ta or instructor.", field="role") from None
