"""A student's work on exercises: answering parts, hints, giving up, notes and done marks.

A part's value and explanation stay on the server: ``PartView`` carries them only once the
student solved the part or gave up on it ("Show the answer"), its hint only once it is offered
(``app.exercises.standing``), and every page and API answer is built from PartViews.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.content.courses import DEFAULT_COURSE
from app.content.errata import notes_markdown
from app.content.records import Exercise
from app.errors import Conflict, InvalidInput, NotFound
from app.exercises.answers import NotANumber, is_correct
from app.exercises.models import ExerciseNote, PartAnswer, PartProgress, PartRescore
from app.exercises.standing import HINT_AFTER_WRONG, Standing, hint_offered, standing, wrong_answers

NOTES_MAX = 20_000
# The SQL form of standing.counts_as_solved, for counts over many rows.
SOLVED = and_(
    PartProgress.solved_at.is_not(None),
    or_(PartProgress.given_up_at.is_(None), PartProgress.solved_at <= PartProgress.given_up_at),
)
GAVE_UP = and_(PartProgress.given_up_at.is_not(None), ~SOLVED)


@dataclass(frozen=True)
class PartView:
    """What a student may see of one part. ``value`` and ``explanation_html`` are None until open
    (solved or given up); ``hint``/``hint_html`` are None until the hint is offered."""

    exercise_id: str
    id: str
    prompt: str
    prompt_html: str
    unit: str
    attempts: int
    standing: Standing
    last_answer: str | None
    value: float | None
    explanation: str | None
    explanation_html: str | None
    hint: str | None = None
    hint_html: str | None = None
    # The latest re-marking of the student's answers after the part's accepted value was corrected.
    rescore: PartRescore | None = None

    @property
    def solved(self) -> bool:
        return self.standing is Standing.solved

    @property
    def given_up(self) -> bool:
        return self.standing is Standing.gave_up

    @property
    def open(self) -> bool:
        return self.solved or self.given_up


@dataclass(frozen=True)
class AnswerResult:
    correct: bool
    part: PartView


@dataclass(frozen=True)
class ExerciseProgress:
    """Per-exercise standing for badges and the dashboard."""

    exercise_id: str
    solved: int
    total: int
    done: bool
    gave_up: int = 0


@dataclass(frozen=True)
class SolvedPart:
    exercise_id: str
    set_id: str
    number: str
    part_id: str
    prompt: str
    solved_at: datetime


def get_exercise(exercise_id: str, *, session: Session) -> Exercise:
    """A live exercise, or NotFound."""
    exercise = session.get(Exercise, exercise_id)
    if exercise is None or exercise.retired_at is not None or exercise.exercise_set.retired_at is not None:
        raise NotFound(f"No exercise '{exercise_id}'.")
    return exercise


def _part(exercise: Exercise, part_id: str) -> dict[str, Any]:
    for part in exercise.parts:
        if part["id"] == part_id:
            return part
    raise NotFound(f"Exercise {exercise.number} has no part '{part_id}'.")


def _view(
    exercise_id: str, part: dict[str, Any], row: PartProgress | None, rescore: PartRescore | None = None
) -> PartView:
    attempts = row.attempts if row else 0
    state = standing(attempts, row.solved_at, row.given_up_at) if row else Standing.untried
    shown = state in (Standing.solved, Standing.gave_up)
    wrong = wrong_answers(attempts, row is not None and row.solved_at is not None)
    hint = hint_offered(has_hint=bool(part.get("hint")), wrong=wrong, finished=shown)
    return PartView(
        exercise_id=exercise_id,
        id=part["id"],
        prompt=part["prompt"],
        prompt_html=part["prompt_html"],
        unit=part["unit"],
        attempts=attempts,
        standing=state,
        last_answer=row.last_answer if row else None,
        value=part["value"] if shown else None,
        explanation=part["explanation"] + notes_markdown(part.get("errata", [])) if shown else None,
        explanation_html=part["explanation_html"] if shown else None,
        hint=part["hint"] if hint else None,
        hint_html=part.get("hint_html") if hint else None,
        rescore=rescore,
    )


def _rows(user_id: int | None, exercise_ids: Iterable[str], *, session: Session) -> dict[tuple[str, str], PartProgress]:
    if user_id is None:
        return {}
    query = select(PartProgress).where(PartProgress.user_id == user_id, PartProgress.exercise_id.in_(exercise_ids))
    return {(r.exercise_id, r.part_id): r for r in session.scalars(query)}


def part_views(exercise: Exercise, user_id: int | None, *, session: Session) -> list[PartView]:
    """The exercise's parts as this student (or an anonymous reader) may see them."""
    rows = _rows(user_id, [exercise.id], session=session)
    rescores = _rescores(user_id, exercise.id, session=session)
    return [_view(exercise.id, p, rows.get((exercise.id, p["id"])), rescores.get(p["id"])) for p in exercise.parts]


