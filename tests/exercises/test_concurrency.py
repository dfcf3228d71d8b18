"""Concurrent first answers and notes on a real, separately migrated database (both backends)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, func, select

from app.db import make_engine, make_sessionmaker, session_scope, utcnow
from app.exercises import progress
from app.exercises.models import ExerciseNote, PartAnswer, PartProgress
from tests.conftest import backend_of, migrated_copy_url
from tests.factories import make_user
from tests.quizzes.test_concurrency import THREADS, run_together


@pytest.fixture(scope="module")
def race_engine(db_url: str, request: pytest.FixtureRequest) -> Iterator[Engine]:
    engine = make_engine(migrated_copy_url(backend_of(db_url), request, "exercise_race"))
    yield engine
    engine.dispose()


def test_concurrent_first_answers_count_every_attempt_in_one_row(race_engine: Engine) -> None:
    factory = make_sessionmaker(race_engine)
    with session_scope(factory) as session:
        user_id = make_user(session, "racer").id

    def wrong(answer: str):  # type: ignore[no-untyped-def]
        return lambda s: progress.answer_part("ex-26-6", "b-n4", user_id, answer, session=s, now=utcnow())

    errors = run_together(factory, [wrong(str(20 + i)) for i in range(THREADS)])
    assert errors == [None] * THREADS
    with session_scope(factory) as session:
        rows = session.scalars(select(PartProgress).where(PartProgress.user_id == user_id)).all()
        assert len(rows) == 1 and rows[0].attempts == THREADS and rows[0].solved_at is None
        logged = session.scalar(select(func.count()).select_from(PartAnswer).where(PartAnswer.user_id == user_id))
        assert logged == THREADS


def test_concurrent_first_notes_leave_one_row(race_engine: Engine) -> None:
    factory = make_sessionmaker(race_engine)
    with session_scope(factory) as session:
        user_id = make_user(session, "noter").id
    calls = [
        (lambda s, i=i: progress.save_notes("ex-26-2", user_id, f"note {i}", session=s, now=utcnow()))
        for i in range(THREADS)
    ]
    assert run_together(factory, calls) == [None] * THREADS
    with session_scope(factory) as session:
        rows = session.scalars(select(ExerciseNote).where(ExerciseNote.user_id == user_id)).all()
        assert len(rows) == 1 and rows[0].notes.startswith("note ")
