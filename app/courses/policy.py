"""What a course makes of one assessment for one student: its due date, late policy and attempts.

Pure: ``terms`` combines the item's own settings (its file), the course's assignment of it
(``course.yaml``) and the student's latest extension, in that order of precedence, each one
only where it says something.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

KINDS = ("quiz", "exercises", "deck", "lab")


@dataclass(frozen=True)
class Own:
    """An item's own settings, from its file."""

    due_at: datetime | None = None
    max_attempts: int | None = None
    show_answers: str | None = None


@dataclass(frozen=True)
class Grant:
    """The part of an extension that changes the terms."""

    due_at: datetime | None
    extra_attempts: int


@dataclass(frozen=True)
class Terms:
    assigned: bool  # the course assigns it (a course without a file assigns everything)
    due_at: datetime | None  # the student's due date: the extension's, else the course's, else the item's
    course_due_at: datetime | None  # the course's (what every student without an extension has)
    late: str  # "accept": late work is marked late; "refuse": the assessment closes at the due date
    max_attempts: int | None  # with the extension's extra attempts; None: unlimited
    show_answers: str | None
    extended: bool

    def closed(self, now: datetime) -> bool:
        """Whether work is refused now (a ``late: refuse`` assessment past the student's due date)."""
        return self.late == "refuse" and self.due_at is not None and now > self.due_at

    def is_late(self, at: datetime | None) -> bool:
        return at is not None and self.due_at is not None and at > self.due_at


def assignment(assignments: dict[str, Any] | None, kind: str, item_id: str) -> dict[str, Any] | None:
    """The course's settings for the item ({} when it assigns it as is), or None when it does not assign it."""
    if assignments is None:
        return {}
    return assignments.get(kind, {}).get(item_id)


def assigned_ids(assignments: dict[str, Any] | None, kind: str) -> set[str] | None:
    """The ids of ``kind`` the course assigns; None: every one."""
    return None if assignments is None else set(assignments.get(kind, {}))


def terms(assigned: dict[str, Any] | None, own: Own, grant: Grant | None = None) -> Terms:
    """The terms of an item: ``assigned`` is ``assignment(...)``'s answer, ``grant`` the student's extension."""
    settings = assigned or {}
    due = settings.get("due")
    # Stored with the course's own offset; every time the app shows or compares is UTC.
    course_due = (datetime.fromisoformat(due) if isinstance(due, str) else due) if due else own.due_at
    if course_due is not None and course_due.tzinfo is not None:
        course_due = course_due.astimezone(UTC)
    max_attempts = settings.get("max_attempts") or own.max_attempts
    if grant is not None and max_attempts is not None:
        max_attempts += grant.extra_attempts
    return Terms(
        assigned=assigned is not None,
        due_at=grant.due_at if grant is not None and grant.due_at is not None else course_due,
        course_due_at=course_due,
        late=settings.get("late") or "accept",
        max_attempts=max_attempts,
        show_answers=settings.get("show_answers") or own.show_answers,
        extended=grant is not None,
    )