def part_view(exercise: Exercise, part_id: str, user_id: int | None, *, session: Session) -> PartView:
    part = _part(exercise, part_id)
    row = _rows(user_id, [exercise.id], session=session).get((exercise.id, part_id))
    return _view(exercise.id, part, row, _rescores(user_id, exercise.id, session=session).get(part_id))


def _rescores(user_id: int | None, exercise_id: str, *, session: Session) -> dict[str, PartRescore]:
    """The latest re-marking of each of the exercise's parts for this student."""
    if user_id is None:
        return {}
    query = (
        select(PartRescore)
        .where(PartRescore.user_id == user_id, PartRescore.exercise_id == exercise_id)
        .order_by(PartRescore.id)
    )
    return {r.part_id: r for r in session.scalars(query)}


def _progress_row(user_id: int, exercise_id: str, part_id: str, *, session: Session, now: datetime) -> PartProgress:
    """The student's row for the part, created if needed and locked for this transaction."""
    query = select(PartProgress).where(
        PartProgress.user_id == user_id, PartProgress.exercise_id == exercise_id, PartProgress.part_id == part_id
    )
    row = session.scalars(query.with_for_update()).first()
    if row is not None:
        return row
    try:
        # A savepoint: on PostgreSQL two first answers can race; the loser reads the winner's row.
        with session.begin_nested():
            row = PartProgress(user_id=user_id, exercise_id=exercise_id, part_id=part_id, attempts=0, updated_at=now)
            session.add(row)
        return row
    except IntegrityError:
        return session.scalars(query.with_for_update()).one()


def answer_part(
    exercise_id: str, part_id: str, user_id: int, answer: str, *, session: Session, now: datetime,
    course_id: str = DEFAULT_COURSE,
) -> AnswerResult:  # fmt: skip
    """Check ``answer`` on the server and record the attempt.

    Raises NotFound for an unknown exercise or part and InvalidInput (nothing recorded) for an
    answer that is not a number. Once a part is solved or given up, answers are still checked
    but no longer recorded: a part given up never becomes solved by a right answer afterwards.
    """
    exercise = get_exercise(exercise_id, session=session)
    part = _part(exercise, part_id)
    try:
        correct = is_correct(answer, value=part["value"], tolerance=part["tolerance"], unit=part["unit"])
    except NotANumber as exc:
        raise InvalidInput(str(exc), field="value") from None
    row = _progress_row(user_id, exercise_id, part_id, session=session, now=now)
    if row.solved_at is None and row.given_up_at is None:
        text = answer.strip()[:80]
        session.add(
            PartAnswer(
                user_id=user_id,
                exercise_id=exercise_id,
                part_id=part_id,
                answer=text,
                correct=correct,
                answered_at=now,
                course_id=course_id,
            )
        )
        row.attempts += 1
        row.last_answer = text
        row.updated_at = now
        if correct:
            row.solved_at = now
    session.flush()
    return AnswerResult(correct, _view(exercise_id, part, row))


def give_up_part(exercise_id: str, part_id: str, user_id: int, *, session: Session, now: datetime) -> PartView:
    """ "Show the answer": record that the student gave up on the part and open its value and explanation.

    A part already solved stays solved (nothing is recorded); giving up twice keeps the first time.
    """
    exercise = get_exercise(exercise_id, session=session)
    part = _part(exercise, part_id)
    row = _progress_row(user_id, exercise_id, part_id, session=session, now=now)
    if row.given_up_at is None and row.solved_at is None:
        row.given_up_at = now
        row.updated_at = now
    session.flush()
    return _view(exercise_id, part, row)


def part_hint(exercise: Exercise, part_id: str, user_id: int, *, session: Session) -> PartView:
    """The part with its hint, or Conflict saying why the hint is not offered (yet)."""
    view = part_view(exercise, part_id, user_id, session=session)
    if view.hint_html is not None:
        return view
    if not _part(exercise, part_id).get("hint"):
        raise Conflict(f"Part '{part_id}' of exercise {exercise.number} has no hint.")
    if view.open:
        raise Conflict(f"Part '{part_id}' is finished: its worked answer is shown instead of a hint.")
    left = HINT_AFTER_WRONG - view.attempts
    raise Conflict(
        f"The hint for part '{part_id}' is offered after {HINT_AFTER_WRONG} wrong answers; "
        f"try {left} more time{'s' if left != 1 else ''} first."
    )


