"""The course a gradebook is of: its assignments, its due dates per column, its students' extensions."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.content.courses import DEFAULT_COURSE
from app.content.records import Course
from app.courses import extensions, policy


@dataclass
class Context:
    """What sources may need besides the session: the time, and the course whose gradebook it is.

    ``assignments`` is the course's (app.content.records.Course): None assigns everything, each item
    with its own settings. ``for_course`` reads it.
    """

    now: datetime
    course_id: str = DEFAULT_COURSE
    assignments: dict[str, Any] | None = None
    _grants: dict[tuple[int, str], policy.Grant] | None = field(default=None, repr=False)

    def grants(self, session: Session) -> dict[tuple[int, str], policy.Grant]:
        """The course's extensions in force, per (student, column key): read once per gradebook."""
        if self._grants is None:
            self._grants = extensions.in_force(self.course_id, session=session)
        return self._grants

    @classmethod
    def for_course(cls, course_id: str, *, now: datetime, session: Session) -> Context:
        assignments = session.scalar(select(Course.assignments).where(Course.id == course_id))
        return cls(now, course_id, assignments)

    def assigned(self, kind: str, item_id: str) -> bool:
        return policy.assignment(self.assignments, kind, item_id) is not None

    def due(self, kind: str, item_id: str, own: datetime | None) -> datetime | None:
        """The course's due date for the item (every student without an extension has it)."""
        return policy.terms(policy.assignment(self.assignments, kind, item_id), policy.Own(own)).course_due_at
