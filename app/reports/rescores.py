"""The re-scoring a report's item went through: what content sync did after its key was corrected, and
"Re-score now" for staff, which runs the same functions again (a second run changes nothing)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import distinct, func, select
from sqlalchemy.orm import Session

from app.content import markdown
from app.content import records as r
from app.errors import Conflict
from app.exercises.models import PartRescore
from app.exercises.rescore import PartChange, rescore_parts
from app.quizzes.models import QuizAttempt, QuizRescore
from app.quizzes.rescore import KeyChange, rescore_keys
from app.reports import items, rules
from app.reports.models import ProblemReport


@dataclass(frozen=True)
class Summary:
    """Re-markings of the item since the report: ``marked`` attempts (a question) or students' parts (a
    part), ``answers`` answers whose verdict flipped (parts only), ``students`` distinct students."""

    kind: str
    marked: int
    answers: int
    students: int
    last_at: datetime | None


@dataclass(frozen=True)
class Mine:
    """The student's own re-scoring of what they reported: where to read it, and when it happened."""

    url: str
    rescored_at: datetime


def summary(report: ProblemReport, *, session: Session) -> Summary | None:
    """The automatic (and staff) re-scores of the reported question or part made after the report; None for others."""
    since = report.created_at
    if report.item_kind == "question":
        q = session.execute(
            select(func.count(distinct(QuizRescore.attempt_id)), func.count(distinct(QuizAttempt.user_id)),
                   func.max(QuizRescore.rescored_at))
            .join(QuizAttempt, QuizAttempt.id == QuizRescore.attempt_id)
            .where(QuizRescore.question_id == report.item_id, QuizRescore.rescored_at >= since)
        ).one()  # fmt: skip
        return Summary("question", int(q[0]), int(q[0]), int(q[1]), q[2])
    if report.item_kind == "part":
        exercise_id, part_id = rules.part_ref(report.item_id)
        row = session.execute(
            select(func.count(), func.coalesce(func.sum(PartRescore.answers_changed), 0),
                   func.count(distinct(PartRescore.user_id)), func.max(PartRescore.rescored_at))
            .where(PartRescore.exercise_id == exercise_id, PartRescore.part_id == part_id)
            .where(PartRescore.rescored_at >= since)
        ).one()  # fmt: skip
        return Summary("part", int(row[0]), int(row[1]), int(row[2]), row[3])
    return None


def mine(report: ProblemReport, *, session: Session) -> Mine | None:
    """Where the reporting student reads their corrected score for the item, if it was re-scored."""
    if report.item_kind == "question" and report.attempt_id is not None:
        at = session.scalar(
            select(func.max(QuizRescore.rescored_at)).where(
                QuizRescore.attempt_id == report.attempt_id, QuizRescore.question_id == report.item_id
            )
        )
        return Mine(f"/quizzes/attempts/{report.attempt_id}/result#rescored-heading", at) if at else None
    if report.item_kind == "part":
        exercise_id, part_id = rules.part_ref(report.item_id)
        at = session.scalar(
            select(func.max(PartRescore.rescored_at)).where(
                PartRescore.user_id == report.user_id, PartRescore.exercise_id == exercise_id,
                PartRescore.part_id == part_id,
            )
        )  # fmt: skip
        if at is None:
            return None
        ex = session.get(r.Exercise, exercise_id)
        return Mine(f"/exercises/{ex.set_id if ex else ''}/{exercise_id}#part-{part_id}", at)
    return None


def _note(errata: list[dict[str, Any]], fields: tuple[str, ...]) -> str:
    return next((markdown.render_inline(e["note"]) for e in errata if e.get("field") in fields and e.get("note")), "")


def rescore_now(report: ProblemReport, staff_id: int, *, session: Session, now: datetime) -> int:
    """Mark again everything marked against another key than the item's current one; records who and when.

    Returns how many attempts (a question) or students' parts (a part) changed: 0 when sync had done it.
    """
    if report.item_kind == "question":
        q = session.get(r.Question, report.item_id)
        assert q is not None  # content rows are never deleted
        note = _note(q.source.get("errata", []), ("answer",))
        count = rescore_keys([KeyChange(q.id, q.answer, q.answer, note)], session=session, now=now)
    elif report.item_kind == "part":
        exercise_id, part_id = rules.part_ref(report.item_id)
        ex = session.get(r.Exercise, exercise_id)
        part = items.find_part(ex, part_id) if ex is not None else None
        if part is None:
            raise Conflict("This part is no longer in its exercise: there is nothing to re-score against.")
        note = _note(part.get("errata", []), rules.PART_MARKING)
        change = PartChange(exercise_id, part_id, part["value"], part["tolerance"], part["unit"], note)
        count = rescore_parts([change], session=session, now=now)
    else:
        raise Conflict("Only quiz questions and exercise parts are scored: there is nothing to re-score.")
    report.rescored_by, report.rescored_at, report.rescored_count = staff_id, now, count
    return count