def get_note(exercise_id: str, user_id: int | None, *, session: Session) -> ExerciseNote | None:
    if user_id is None:
        return None
    query = select(ExerciseNote).where(ExerciseNote.user_id == user_id, ExerciseNote.exercise_id == exercise_id)
    return session.scalars(query).first()


def _note_row(exercise_id: str, user_id: int, *, session: Session, now: datetime) -> ExerciseNote:
    get_exercise(exercise_id, session=session)
    query = select(ExerciseNote).where(ExerciseNote.user_id == user_id, ExerciseNote.exercise_id == exercise_id)
    row = session.scalars(query.with_for_update()).first()
    if row is not None:
        return row
    try:
        with session.begin_nested():
            row = ExerciseNote(user_id=user_id, exercise_id=exercise_id, notes="", updated_at=now)
            session.add(row)
        return row
    except IntegrityError:
        return session.scalars(query.with_for_update()).one()


def save_notes(exercise_id: str, user_id: int, notes: str, *, session: Session, now: datetime) -> ExerciseNote:
    """Keep the student's private notes on an exercise (only they ever see them)."""
    if len(notes) > NOTES_MAX:
        raise InvalidInput(f"Notes can be at most {NOTES_MAX:,} characters; these are {len(notes):,}.", field="notes")
    row = _note_row(exercise_id, user_id, session=session, now=now)
    row.notes = notes
    row.updated_at = now
    session.flush()
    return row


def set_done(exercise_id: str, user_id: int, done: bool, *, session: Session, now: datetime) -> ExerciseNote:
    """Mark an exercise done, or not done again."""
    row = _note_row(exercise_id, user_id, session=session, now=now)
    if done and row.done_at is None:
        row.done_at = now
    elif not done:
        row.done_at = None
    row.updated_at = now
    session.flush()
    return row


def exercise_progress(
    user_id: int, *, session: Session, exercise_ids: Iterable[str] | None = None
) -> dict[str, ExerciseProgress]:
    """Solved parts, part count and the done mark for each live exercise (or those given)."""
    query = select(Exercise).where(Exercise.retired_at.is_(None))
    if exercise_ids is not None:
        query = query.where(Exercise.id.in_(list(exercise_ids)))
    exercises = list(session.scalars(query))
    ids = [e.id for e in exercises]
    standing_query = (
        select(PartProgress.exercise_id, PartProgress.part_id, SOLVED)
        .where(PartProgress.user_id == user_id, or_(SOLVED, GAVE_UP))
        .where(PartProgress.exercise_id.in_(ids))
    )
    solved: dict[str, set[str]] = {}
    gave_up: dict[str, set[str]] = {}
    for exercise_id, part_id, is_solved in session.execute(standing_query):
        (solved if is_solved else gave_up).setdefault(exercise_id, set()).add(part_id)
    done_query = select(ExerciseNote.exercise_id).where(
        ExerciseNote.user_id == user_id, ExerciseNote.done_at.is_not(None), ExerciseNote.exercise_id.in_(ids)
    )
    done = set(session.scalars(done_query))
    out = {}
    for e in exercises:
        part_ids = {p["id"] for p in e.parts}
        out[e.id] = ExerciseProgress(
            e.id,
            len(solved.get(e.id, set()) & part_ids),
            len(part_ids),
            e.id in done,
            len(gave_up.get(e.id, set()) & part_ids),
        )
    return out


def recent_solved_parts(user_id: int, *, session: Session, limit: int = 5) -> list[SolvedPart]:
    """The student's most recently solved parts, newest first (for the dashboard)."""
    query = (
        select(PartProgress, Exercise)
        .join(Exercise, Exercise.id == PartProgress.exercise_id)
        .where(PartProgress.user_id == user_id, SOLVED, Exercise.retired_at.is_(None))
        .order_by(PartProgress.solved_at.desc(), PartProgress.id.desc())
        .limit(limit)
    )
    out = []
    for row, exercise in session.execute(query):
        part = next((p for p in exercise.parts if p["id"] == row.part_id), None)
        if part is None or row.solved_at is None:
            continue
        out.append(
            SolvedPart(exercise.id, exercise.set_id, exercise.number, row.part_id, part["prompt"], row.solved_at)
        )
    return out


def solved_count(user_id: int, *, session: Session) -> int:
    """How many parts the student has solved, over all exercises."""
    query = select(func.count()).where(PartProgress.user_id == user_id, SOLVED)
    return int(session.scalar(query) or 0)
