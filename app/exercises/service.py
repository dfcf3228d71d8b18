"""Exercise set queries."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.content.records import Exercise, ExerciseSet
from app.errors import NotFound


def list_sets(*, session: Session) -> list[tuple[ExerciseSet, int]]:
    sets = list(
        session.scalars(select(ExerciseSet).where(ExerciseSet.retired_at.is_(None)).order_by(ExerciseSet.position))
    )
    return [(s, sum(1 for e in s.exercises if e.retired_at is None)) for s in sets]


def get_set(set_id: str, *, session: Session) -> tuple[ExerciseSet, list[tuple[dict[str, str] | None, list[Exercise]]]]:
    """The set and its live exercises grouped by section, in the set's section order."""
    ex_set = session.get(ExerciseSet, set_id)
    if ex_set is None or ex_set.retired_at is not None:
        raise NotFound(f"No exercise set '{set_id}'.")
    live = [e for e in ex_set.exercises if e.retired_at is None]
    groups: list[tuple[dict[str, str] | None, list[Exercise]]] = []
    for section in ex_set.sections:
        members = [e for e in live if e.section_id == section["id"]]
        if members:
            groups.append((section, members))
    loose = [e for e in live if e.section_id is None]
    if loose:
        groups.insert(0, (None, loose))
    return ex_set, groups
