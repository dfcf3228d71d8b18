"""Upsert a validated content tree into the database by id, in one transaction.

Items are matched by the ids written in their files, so editing text keeps
every student's history. Items no longer in the tree are retired (hidden),
never deleted; an item that comes back is un-retired.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.content import markdown
from app.content import models as m
from app.content import records as r
from app.content.courses import DEFAULT_COURSE
from app.content.errata import notes_html
from app.content.lab_sync import sync_labs
from app.exercises.rescore import PartChange, rescore_parts
from app.quizzes.rescore import KeyChange, rescore_keys

Row = TypeVar("Row", bound=r.ContentItem)


@dataclass
class SyncReport:
    added: dict[str, int] = field(default_factory=dict)
    updated: dict[str, int] = field(default_factory=dict)
    retired: dict[str, int] = field(default_factory=dict)
    # Submitted quiz attempts and students' exercise parts re-marked because a key changed.
    rescored: dict[str, int] = field(default_factory=dict)
    digest: str = ""

    def count(self, bucket: dict[str, int], kind: str) -> None:
        bucket[kind] = bucket.get(kind, 0) + 1

    def summary(self) -> dict[str, Any]:
        return {"added": self.added, "updated": self.updated, "retired": self.retired, "rescored": self.rescored}


def digest(tree: m.ContentTree) -> str:
    """A stable fingerprint of the whole tree's content."""
    return hashlib.sha256(json.dumps(tree.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()


class _Upserter:
    def __init__(self, session: Session, now: datetime, report: SyncReport):
        self.session = session
        self.now = now
        self.report = report
        self.seen: dict[type, set[str]] = {}
        self.existing: dict[type, dict[str, Any]] = {}

    def _existing(self, model: type[Row]) -> dict[str, Row]:
        # One query per table instead of one per item.
        if model not in self.existing:
            self.existing[model] = {row.id: row for row in self.session.scalars(select(model))}
        return self.existing[model]

    def current(self, model: type[Row], item_id: str) -> Row | None:
        """The row as it stands before this sync, if there is one."""
        return self._existing(model).get(item_id)

    def upsert(self, model: type[Row], kind: str, item_id: str, position: int, values: dict[str, Any]) -> Row:
        self.seen.setdefault(model, set()).add(item_id)
        row = self._existing(model).get(item_id)
        values = {**values, "position": position, "retired_at": None}
        if row is None:
            row = model(id=item_id, updated_at=self.now, **values)  # type: ignore[call-arg]
            self.session.add(row)
            self.report.count(self.report.added, kind)
            return row
        changed = {k: v for k, v in values.items() if getattr(row, k) != v}
        if changed:
            for key, value in changed.items():
                setattr(row, key, value)
            row.updated_at = self.now
            self.report.count(self.report.updated, kind)
        return row

    def retire_unseen(self, model: type[Row], kind: str) -> None:
        seen = self.seen.get(model, set())
        for row in self._existing(model).values():
            if row.id not in seen and row.retired_at is None:
                row.retired_at = self.now
                self.report.count(self.report.retired, kind)


def _quiz_values(quiz: m.Quiz) -> dict[str, Any]:
    return {
        "title": quiz.title,
        "description_html": markdown.render(quiz.description),
        "version": quiz.version,
        "last_updated": quiz.last_updated,
        "passing_score": quiz.passing_score,
        "time_limit_minutes": quiz.time_limit_minutes,
        "shuffle_options": quiz.shuffle_options,
        "max_attempts": quiz.max_attempts,
        "show_answers": quiz.show_answers,
        "due_at": quiz.due,
        "sections": [s.model_dump() for s in quiz.sections],
        "scoring_guide": [
            {**t.model_dump(), "recommendation_html": markdown.render_inline(t.recommendation)}
            for t in quiz.scoring_guide
        ],
        "source": quiz.model_dump(exclude={"questions"}, mode="json"),
    }


def _question_values(quiz: m.Quiz, q: m.Question) -> dict[str, Any]:
    return {
        "quiz_id": quiz.id,
        "section_id": q.section,
        "prompt_html": markdown.render(q.prompt),
        "options": [{"key": o.key, "html": markdown.render_inline(o.text)} for o in q.options],
        "answer": q.answer,
        "explanation_html": markdown.render(q.explanation) + notes_html(q.errata),
        "card_ids": list(q.cards),
        "source": q.model_dump(),
    }


def _part_values(part: m.AnswerPart) -> dict[str, Any]:
    # The value and the explanation live here and leave the server only once a part is solved.
    return {
        **part.model_dump(),
        "prompt_html": markdown.render_inline(part.prompt),
        "explanation_html": markdown.render(part.explanation) + notes_html(part.errata),
        "hint_html": markdown.render(part.hint) if part.hint else None,
    }


def _erratum_note(errata: list[m.Erratum], fields: tuple[str, ...]) -> str:
    """The students' note of the erratum that explains a key change, if the change is one."""
    return next((markdown.render_inline(e.note) for e in errata if e.field in fields), "")


def _key_change(row: r.Question | None, q: m.Question) -> KeyChange | None:
    if row is None or row.answer == q.answer:
        return None
    return KeyChange(q.id, row.answer, q.answer, _erratum_note(q.errata, ("answer",)))


_MARKING = ("value", "tolerance", "unit")


def _part_changes(row: r.Exercise | None, ex: m.Exercise) -> list[PartChange]:
    """Parts whose marking (value, tolerance or unit) differs from what students were marked against."""
    before = {p["id"]: p for p in (row.parts if row is not None else [])}
    out = []
    for part in ex.parts:
        old = before.get(part.id)
        if old is not None and any(old.get(k) != getattr(part, k) for k in _MARKING):
            note = _erratum_note(part.errata, _MARKING)
            out.append(PartChange(ex.id, part.id, part.value, part.tolerance, part.unit, note))
    return out


DEFAULT_COURSE_VALUES: dict[str, Any] = {
    "title": "Default course", "term": None, "starts_on": None, "ends_on": None, "time_zone": "UTC",
    "assignments": None,
}  # fmt: skip


def _sync_courses(courses: list[m.CourseContent], up: _Upserter) -> None:
    """Each course.yaml, and the default course (everything assigned) unless a file describes it."""
    for i, course in enumerate(courses, start=1):
        assignments = {
            kind: {
                item: a.model_dump(mode="json") | {"due": _iso(a.due_at(course.time_zone))} for item, a in items.items()
            }
            for kind, items in course.kinds().items()
        }
        values = {
            "title": course.title,
            "term": course.term,
            "starts_on": course.starts.isoformat() if course.starts else None,
            "ends_on": course.ends.isoformat() if course.ends else None,
            "time_zone": course.time_zone,
            "assignments": assignments,
        }
        _course_version(up, course.id, 0 if course.id == DEFAULT_COURSE else i, values)
    if all(course.id != DEFAULT_COURSE for course in courses):
        _course_version(up, DEFAULT_COURSE, 0, DEFAULT_COURSE_VALUES)


def _course_version(up: _Upserter, course_id: str, position: int, values: dict[str, Any]) -> None:
    """Upsert the course; a new or changed one gets a new numbered version, kept in ``course_versions``."""
    row = up.current(r.Course, course_id)
    before = None if row is None else {key: getattr(row, key) for key in values}
    version = 1 if row is None else row.version + (before != values)
    up.upsert(r.Course, "course", course_id, position, {**values, "version": version})
    if row is None or before != values:
        up.session.flush()  # the course row first: its versions refer to it
        up.session.add(r.CourseVersion(course_id=course_id, version=version, values=values, created_at=up.now))


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def sync_tree(tree: m.ContentTree, *, session: Session, now: datetime) -> SyncReport:
    """Make the database's content match ``tree``. The caller owns the transaction."""
    report = SyncReport(digest=digest(tree))
    up = _Upserter(session, now, report)
    keys: list[KeyChange] = []
    parts: list[PartChange] = []
    for qi, quiz in enumerate(tree.quizzes):
        up.upsert(r.Quiz, "quiz", quiz.id, qi, _quiz_values(quiz))
        for i, q in enumerate(quiz.questions):
            if change := _key_change(up.current(r.Question, q.id), q):
                keys.append(change)
            up.upsert(r.Question, "question", q.id, i, _question_values(quiz, q))
    for si, ex_set in enumerate(tree.exercise_sets):
        up.upsert(
            r.ExerciseSet,
            "exercise set",
            ex_set.id,
            si,
            {
                "title": ex_set.title,
                "description_html": markdown.render(ex_set.description),
                "sections": [s.model_dump() for s in ex_set.sections],
                "difficulty_legend": {str(k): v for k, v in ex_set.difficulty_legend.items()},
                "source": ex_set.model_dump(exclude={"exercises"}, mode="json"),
            },
        )
        for i, ex in enumerate(ex_set.exercises):
            parts += _part_changes(up.current(r.Exercise, ex.id), ex)
            values = {
                "set_id": ex_set.id,
                "number": ex.number,
                "title": ex.title,
                "section_id": ex.section,
                "difficulty": ex.difficulty,
                "body_html": markdown.render(ex.body) + notes_html(ex.errata),
                "parts": [_part_values(part) for part in ex.parts],
                "source": ex.model_dump(exclude={"parts"}),
            }
            up.upsert(r.Exercise, "exercise", ex.id, i, values)
    for di, deck in enumerate(tree.decks):
        deck_values = {
            "title": deck.title,
            "description_html": markdown.render(deck.description),
            "rating_prompt": deck.rating_prompt,
            "rating_labels": {str(k): v for k, v in deck.rating_labels.items()},
            "source": deck.model_dump(exclude={"cards"}, mode="json"),
        }
        up.upsert(r.Deck, "deck", deck.id, di, deck_values)
        for i, card in enumerate(deck.cards):
            values = {
                "deck_id": deck.id,
                "number": card.number,
                "topic": card.topic,
                "front_html": markdown.render(card.front),
                "back_html": markdown.render(card.back) + notes_html(card.errata),
                "source": card.model_dump(),
            }
            up.upsert(r.Card, "card", card.id, i, values)
    sync_labs(tree.labs, up.upsert, session=session, now=now)
    _sync_courses(tree.courses, up)
    # Children first, so a retired parent never hides a live child.
    for model, kind in ((r.Question, "question"), (r.Quiz, "quiz"), (r.Exercise, "exercise"),
                        (r.ExerciseSet, "exercise set"), (r.Card, "card"), (r.Deck, "deck"),
                        (r.Lab, "lab"), (r.Course, "course")):  # fmt: skip
        up.retire_unseen(model, kind)
    session.flush()
    if keys:
        report.rescored["quiz attempt"] = rescore_keys(keys, session=session, now=now)
    if parts:
        report.rescored["exercise part"] = rescore_parts(parts, session=session, now=now)
    session.add(r.ContentSync(synced_at=now, digest=report.digest, summary=report.summary()))
    return report
