"""Loading the content tree into the database: the one entry point for CLI and app start."""

from __future__ import annotations

import logging
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.content import records as r
from app.content.loader import load_tree
from app.content.sync import SyncReport, sync_tree
from app.db import session_scope, utcnow

log = logging.getLogger(__name__)


def sync_directory(root: Path, factory: sessionmaker[Session]) -> SyncReport:
    """Validate ``root`` and upsert it in one transaction.

    Raises ContentError before touching the database if anything is wrong, so a
    broken tree is refused whole and the content already loaded keeps serving.
    """
    tree = load_tree(root)
    with session_scope(factory) as session:
        return sync_tree(tree, session=session, now=utcnow())


def last_sync(session: Session) -> r.ContentSync | None:
    return session.scalars(select(r.ContentSync).order_by(r.ContentSync.id.desc()).limit(1)).first()


def live_counts(session: Session) -> dict[str, int]:
    """How many items of each kind are live (not retired)."""
    counts = {}
    for name, model in (("quizzes", r.Quiz), ("questions", r.Question), ("exercise_sets", r.ExerciseSet),
                        ("exercises", r.Exercise), ("decks", r.Deck), ("cards", r.Card)):  # fmt: skip
        counts[name] = session.scalar(select(func.count()).select_from(model).where(model.retired_at.is_(None))) or 0
    return counts
