"""Counts of a course's people, for the instructor overview."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.content.courses import DEFAULT_COURSE
from app.courses.models import CourseRole, Enrollment


def people(*, session: Session, course_id: str = DEFAULT_COURSE) -> dict[str, int]:
    """How many of each role the course has (student, ta, instructor)."""
    rows = session.execute(
        select(Enrollment.role, func.count()).where(Enrollment.course_id == course_id).group_by(Enrollment.role)
    ).all()
    counts = {role.value: 0 for role in CourseRole}
    counts.update({role.value: n for role, n in rows})
    return counts
