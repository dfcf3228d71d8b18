"""The content item a report is about: what to call it, where it lives, and how it stands now."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from markupsafe import Markup
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.content import records as r
from app.errors import NotFound
from app.reports import rules
from app.reports.rules import Snapshot


@dataclass(frozen=True)
class Item:
    """``url`` is the item's page for anyone who may see it; nothing here gives away a key."""

    kind: str
    id: str
    label: str
    url: str
    snapshot: Snapshot
    retired: bool


def _snippet(html: str, limit: int = 90) -> str:
    text = " ".join(Markup(html).striptags().split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _question(item_id: str, session: Session) -> Item:
    q = session.get(r.Question, item_id)
    if q is None:
        raise NotFound(f"There is no question '{item_id}'.")
    quiz = q.quiz
    label = f"{quiz.title}: “{_snippet(q.prompt_html)}”"
    snap = rules.question_snapshot(q.source, q.answer, quiz.version)
    return Item("question", q.id, label, f"/quizzes/{quiz.id}", snap, q.retired_at is not None)


def find_part(exercise: r.Exercise, part_id: str) -> dict[str, Any] | None:
    return next((p for p in exercise.parts if p.get("id") == part_id), None)


def _part(item_id: str, session: Session) -> Item:
    exercise_id, part_id = rules.part_ref(item_id)
    ex = session.get(r.Exercise, exercise_id)
    part = find_part(ex, part_id) if ex is not None else None
    if ex is None or part is None:
        raise NotFound(f"There is no part '{part_id}' of exercise '{exercise_id}'.")
    title = f"Exercise {ex.number}" + (f" ({ex.title})" if ex.title else "")
    label = f"{title}: “{_snippet(part.get('prompt_html', ''))}”"
    url = f"/exercises/{ex.set_id}/{ex.id}#part-{part_id}"
    return Item("part", item_id, label, url, rules.part_snapshot(part), ex.retired_at is not None)


def _card(item_id: str, session: Session) -> Item:
    card = session.get(r.Card, item_id)
    if card is None:
        raise NotFound(f"There is no flashcard '{item_id}'.")
    label = f"{card.deck.title}: card {f'#{card.number}' if card.number else card.id}"
    url = f"/flashcards/{card.deck_id}/cards/{card.id}"
    return Item("card", card.id, label, url, rules.card_snapshot(card.source), card.retired_at is not None)


def _lab(item_id: str, session: Session) -> Item:
    lab = session.get(r.Lab, item_id)
    query = select(r.LabVersion).where(r.LabVersion.lab_id == item_id, r.LabVersion.version == r.Lab.version)
    version = session.scalars(query.where(r.Lab.id == item_id)).one_or_none()
    if lab is None or version is None:
        raise NotFound(f"There is no lab '{item_id}'.")
    snap = rules.lab_snapshot(lab.version, version.digest)
    return Item("lab", lab.id, f"Lab: {lab.title}", f"/labs/{lab.id}", snap, lab.retired_at is not None)


_RESOLVERS = {"question": _question, "part": _part, "card": _card, "lab": _lab}


def resolve(kind: str, item_id: str, *, session: Session) -> Item:
    """The item as it stands now (retired ones too: a report outlives its item), or NotFound."""
    return _RESOLVERS[rules.check_kind(kind)](item_id, session)
