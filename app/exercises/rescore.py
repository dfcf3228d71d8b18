"""Marking students' answers to a part again after its accepted value is corrected.

Content sync calls ``rescore_parts`` in its own transaction when a part's value, tolerance or
unit changes. Every stored answer to the part is checked again; the part counts as solved from
the first answer that is right under the new marking (and no longer counts where none is).
Each student whose standing or answers changed gets a ``PartRescore`` row, shown beside the part.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from app.exercises.answers import NotANumber, is_correct
from app.exercises.models import PartAnswer, PartProgress, PartRescore


@dataclass(frozen=True)
class PartChange:
    """Part ``part_id`` of ``exercise_id`` is now marked against ``value`` within ``tolerance``."""

    exercise_id: str
    part_id: str
    value: float
    tolerance: float | str
    unit: str
    note_html: str = ""

    def accepts(self, answer: str) -> bool:
        try:
            return is_correct(answer, value=self.value, tolerance=self.tolerance, unit=self.unit)
        except NotANumber:
            return False


def rescore_parts(changes: list[PartChange], *, session: Session, now: datetime) -> int:
    """Re-mark every answer to the parts in ``changes``; returns how many students' parts changed."""
    by_part = {(c.exercise_id, c.part_id): c for c in changes}
    keys = list(by_part)
    answers = session.scalars(
        select(PartAnswer)
        .where(tuple_(PartAnswer.exercise_id, PartAnswer.part_id).in_(keys))
        .order_by(PartAnswer.answered_at, PartAnswer.id)
    ).all()
    firsts: dict[tuple[int, str, str], datetime] = {}
    flipped: dict[tuple[int, str, str], int] = {}
    for answer in answers:
        key = (answer.user_id, answer.exercise_id, answer.part_id)
        right = by_part[(answer.exercise_id, answer.part_id)].accepts(answer.answer)
        if right != answer.correct:
            answer.correct = right
            flipped[key] = flipped.get(key, 0) + 1
        if right:
            firsts.setdefault(key, answer.answered_at)
    rows = session.scalars(
        select(PartProgress).where(tuple_(PartProgress.exercise_id, PartProgress.part_id).in_(keys)).with_for_update()
    ).all()
    changed = 0
    for row in rows:
        key = (row.user_id, row.exercise_id, row.part_id)
        solved_at = firsts.get(key)
        was = row.solved_at is not None
        if was == (solved_at is not None) and not flipped.get(key):
            continue
        row.solved_at, row.updated_at = solved_at, now
        note = by_part[(row.exercise_id, row.part_id)].note_html
        session.add(
            PartRescore(
                user_id=row.user_id, exercise_id=row.exercise_id, part_id=row.part_id, was_solved=was,
                now_solved=solved_at is not None, answers_changed=flipped.get(key, 0), note_html=note, rescored_at=now,
            )
        )  # fmt: skip
        changed += 1
    return changed
