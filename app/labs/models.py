"""Database rows for lab submissions (the grading queue) and the workers that drain it."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, Enum, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, UTCDateTime, utcnow
from app.labs import outcome as outcomes


class SubmissionStatus(enum.StrEnum):
    queued = "queued"
    running = "running"
    graded = "graded"  # the checks ran; the score says how it did
    failed = "failed"  # the student's code could not be graded: syntax error, crash, time limit...
    error = "error"  # ours: the grader failed on every attempt; never counts against the student


IN_FLIGHT = (SubmissionStatus.queued, SubmissionStatus.running)
# The student's code was judged, to the end or until it stopped: its score counts towards the best.
SCORED = (SubmissionStatus.graded, SubmissionStatus.failed)


class Submission(Base):
    """One submission of code to a lab, and its place in the grading queue."""

    __tablename__ = "lab_submissions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    lab_id: Mapped[str] = mapped_column(String(80))
    # The course it was made in (app.courses.models: "default" is the course every server has). No foreign
    # key: a course is never deleted (retired instead), and SQLite adds this column to a table in place only so.
    # No index of its own: queries reach these rows by student, quiz or lab first, and an index on a column
    # with a handful of values would lead the planner away from those.
    course_id: Mapped[str] = mapped_column(String(80), default="default", server_default="default")
    # The lab version it was submitted to (lab_versions): graded against that, whatever was synced since.
    lab_version: Mapped[int | None] = mapped_column(Integer)
    code: Mapped[str] = mapped_column(Text)
    status: Mapped[SubmissionStatus] = mapped_column(
        Enum(SubmissionStatus, native_enum=False, length=16), default=SubmissionStatus.queued
    )
    # GPU labs wait for a worker that has this many GPUs; 0 means any worker.
    gpus_needed: Mapped[int] = mapped_column(Integer, default=0)
    attempts: Mapped[int] = mapped_column(Integer, default=0)  # times a worker claimed it
    worker_id: Mapped[str | None] = mapped_column(String(64))
    backend: Mapped[str | None] = mapped_column(String(16))
    submitted_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)  # never changes: rate limit
    queued_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)  # moves on a re-grade: queue order
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime)  # the lease: renewed while running
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    score: Mapped[float | None] = mapped_column(Float)  # points to one decimal: partial credit is a share
    max_score: Mapped[int | None] = mapped_column(Integer)
    verdict: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    regrades: Mapped[int] = mapped_column(Integer, default=0)

    __table_args__ = (
        Index("ix_lab_submissions_queue", "status", "queued_at"),
        Index("ix_lab_submissions_user_lab", "user_id", "lab_id", "submitted_at"),
    )

    @property
    def done(self) -> bool:
        return self.status not in IN_FLIGHT

    @property
    def outcome(self) -> outcomes.Outcome:
        """What the student is told: a score for a run that could be judged, else why it could not run."""
        verdict_status = (self.verdict or {}).get("status")
        return outcomes.of(self.status.value, verdict_status, self.score, self.max_score)


class LabWorker(Base):
    """A grading worker as it advertised itself; alive while ``last_seen_at`` is recent and it has not stopped."""

    __tablename__ = "lab_workers"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    hostname: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    cpu_count: Mapped[int] = mapped_column(Integer)
    gpu_count: Mapped[int] = mapped_column(Integer, default=0)
    sandboxed: Mapped[bool] = mapped_column(Boolean, default=True)
    # What limits and measures each rank's memory and processes: "cgroup v1", "cgroup v2" or "none".
    confinement: Mapped[str] = mapped_column(String(16), default="none", server_default="none")
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)  # its heartbeat
    stopped_at: Mapped[datetime | None] = mapped_column(UTCDateTime)  # it stopped, or its supervisor saw it die
    graded: Mapped[int] = mapped_column(Integer, default=0)


class HintView(Base):
    """A hint a student revealed: which lab, which check, which hint (0 for the first), and when first."""

    __tablename__ = "lab_hint_views"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    lab_id: Mapped[str] = mapped_column(String(80))
    check_id: Mapped[str] = mapped_column(String(80))
    hint_index: Mapped[int] = mapped_column(Integer)
    shown_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    # Revealing a hint again records nothing new: the row says when it was first shown.
    __table_args__ = (UniqueConstraint("user_id", "lab_id", "check_id", "hint_index"),)
