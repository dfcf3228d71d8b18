"""Database rows for authored content, keyed by the ids written in the files.

Rows are never deleted: an item removed from content/ gets ``retired_at`` so
students' history that points at it keeps its meaning.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.db import Base, UTCDateTime, utcnow


class ContentItem:
    """Columns every content row has."""

    id: Mapped[str] = mapped_column(String(80), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, default=0)
    retired_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Quiz(ContentItem, Base):
    __tablename__ = "quizzes"

    title: Mapped[str] = mapped_column(String(300))
    description_html: Mapped[str] = mapped_column(Text, default="")
    version: Mapped[str | None] = mapped_column(String(40))
    last_updated: Mapped[str | None] = mapped_column(String(40))
    passing_score: Mapped[float | None] = mapped_column(Float)
    time_limit_minutes: Mapped[int | None] = mapped_column(Integer)
    shuffle_options: Mapped[bool] = mapped_column(Boolean, default=False)
    # The attempt policy (None: unlimited; at_once / after_due / never) and the optional due date.
    max_attempts: Mapped[int | None] = mapped_column(Integer)
    show_answers: Mapped[str] = mapped_column(String(16), default="at_once", server_default="at_once")
    due_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    sections: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    scoring_guide: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    source: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)

    questions: Mapped[list[Question]] = relationship(back_populates="quiz", order_by="Question.position")


class Question(ContentItem, Base):
    __tablename__ = "questions"

    quiz_id: Mapped[str] = mapped_column(ForeignKey("quizzes.id"), index=True)
    section_id: Mapped[str | None] = mapped_column(String(80))
    prompt_html: Mapped[str] = mapped_column(Text)
    options: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    answer: Mapped[str] = mapped_column(String(4))
    explanation_html: Mapped[str] = mapped_column(Text)
    card_ids: Mapped[list[str]] = mapped_column(JSON, default=list)
    source: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)

    quiz: Mapped[Quiz] = relationship(back_populates="questions")


class ExerciseSet(ContentItem, Base):
    __tablename__ = "exercise_sets"

    title: Mapped[str] = mapped_column(String(300))
    description_html: Mapped[str] = mapped_column(Text, default="")
    sections: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    difficulty_legend: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    source: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)

    exercises: Mapped[list[Exercise]] = relationship(back_populates="exercise_set", order_by="Exercise.position")


class Exercise(ContentItem, Base):
    __tablename__ = "exercises"

    set_id: Mapped[str] = mapped_column(ForeignKey("exercise_sets.id"), index=True)
    number: Mapped[str] = mapped_column(String(20))
    title: Mapped[str | None] = mapped_column(String(300))
    section_id: Mapped[str | None] = mapped_column(String(80))
    difficulty: Mapped[int | None] = mapped_column(Integer)
    body_html: Mapped[str] = mapped_column(Text)
    # Answer parts: id, prompt, value, tolerance, unit, explanation (+ their HTML). Secret until
    # solved: app.exercises.service decides what a student may see.
    parts: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    source: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)

    exercise_set: Mapped[ExerciseSet] = relationship(back_populates="exercises")


class Deck(ContentItem, Base):
    __tablename__ = "decks"

    title: Mapped[str] = mapped_column(String(300))
    description_html: Mapped[str] = mapped_column(Text, default="")
    rating_prompt: Mapped[str] = mapped_column(String(300))
    rating_labels: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    source: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)

    cards: Mapped[list[Card]] = relationship(back_populates="deck", order_by="Card.position")


class Card(ContentItem, Base):
    __tablename__ = "cards"

    deck_id: Mapped[str] = mapped_column(ForeignKey("decks.id"), index=True)
    number: Mapped[int | None] = mapped_column(Integer)
    topic: Mapped[str | None] = mapped_column(String(200))
    front_html: Mapped[str] = mapped_column(Text)
    back_html: Mapped[str] = mapped_column(Text)
    source: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)

    deck: Mapped[Deck] = relationship(back_populates="cards")


class ContentSync(Base):
    """One row per successful sync: what was loaded, and when."""

    __tablename__ = "content_syncs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    synced_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    digest: Mapped[str] = mapped_column(String(64))
    summary: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class Lab(ContentItem, Base):
    """A lab as last synced: its current version; every version it had stays in ``lab_versions``."""

    __tablename__ = "labs"

    title: Mapped[str] = mapped_column(String(300))
    exercise_id: Mapped[str] = mapped_column(String(80))
    version: Mapped[int] = mapped_column(Integer)


class LabVersion(Base):
    """One version of a lab folder, kept for good: a queued submission is graded against the version it
    was submitted to. ``files`` holds every file of the folder (``mutants/`` excepted) by relative path."""

    __tablename__ = "lab_versions"
    __table_args__ = (UniqueConstraint("lab_id", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    lab_id: Mapped[str] = mapped_column(ForeignKey("labs.id"), index=True)
    version: Mapped[int] = mapped_column(Integer)
    digest: Mapped[str] = mapped_column(String(64))
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    files: Mapped[dict[str, str]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Course(ContentItem, Base):
    """A course instance as last synced from ``courses/<id>/course.yaml`` (or the built-in default course).

    ``assignments`` maps a kind (quiz, exercises, deck, lab) to the ids the course assigns and each one's
    policy (app.content.models.Assignment as data); None assigns everything with each item's own settings
    (the default course without a file). ``join_code`` is not content: staff set it (app.courses).
    """

    __tablename__ = "courses"

    title: Mapped[str] = mapped_column(String(300))
    term: Mapped[str | None] = mapped_column(String(80))
    starts_on: Mapped[str | None] = mapped_column(String(10))  # ISO dates
    ends_on: Mapped[str | None] = mapped_column(String(10))
    time_zone: Mapped[str] = mapped_column(String(64), default="UTC")
    assignments: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    join_code: Mapped[str | None] = mapped_column(String(40), unique=True)
    version: Mapped[int] = mapped_column(Integer, default=1, server_default="1")


class CourseVersion(Base):
    """One version of a course's file, kept for good: what its dates and terms were, and since when."""

    __tablename__ = "course_versions"
    __table_args__ = (UniqueConstraint("course_id", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    course_id: Mapped[str] = mapped_column(ForeignKey("courses.id"), index=True)
    version: Mapped[int] = mapped_column(Integer)
    values: Mapped[dict[str, Any]] = mapped_column(JSON)  # title, term, dates, time zone, assignments
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
