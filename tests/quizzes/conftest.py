"""Quiz test helpers: a fixed clock and the seed quizzes' answer keys."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.content.records import Question

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture
def key(session: Session) -> dict[str, str]:
    """Question id -> right option, for every live question."""
    return dict(session.execute(select(Question.id, Question.answer).where(Question.retired_at.is_(None))).all())


def wrong(question: Question | None, answer: str) -> str:
    """An option that is not the answer."""
    assert question is not None
    return next(o["key"] for o in question.options if o["key"] != answer)
