"""Database rows for flashcards: per-student settings, card state and the review log.

The review log is append-only: an undone review keeps its row, marked ``undone_at``.
``CardState.version`` counts every change to a student's card (rating, undo, bury,
suspend); a review records the version it was made against, and the unique
constraint on (user, card, version_before) lets only one of two racing ratings in.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Integer, String, Text, UniqueConstraint, true
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, UTCDateTime, utcnow

# Our card states: fsrs.State's values plus 0 for a card the student has not seen.
NEW, LEARNING, REVIEW, RELEARNING = 0, 1, 2, 3
STATE_NAMES = {NEW: "new", LEARNING: "learning", REVIEW: "review", RELEARNING: "relearning"}


class StudySettings(Base):
    """One student's scheduling preferences (defaults until they save the form)."""

    __tablename__ = "flashcard_settings"

    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    desired_retention: Mapped[float] = mapped_column(Float, default=0.9)
    new_per_day: Mapped[int] = mapped_column(Integer, default=20)
    reviews_per_day: Mapped[int] = mapped_column(Integer, default=200)
    learning_steps: Mapped[list[int]] = mapped_column(JSON, default=lambda: [1, 10])  # minutes
    relearning_steps: Mapped[list[int]] = mapped_column(JSON, default=lambda: [10])  # minutes
    time_zone: Mapped[str] = mapped_column(String(64), default="UTC")
    # One-key shortcuts on the study page (1-5, U, -, @, Space/Enter away from a control). Off for
    # speech input and anyone who types into the page by mistake (WCAG 2.1.4); Ctrl+Z stays.
    keyboard_shortcuts: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Schedule:
    """Where a student stands with a card, as FSRS and the study flow keep it (a deck card's ``CardState``,
    a ``PersonalCard``): the same columns in both tables, read and written by the same scheduler."""

    state: Mapped[int] = mapped_column(Integer, default=NEW)
    step: Mapped[int | None] = mapped_column(Integer)
    stability: Mapped[float | None] = mapped_column(Float)
    difficulty: Mapped[float | None] = mapped_column(Float)
    due: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_review: Mapped[datetime | None] = mapped_column(UTCDateTime)
    suspended: Mapped[bool] = mapped_column(Boolean, default=False)
    buried_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    version: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class CardState(Schedule, Base):
    """Where one student stands with one card. No row means the card is new to them."""

    __tablename__ = "flashcard_states"
    __table_args__ = (UniqueConstraint("user_id", "card_id", name="uq_flashcard_states_user_id_card_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    card_id: Mapped[str] = mapped_column(ForeignKey("cards.id"), index=True)
    deck_id: Mapped[str] = mapped_column(String(80), index=True)


class Review(Base):
    """One rating, never deleted. ``before`` is the state it replaced, so it can be undone."""

    __tablename__ = "flashcard_reviews"
    __table_args__ = (
        UniqueConstraint("user_id", "card_id", "version_before", name="uq_flashcard_reviews_user_id_card_id_version"),
        UniqueConstraint("user_id", "review_key", name="uq_flashcard_reviews_user_id_review_key"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    card_id: Mapped[str] = mapped_column(ForeignKey("cards.id"), index=True)
    deck_id: Mapped[str] = mapped_column(String(80))
    # The course it was made in (app.courses.models: "default" is the course every server has). No foreign
    # key: a course is never deleted (retired instead), and SQLite adds this column to a table in place only so.
    # No index of its own: queries reach these rows by student, quiz or lab first, and an index on a column
    # with a handful of values would lead the planner away from those.
    course_id: Mapped[str] = mapped_column(String(80), default="default", server_default="default")
    review_key: Mapped[str | None] = mapped_column(String(100))  # the client's idempotency key
    raw_rating: Mapped[int] = mapped_column(Integer)  # 1-5 as pressed
    rating: Mapped[int] = mapped_column(Integer)  # fsrs.Rating: 1 Again .. 4 Easy
    reviewed_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    duration_ms: Mapped[int | None] = mapped_column(Integer)
    state_before: Mapped[int] = mapped_column(Integer)
    version_before: Mapped[int] = mapped_column(Integer)
    before: Mapped[dict[str, Any]] = mapped_column(JSON)
    after: Mapped[dict[str, Any]] = mapped_column(JSON)
    undone_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class PersonalCard(Schedule, Base):
    """A card a student made for themselves (from a quiz question no deck card covers), with its FSRS state.

    Owned by one student and seen by no one else, so the card and its scheduling share one row.
    One card per student and question: making it again finds the first.
    """

    __tablename__ = "personal_cards"
    __table_args__ = (UniqueConstraint("user_id", "question_id", name="uq_personal_cards_user_id_question_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    question_id: Mapped[str | None] = mapped_column(ForeignKey("questions.id"))
    topic: Mapped[str | None] = mapped_column(String(200))
    front_html: Mapped[str] = mapped_column(Text)
    back_html: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    @property
    def number(self) -> None:
        """Personal cards have no number (the templates show a deck card's)."""
        return None


class PersonalReview(Base):
    """One rating of a personal card; as ``Review``, kept with ``undone_at`` when undone."""

    __tablename__ = "personal_card_reviews"
    __table_args__ = (
        UniqueConstraint("card_id", "version_before", name="uq_personal_card_reviews_card_id_version_before"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    card_id: Mapped[int] = mapped_column(ForeignKey("personal_cards.id", ondelete="CASCADE"), index=True)
    raw_rating: Mapped[int] = mapped_column(Integer)
    rating: Mapped[int] = mapped_column(Integer)
    reviewed_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    duration_ms: Mapped[int | None] = mapped_column(Integer)
    state_before: Mapped[int] = mapped_column(Integer)
    version_before: Mapped[int] = mapped_column(Integer)
    before: Mapped[dict[str, Any]] = mapped_column(JSON)
    after: Mapped[dict[str, Any]] = mapped_column(JSON)
    undone_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
