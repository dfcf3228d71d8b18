"""The labs list: the path through the labs (``app.labs.path``), with the signed-in student's states.

``group`` is pure (labs, where their exercises sit, best scores in; groups in exercise order out), and
that order breaks the ties of the path (``walk``); ``lab_path`` reads what they need from the database.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.content import records as r
from app.content.rules import number_key
from app.exercises.service import lab_best_scores
from app.labs import catalog, path
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
    best: tuple[float, int] | None  # (score, max score) of the best graded submission


@dataclass
class Group:
    title: str  # "Chapter 35 Exercises: Data parallelism"
    rows: list[Row] = field(default_factory=list)


def status(best: tuple[float, int] | None) -> Status:
    if best is None:
        return "not tried"
    return "passed" if best[1] > 0 and best[0] >= best[1] else "tried"


def group(labs: list[PublishedLab], places: dict[str, Place], best: dict[str, tuple[float, int]] | None) -> list[Group]:
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


@dataclass(frozen=True)
class PathRow:
    """One lab on the path, as the labs page and the dashboard show it."""

    lab: PublishedLab
    number: str | None  # the exercise's, e.g. "35.4"
    best: tuple[float, int] | None  # (score, max score) of the best graded submission
    step: path.Step
    waiting_on: list[PublishedLab]  # the labs to do first: "Do first: Ring all-reduce"
    after: list[PublishedLab]  # every lab it builds on
    suggested: bool  # the one lab the student should do next


@dataclass(frozen=True)
class LabPath:
    rows: list[PathRow]  # in path order: each lab after the labs it builds on
    done: int  # labs with full marks
    signed_in: bool  # False: no states, only what each lab builds on

    @property
    def suggested(self) -> PathRow | None:
        return next((row for row in self.rows if row.suggested), None)


def walk(groups: list[Group], best: dict[str, tuple[float, int]], *, signed_in: bool) -> LabPath:
    """The labs of ``groups`` as a path: their current (exercise) order breaks the ties of ``after``."""
    rows = {row.lab.id: row for g in groups for row in g.rows}
    planned = path.plan([(lab_id, row.lab.spec.after) for lab_id, row in rows.items()], best)
    out = []
    for step in planned.steps:
        row = rows[step.lab_id]
        out.append(
            PathRow(row.lab, row.number, best.get(step.lab_id), step, [rows[a].lab for a in step.waiting_on],
                    [rows[a].lab for a in step.after], signed_in and step.lab_id == planned.suggested)
        )  # fmt: skip
    return LabPath(out, planned.done, signed_in)


def lab_path(user_id: int | None, *, session: Session, assigned: set[str] | None = None) -> LabPath:
    """Every live lab on the path (of ``assigned`` only, when given: a course's), with ``user_id``'s states
    (None: signed out)."""
    labs = [lab for lab in catalog.all_labs(session).values() if assigned is None or lab.id in assigned]
    where = places({lab.spec.exercise for lab in labs}, session=session)
    best = lab_best_scores(user_id, [lab.id for lab in labs], session=session) if user_id is not None else {}
    return walk(group(labs, where, best), best, signed_in=user_id is not None)
