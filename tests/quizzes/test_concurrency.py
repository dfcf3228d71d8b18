"""Concurrent writes on a real, separately migrated database (not the rolled-back test transaction)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session, sessionmaker

from app.db import make_engine, make_sessionmaker, session_scope, utcnow
from app.errors import DomainError
from app.quizzes import attempts
from app.quizzes.models import QuizAnswer
from tests.conftest import backend_of, migrated_copy_url
from tests.factories import make_user

THREADS = 8


@pytest.fixture(scope="module")
def race_engine(db_url: str, request: pytest.FixtureRequest) -> Iterator[Engine]:
    engine = make_engine(migrated_copy_url(backend_of(db_url), request, "quiz_race"))
    yield engine
    engine.dispose()


def run_together(factory: sessionmaker[Session], calls: list) -> list[BaseException | None]:  # type: ignore[type-arg]
    barrier = threading.Barrier(len(calls))
    errors: list[BaseException | None] = [None] * len(calls)

    def worker(i: int) -> None:
        barrier.wait()
        try:
            with session_scope(factory) as session:
                calls[i](session)
        except BaseException as exc:  # collected and asserted on below
            errors[i] = exc

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return errors


def test_concurrent_saves_of_one_answer_leave_one_row(race_engine: Engine) -> None:
    factory = make_sessionmaker(race_engine)
    with session_scope(factory) as session:
        user = make_user(session, f"racer-{race_engine.dialect.name}")
        attempt, _ = attempts.start_attempt("module-202", user.id, session=session, now=utcnow())
        ids = (attempt.id, user.id)
    choices = "ABCDABCD"

    def save(i: int):  # type: ignore[no-untyped-def]
        return lambda s: attempts.save_answer(ids[0], ids[1], "m202-q01", choices[i], session=s, now=utcnow())

    errors = run_together(factory, [save(i) for i in range(THREADS)])
    assert errors == [None] * THREADS
    with session_scope(factory) as session:
        rows = session.scalars(select(QuizAnswer).where(QuizAnswer.attempt_id == ids[0])).all()
        assert len(rows) == 1 and rows[0].choice in "ABCD"


def test_concurrent_submits_give_one_result(race_engine: Engine) -> None:
    factory = make_sessionmaker(race_engine)
    with session_scope(factory) as session:
        user = make_user(session, f"submitter-{race_engine.dialect.name}")
        attempt, _ = attempts.start_attempt("module-202", user.id, session=session, now=utcnow())
        attempts.save_answer(attempt.id, user.id, "m202-q01", "C", session=session, now=utcnow())
        ids = (attempt.id, user.id)
    results: list[object] = []

    def submit(i: int):  # type: ignore[no-untyped-def]
        def call(s: Session) -> None:
            done = attempts.submit(ids[0], ids[1], session=s, now=utcnow() + timedelta(seconds=i))
            results.append((done.submitted_at, done.score))

        return call

    def late_save(s: Session) -> None:
        # Refused when the submit won the race: fine.
        with contextlib.suppress(DomainError):
            attempts.save_answer(ids[0], ids[1], "m202-q02", "A", session=s, now=utcnow())

    errors = run_together(factory, [submit(i) for i in range(THREADS - 1)] + [late_save])
    assert errors == [None] * THREADS
    assert len(set(results)) == 1
    with session_scope(factory) as session:
        answers = session.scalar(select(func.count()).where(QuizAnswer.attempt_id == ids[0]))
        graded = session.scalar(
            select(func.count()).where(QuizAnswer.attempt_id == ids[0], QuizAnswer.correct.is_not(None))
        )
        # Either the late save landed before the submit (and was graded) or it was refused.
        assert answers == graded
