"""Database rows for problem reports: what a student reported, on which item at which version, and the answer."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, UTCDateTime, utcnow

STATES = ("open", "answered", "closed")


class ProblemReport(Base):
    """One report on one content item.

    ``item_kind`` is question, part, card or lab; ``item_id`` the item's id (a part's is
    ``<exercise id>/<part id>``). ``content_digest`` fingerprints the item as the student saw it
    (``content_version`` is its label, where it has one), ``key_digest`` its marking (a question's
    key, a part's value, tolerance and unit): staff see whether either changed since.
    """

    __tablename__ = "problem_reports"
    __table_args__ = (
        CheckConstraint("state IN ('open', 'answered', 'closed')", name="state"),
        Index("ix_problem_reports_user_id_created_at", "user_id", "created_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    item_kind: Mapped[str] = mapped_column(String(16))
    item_id: Mapped[str] = mapped_column(String(170))
    # The quiz attempt a question was reported from: the student's way back to its (re-scored) result.
    attempt_id: Mapped[int | None] = mapped_column(ForeignKey("quiz_attempts.id", ondelete="SET NULL"))
    content_version: Mapped[str | None] = mapped_column(String(40))
    content_digest: Mapped[str] = mapped_column(String(64))
    key_digest: Mapped[str | None] = mapped_column(String(64))
    text: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(16), default="open", index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    answer: Mapped[str | None] = mapped_column(Text)
    answered_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    answered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # "Re-score now" by staff: who, when, and how many attempts or students' parts it changed.
    rescored_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    rescored_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    rescored_count: Mapped[int | None] = mapped_column(Integer)
