"""Sync upserts by id, retires what was removed, and refuses a broken tree whole."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.content import records as r
from app.content.loader import load_tree
from app.content.service import live_counts, sync_directory
from app.content.source import ContentError
from app.content.sync import sync_tree
from tests.content.factories import CARD, QUIZ, write_tree

T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = datetime(2026, 1, 2, tzinfo=UTC)


def test_repository_content_is_loaded(session: Session) -> None:
    assert live_counts(session) == {
        "quizzes": 2, "questions": 40, "exercise_sets": 2, "exercises": 51, "decks": 1, "cards": 89,
    }  # fmt: skip


def test_resync_of_same_tree_changes_nothing(session: Session, content_tree) -> None:  # type: ignore[no-untyped-def]
    report = sync_tree(content_tree, session=session, now=T1)
    assert report.summary() == {"added": {}, "updated": {}, "retired": {}, "rescored": {}}


def test_fixing_a_typo_keeps_the_id_and_updates_the_text(session: Session, tmp_path: Path) -> None:
    root = write_tree(tmp_path / "content")
    sync_tree(load_tree(root), session=session, now=T0)
    write_tree(root, **{"quizzes/tiny-quiz.yaml": QUIZ.replace("What sums tensors", "What adds tensors")})
    report = sync_tree(load_tree(root), session=session, now=T1)
    assert report.updated == {"question": 1}
    question = session.get(r.Question, "tq-1")
    assert question is not None and "What adds tensors" in question.prompt_html
    assert question.updated_at == T1


def test_removed_item_is_retired_not_deleted_and_comes_back(session: Session, tmp_path: Path) -> None:
    root = write_tree(tmp_path / "content")
    sync_tree(load_tree(root), session=session, now=T0)
    (root / "decks/tiny-deck/cards/001.md").unlink()
    (root / "decks/tiny-deck/cards/002.md").write_text(CARD.replace("tc-001", "tc-002"))
    report = sync_tree(load_tree(root), session=session, now=T1)
    assert report.retired == {"card": 1}
    card = session.get(r.Card, "tc-001")
    assert card is not None and card.retired_at == T1
    (root / "decks/tiny-deck/cards/001.md").write_text(CARD)
    sync_tree(load_tree(root), session=session, now=T1)
    card = session.get(r.Card, "tc-001")
    assert card is not None and card.retired_at is None
    assert session.scalar(select(func.count()).select_from(r.Card)) == 89 + 2


def test_broken_tree_is_refused_whole_and_database_untouched(
    session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    root = write_tree(tmp_path / "content", **{"quizzes/tiny-quiz.yaml": QUIZ.replace("answer: B", "answer: Q")})
    with session_factory() as s:
        before = live_counts(s), s.scalar(select(func.count()).select_from(r.ContentSync))
    with pytest.raises(ContentError):
        sync_directory(root, session_factory)
    with session_factory() as s:
        assert (live_counts(s), s.scalar(select(func.count()).select_from(r.ContentSync))) == before
