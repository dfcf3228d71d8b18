"""Counts of people, for the instructor overview."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.accounts.models import Role, User


def people(*, session: Session) -> dict[str, int]:
    rows = session.execute(select(User.role, func.count()).group_by(User.role)).all()
    counts = {role.value: 0 for role in Role}
    counts.update({role.value: n for role, n in rows})
    return counts
