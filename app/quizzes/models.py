"""Database rows for quizzes (per-student state): attempts, the answers saved in them, time accommodations."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, CheckConstraint, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.db import Base, UTCDateTime, utcnow


class QuizAttempt(Base):
    """One sitting of a quiz by one student.

    The question list and the shuffle seed are fixed when the attempt starts, so
    a content change or a reload never reorders what the student is looking at.
    ``score``/``max_score``/``passed`` are written at submit, and again only when a question's key
    is corrected (``app.quizzes.rescore``, which records why).
    """

    __tablename__ = "quiz_attempts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    quiz_id: Mapped[str] = mapped_column(ForeignKey("quizzes.id"), index=True)
    # The course it was made in (app.courses.models: "default" is the course every server has). No foreign
    # key: a course is never deleted (retired instead), and SQLite adds this column to a table in place only so.
    # No index of its own: queries reach these rows by student, quiz or lab first, and an index on a column
    # with a handful of values would lead the planner away from those.
    course_id: Mapped[str] = mapped_column(String(80), default="default", server_default="default")
    question_ids: Mapped[list[str]] = mapped_column(JSON)
    seed: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    deadline: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Bumped by every save: the first statement of a write, so it takes the lock
    # (the row on PostgreSQL, the database on SQLite) before anything is read.
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    submitted_at: Mapped[datetime | None] = mapped_column(UTCDateTime, index=True)
    auto_submitted: Mapped[bool] = mapped_column(Boolean, default=False)
    score: Mapped[int | None] = mapped_column(Integer)
    max_score: Mapped[int | None] = mapped_column(Integer)
    passed: Mapped[bool | None] = mapped_column(Boolean)
    # The whole result as marked at submit (see attempts.result_dict): frozen, so a later edit of
    # a question's wording or the scoring guide never changes a grade already given; a corrected
    # key is the one exception, re-scored with a record (app.quizzes.rescore).
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)

    answers: Mapped[list[QuizAnswer]] = relationship(back_populates="attempt", order_by="QuizAnswer.id")

    @property
    def is_open(self) -> bool:
        return self.submitted_at is None


class QuizAnswer(Base):
    """The option a student chose for one question of an attempt; one row per question."""

    __tablename__ = "quiz_answers"
    __table_args__ = (UniqueConstraint("attempt_id", "question_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    attempt_id: Mapped[int] = mapped_column(ForeignKey("quiz_attempts.id", ondelete="CASCADE"))
    question_id: Mapped[str] = mapped_column(ForeignKey("questions.id"))
    choice: Mapped[str] = mapped_column(String(4))
    answered_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Filled in at submit, from the key as it was then.
    correct: Mapped[bool | None] = mapped_column(Boolean)

    attempt: Mapped[QuizAttempt] = relationship(back_populates="answers")


class QuizRescore(Base):
    """A submitted attempt marked again because a question's key was corrected: the record a student
    and their instructor see beside the result (which question, the keys, the score before and after)."""

    __tablename__ = "quiz_rescores"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    attempt_id: Mapped[int] = mapped_column(ForeignKey("quiz_attempts.id", ondelete="CASCADE"), index=True)
    question_id: Mapped[str] = mapped_column(String(80))
    old_answer: Mapped[str] = mapped_column(String(4))
    new_answer: Mapped[str] = mapped_column(String(4))
    choice: Mapped[str | None] = mapped_column(String(4))
    old_score: Mapped[int] = mapped_column(Integer)
    new_score: Mapped[int] = mapped_column(Integer)
    max_score: Mapped[int] = mapped_column(Integer)
    # The erratum's note as HTML (why the key changed), or "" when the change came without one.
    note_html: Mapped[str] = mapped_column(Text, default="")
    rescored_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class QuizAccommodation(Base):
    """Extra time on every timed quiz for one student (an accommodation letter's "time and a half").

    A student's limit is the quiz's ``time_limit_minutes`` times ``time_multiplier``, plus
    ``extra_minutes`` (``app.quizzes.accommodations``). One per student and server-wide: there are
    no courses to scope it to. Fixed into an attempt's deadline when the attempt starts.
    """

    __tablename__ = "quiz_accommodations"
    __table_args__ = (
        CheckConstraint("time_multiplier >= 1", name="time_multiplier"),
        CheckConstraint("extra_minutes >= 0", name="extra_minutes"),
    )

    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    time_multiplier: Mapped[float] = mapped_column(Float, default=1.0)
    extra_minutes: Mapped[int] = mapped_column(Integer, default=0)
    # Why, for the next instructor (e.g. "letter of 3 March"): never shown to the student.
    note: Mapped[str] = mapped_column(String(200), default="")
    # Who granted or last changed it; None from the terminal (``ringlab users accommodate``).
    granted_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    granted_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
