"""The labs list: grouped by the exercise sections they belong to, with the signed-in student's status.

``group`` is pure (labs, where their exercises sit, best scores in; groups out); ``catalogue``
reads what it needs from the database.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.content import records as r
from app.content.rules import number_key
from app.exercises.service import lab_best_scores
from app.labs import catalog
from app.labs.catalog import PublishedLab

Status = Literal["not tried", "tried", "passed"]


@dataclass(frozen=True)
class Place:
    """Where a lab's exercise sits: its set and section, and its number."""

    set_id: str
    set_title: str
    section: str
    number: str


@dataclass(frozen=True)
class Row:
    lab: PublishedLab
    number: str | None  # the exercise's, e.g. "35.4"
    status: Status | None  # None for someone signed out
    best: tuple[int, int] | None  # (score, max score) of the best graded submission


@dataclass
class Group:
    title: str  # "Chapter 35 Exercises: Data parallelism"
    rows: list[Row] = field(default_factory=list)


def status(best: tuple[int, int] | None) -> Status:
    if best is None:
        return "not tried"
    return "passed" if best[1] > 0 and best[0] >= best[1] else "tried"


def group(labs: list[PublishedLab], places: dict[str, Place], best: dict[str, tuple[int, int]] | None) -> list[Group]:
    """Labs by exercise set and section, in exercise order; labs whose exercise is gone come last."""
    groups: dict[str, Group] = {}
    order: dict[str, tuple[object, ...]] = {}
    for lab in labs:
        place = places.get(lab.spec.exercise)
        title = f"{place.set_title}: {place.section}" if place else "Other labs"
        key = number_key(place.number) if place else (float("inf"),)
        mine = best.get(lab.id) if best is not None else None
        row = Row(lab, place.number if place else None, status(mine) if best is not None else None, mine)
        groups.setdefault(title, Group(title)).rows.append(row)
        order[title] = min(order.get(title, key), key, key=_sortable)
    for g in groups.values():
        g.rows.sort(key=lambda row: _sortable(number_key(row.number) if row.number else (float("inf"),)))
    return sorted(groups.values(), key=lambda g: _sortable(order[g.title]))


def _sortable(key: tuple[object, ...]) -> tuple[tuple[int, object], ...]:
    # Numbers before text, so "35.10" follows "35.9" and a missing exercise sorts last.
    return tuple((0, part) if isinstance(part, int | float) else (1, str(part)) for part in key)


def places(exercise_ids: set[str], *, session: Session) -> dict[str, Place]:
    rows = session.execute(
        select(r.Exercise.id, r.Exercise.number, r.Exercise.section_id, r.ExerciseSet.id, r.ExerciseSet.title,
               r.ExerciseSet.sections)
        .join(r.ExerciseSet, r.ExerciseSet.id == r.Exercise.set_id)
        .where(r.Exercise.id.in_(exercise_ids), r.Exercise.retired_at.is_(None))
    ).all()  # fmt: skip
    out = {}
    for exercise_id, number, section_id, set_id, set_title, sections in rows:
        section = next((s.get("title", section_id) for s in sections or [] if s.get("id") == section_id), None)
        out[exercise_id] = Place(set_id, set_title, section or "", number)
    return out


def catalogue(user_id: int | None, *, session: Session) -> list[Group]:
    """Every live lab, grouped for the list page, with ``user_id``'s status (None: signed out)."""
    labs = list(catalog.all_labs(session).values())
    where = places({lab.spec.exercise for lab in labs}, session=session)
    best = lab_best_scores(user_id, [lab.id for lab in labs], session=session) if user_id is not None else None
    return group(labs, where, best)
