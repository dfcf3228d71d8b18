"""Database rows for exercises (per-student state): answers to parts, progress, notes, done marks."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, UTCDateTime, utcnow


class PartAnswer(Base):
    """Every answer a student sent for a part, right or wrong: the attempt log (append-only)."""

    __tablename__ = "exercise_part_answers"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    exercise_id: Mapped[str] = mapped_column(ForeignKey("exercises.id"))
    # The course it was made in (app.courses.models: "default" is the course every server has). No foreign
    # key: a course is never deleted (retired instead), and SQLite adds this column to a table in place only so.
    # No index of its own: queries reach these rows by student, quiz or lab first, and an index on a column
    # with a handful of values would lead the planner away from those.
    course_id: Mapped[str] = mapped_column(String(80), default="default", server_default="default")
    part_id: Mapped[str] = mapped_column(String(80))
    answer: Mapped[str] = mapped_column(String(80))
    correct: Mapped[bool] = mapped_column(Boolean)
    answered_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class PartProgress(Base):
    """One student's standing on one part: attempts so far, when solved, when they gave up (asked for the answer)."""

    __tablename__ = "exercise_part_progress"
    __table_args__ = (UniqueConstraint("user_id", "exercise_id", "part_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    exercise_id: Mapped[str] = mapped_column(ForeignKey("exercises.id"))
    part_id: Mapped[str] = mapped_column(String(80))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_answer: Mapped[str | None] = mapped_column(String(80))
    solved_at: Mapped[datetime | None] = mapped_column(UTCDateTime, index=True)
    # Set by "Show the answer": the part no longer counts as solved (app.exercises.standing).
    given_up_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ExerciseNote(Base):
    """A student's private notes on an exercise and whether they marked it done."""

    __tablename__ = "exercise_notes"
    __table_args__ = (UniqueConstraint("user_id", "exercise_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    exercise_id: Mapped[str] = mapped_column(ForeignKey("exercises.id"))
    notes: Mapped[str] = mapped_column(Text, default="")
    done_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class PartRescore(Base):
    """A student's answers to a part marked again because its accepted value changed: what they
    see beside the part (solved before, solved now, why)."""

    __tablename__ = "exercise_part_rescores"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    exercise_id: Mapped[str] = mapped_column(ForeignKey("exercises.id"))
    part_id: Mapped[str] = mapped_column(String(80))
    was_solved: Mapped[bool] = mapped_column(Boolean)
    now_solved: Mapped[bool] = mapped_column(Boolean)
    # How many of the student's answers changed from right to wrong or back.
    answers_changed: Mapped[int] = mapped_column(Integer)
    note_html: Mapped[str] = mapped_column(Text, default="")
    rescored_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
