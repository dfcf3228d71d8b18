"""Exercise set queries: the list of sets, a set's page (filters, contents, badges), an exercise's page."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.content.records import Exercise, ExerciseSet
from app.errors import NotFound
from app.exercises import progress
from app.exercises.models import ExerciseNote
from app.labs.models import SCORED, Submission
from labs.verdict import show_points


@dataclass(frozen=True)
class Badge:
    """A short status next to an exercise: ``kind`` is a CSS hook (todo, partial, complete, done, lab)."""

    text: str
    kind: str


@dataclass(frozen=True)
class Filters:
    section: str | None = None
    difficulty: int | None = None

    @property
    def active(self) -> bool:
        return self.section is not None or self.difficulty is not None


@dataclass
class SetPage:
    set: ExerciseSet
    groups: list[tuple[dict[str, str] | None, list[Exercise]]]
    filters: Filters
    difficulties: list[int]
    total: int
    badges: dict[str, list[Badge]] = field(default_factory=dict)

    @property
    def shown(self) -> int:
        return sum(len(exercises) for _, exercises in self.groups)


def list_sets(*, session: Session) -> list[tuple[ExerciseSet, int]]:
    sets = list(
        session.scalars(select(ExerciseSet).where(ExerciseSet.retired_at.is_(None)).order_by(ExerciseSet.position))
    )
    return [(s, sum(1 for e in s.exercises if e.retired_at is None)) for s in sets]


def _live_set(set_id: str, *, session: Session) -> ExerciseSet:
    ex_set = session.get(ExerciseSet, set_id)
    if ex_set is None or ex_set.retired_at is not None:
        raise NotFound(f"No exercise set '{set_id}'.")
    return ex_set


def get_set(set_id: str, *, session: Session) -> tuple[ExerciseSet, list[tuple[dict[str, str] | None, list[Exercise]]]]:
    """The set and its live exercises grouped by section, in the set's section order."""
    page = set_page(set_id, Filters(), None, {}, session=session)
    return page.set, page.groups


def badges(
    parts: int, state: progress.ExerciseProgress | None, lab_score: tuple[float, int] | None, has_lab: bool
) -> list[Badge]:
    """The badges for one exercise: solved parts, parts given up, done, its lab's best score (pure)."""
    out: list[Badge] = []
    if parts:
        if state is None:
            out.append(Badge(f"{parts} part{'s' if parts != 1 else ''} to answer", "todo"))
        else:
            kind = "complete" if state.solved == parts else "partial" if state.solved else "todo"
            out.append(Badge(f"{state.solved}/{parts} parts solved", kind))
            if state.gave_up:
                out.append(Badge(f"gave up on {state.gave_up}", "gave-up"))
    if has_lab:
        if lab_score is not None:
            kind = "complete" if lab_score[0] >= lab_score[1] else "lab"
            out.append(Badge(f"lab best {show_points(lab_score[0])}/{lab_score[1]}", kind))
        elif state is not None:
            out.append(Badge("lab not tried", "todo"))
    if state is not None and state.done:
        out.append(Badge("done", "done"))
    return out


def lab_best_scores(user_id: int, lab_ids: Iterable[str], *, session: Session) -> dict[str, tuple[float, int]]:
    """The student's best graded score per lab, as (score, max score); a score is points to one decimal."""
    ids = list(lab_ids)
    if not ids:
        return {}
    query = (
        select(Submission.lab_id, func.max(Submission.score), func.max(Submission.max_score))
        .where(Submission.user_id == user_id, Submission.lab_id.in_(ids))
        .where(Submission.status.in_(SCORED), Submission.score.is_not(None))
        .group_by(Submission.lab_id)
    )
    return {lab_id: (float(score or 0), int(top or 0)) for lab_id, score, top in session.execute(query)}


def set_page(set_id: str, filters: Filters, user_id: int | None, labs: dict[str, str], *, session: Session) -> SetPage:
    """A set's exercises filtered by section and difficulty, grouped by section, with badges.

    ``labs`` maps exercise id to the id of the lab that grades it.
    """
    ex_set = _live_set(set_id, session=session)
    live = [e for e in ex_set.exercises if e.retired_at is None]
    difficulties = sorted({e.difficulty for e in live if e.difficulty is not None})
    shown = [
        e
        for e in live
        if (filters.section is None or e.section_id == filters.section)
        and (filters.difficulty is None or e.difficulty == filters.difficulty)
    ]
    groups: list[tuple[dict[str, str] | None, list[Exercise]]] = []
    for section in ex_set.sections:
        members = [e for e in shown if e.section_id == section["id"]]
        if members:
            groups.append((section, members))
    loose = [e for e in shown if e.section_id is None]
    if loose:
        groups.insert(0, (None, loose))
    states = progress.exercise_progress(user_id, session=session, exercise_ids=[e.id for e in live]) if user_id else {}
    scores = lab_best_scores(user_id, labs.values(), session=session) if user_id else {}
    page = SetPage(ex_set, groups, filters, difficulties, len(live))
    for e in shown:
        lab_id = labs.get(e.id)
        page.badges[e.id] = badges(
            len(e.parts), states.get(e.id), scores.get(lab_id) if lab_id else None, lab_id is not None
        )
    return page


@dataclass
class ExercisePage:
    exercise: Exercise
    parts: list[progress.PartView]
    note: ExerciseNote | None
    badges: list[Badge]


def exercise_in_set(set_id: str, exercise_id: str, *, session: Session) -> Exercise:
    """A live exercise of the set named in the address, or NotFound."""
    exercise = progress.get_exercise(exercise_id, session=session)
    if exercise.set_id != set_id:
        raise NotFound(f"No exercise '{exercise_id}' in the set '{set_id}'.")
    return exercise


def exercise_page(
    set_id: str, exercise_id: str, user_id: int | None, lab_id: str | None, *, session: Session
) -> ExercisePage:
    """One exercise with its parts as the student may see them, their notes and badges."""
    exercise = exercise_in_set(set_id, exercise_id, session=session)
    parts = progress.part_views(exercise, user_id, session=session)
    note = progress.get_note(exercise_id, user_id, session=session)
    state = None
    score = None
    if user_id is not None:
        state = progress.exercise_progress(user_id, session=session, exercise_ids=[exercise_id]).get(exercise_id)
        score = lab_best_scores(user_id, [lab_id], session=session).get(lab_id) if lab_id else None
    return ExercisePage(exercise, parts, note, badges(len(parts), state, score, lab_id is not None))
