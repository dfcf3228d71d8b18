"""Who is in which course, in what role, and the extensions staff grant.

The course itself is content (app.content.records.Course, synced from ``courses/<id>/course.yaml``).
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Enum, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, UTCDateTime, utcnow


class CourseRole(enum.StrEnum):
    student = "student"
    ta = "ta"  # teaching assistant: sees and grades students' work, grants extensions
    instructor = "instructor"  # and changes the course's roster, staff and join code

    @property
    def label(self) -> str:
        return {"student": "Student", "ta": "Teaching assistant", "instructor": "Instructor"}[self.value]


STAFF = frozenset({CourseRole.ta, CourseRole.instructor})


class Enrollment(Base):
    __tablename__ = "enrollments"
    __table_args__ = (UniqueConstraint("course_id", "user_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    course_id: Mapped[str] = mapped_column(ForeignKey("courses.id"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    role: Mapped[CourseRole] = mapped_column(Enum(CourseRole, native_enum=False, length=20))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Extension(Base):
    """One grant: a student's new due date and/or extra attempts on one assessment of one course.

    Grants are never edited: a new grant for the same assessment replaces the last one's effect, and
    every grant stays, so the record says who granted what, when and why.
    """

    __tablename__ = "extensions"
    __table_args__ = (Index("ix_extensions_course_user", "course_id", "user_id", "assessment"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    course_id: Mapped[str] = mapped_column(ForeignKey("courses.id"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    assessment: Mapped[str] = mapped_column(String(100))  # "quiz:<id>" or "lab:<id>"
    due_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    extra_attempts: Mapped[int] = mapped_column(Integer, default=0)
    reason: Mapped[str] = mapped_column(Text, default="")
    granted_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    granted_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class AuditEntry(Base):
    """An administrative action kept for the record (an account deleted, a course's staff changed)."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    actor: Mapped[str] = mapped_column(String(80))  # a username, or "terminal"
    action: Mapped[str] = mapped_column(String(40))
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
