"""Every account on the server, for site administrators: who, their site role, their courses, since when."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, func, or_, select, true
from sqlalchemy.orm import Session

from app.accounts.models import Role, User
from app.courses.models import CourseRole, Enrollment

PAGE = 100  # accounts listed at most; a search narrows the rest down


@dataclass(frozen=True)
class AccountRow:
    id: int
    username: str
    role: Role
    created_at: datetime
    courses: list[tuple[str, CourseRole]]  # (course id, role there), by course id


@dataclass(frozen=True)
class Directory:
    rows: list[AccountRow]
    total: int  # accounts that match, listed or not
    query: str

    @property
    def more(self) -> int:
        return self.total - len(self.rows)


def _matches(query: str) -> ColumnElement[bool]:
    """Username, full name or e-mail containing ``query``, whatever its case."""
    if not query:
        return true()
    needle = query.lower()
    return or_(
        User.username_key.contains(needle, autoescape=True),
        func.lower(User.full_name).contains(needle, autoescape=True),
        func.lower(User.email).contains(needle, autoescape=True),
    )


def accounts(query: str = "", *, session: Session, limit: int = PAGE) -> Directory:
    """The accounts matching ``query`` (all when empty), by username, at most ``limit`` of them."""
    query = query.strip()
    where = _matches(query)
    total = session.scalar(select(func.count()).select_from(User).where(where)) or 0
    users = list(session.scalars(select(User).where(where).order_by(User.username_key).limit(limit)))
    courses: dict[int, list[tuple[str, CourseRole]]] = {u.id: [] for u in users}
    if users:
        enrolled = session.execute(
            select(Enrollment.user_id, Enrollment.course_id, Enrollment.role)
            .where(Enrollment.user_id.in_(list(courses)))
            .order_by(Enrollment.course_id)
        )
        for user_id, course_id, role in enrolled:
            courses[user_id].append((course_id, role))
    rows = [AccountRow(u.id, u.username, u.role, u.created_at, courses[u.id]) for u in users]
    return Directory(rows, total, query)


def account(user_id: int, *, session: Session) -> AccountRow | None:
    """One account as the list shows it; None if there is none."""
    user = session.get(User, user_id)
    if user is None:
        return None
    enrolled = session.execute(
        select(Enrollment.course_id, Enrollment.role)
        .where(Enrollment.user_id == user_id)
        .order_by(Enrollment.course_id)
    )
    return AccountRow(user.id, user.username, user.role, user.created_at, [(c, r) for c, r in enrolled])
