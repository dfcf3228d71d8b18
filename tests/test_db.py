"""Reader and writer sessions (app.db) on a real, separately migrated database."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, func, select, update

from app.accounts.models import User
from app.db import NOWAIT, ReadOnlySession, WriterBusy, make_engine, make_sessionmaker, session_scope
from tests.conftest import backend_of, migrated_copy_url
from tests.factories import make_user


@pytest.fixture(scope="module")
def db_engine(db_url: str, request: pytest.FixtureRequest) -> Iterator[Engine]:
    engine = make_engine(migrated_copy_url(backend_of(db_url), request, "sessions"))
    yield engine
    engine.dispose()


def test_a_reader_refuses_to_flush_a_change(db_engine: Engine) -> None:
    with session_scope(make_sessionmaker(db_engine)) as session:
        make_user(session, f"reader-{db_engine.dialect.name}")
    with pytest.raises(ReadOnlySession), session_scope(make_sessionmaker(db_engine, read_only=True)) as session:
        user = session.scalars(select(User).where(User.username == f"reader-{db_engine.dialect.name}")).one()
        user.username = "renamed"
        session.flush()
    with session_scope(make_sessionmaker(db_engine)) as session:
        assert session.scalar(select(func.count()).select_from(User).where(User.username == "renamed")) == 0


def test_a_reader_refuses_a_bulk_update(db_engine: Engine) -> None:
    with pytest.raises(ReadOnlySession), session_scope(make_sessionmaker(db_engine, read_only=True)) as session:
        session.execute(update(User).values(username="everyone"))


def test_readers_run_while_a_writer_holds_the_write_lock(db_engine: Engine) -> None:
    """A writer in the middle of its transaction does not stop readers (WAL on SQLite, MVCC on PostgreSQL)."""
    writers, readers = make_sessionmaker(db_engine), make_sessionmaker(db_engine, read_only=True)
    holding, release = threading.Event(), threading.Event()

    def writer() -> None:
        with session_scope(writers) as session:
            name = f"slow-writer-{db_engine.dialect.name}"
            session.add(User(username=name, username_key=name, password_hash="-"))
            session.flush()  # the write lock is held from here to the commit
            holding.set()
            release.wait(timeout=30)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert holding.wait(timeout=30)
        started = time.monotonic()
        with session_scope(readers) as session:
            session.scalar(select(func.count()).select_from(User))
        assert time.monotonic() - started < 5, "a reader waited for a writer"
    finally:
        release.set()
        thread.join(timeout=30)


def test_writers_of_one_process_take_turns_without_busy_errors(db_engine: Engine) -> None:
    """Many threads that read then write the same row: every one commits, none is lost."""
    with session_scope(make_sessionmaker(db_engine)) as session:
        user_id = make_user(session, f"counter-{db_engine.dialect.name}").id
    writers = make_sessionmaker(db_engine)
    errors: list[BaseException] = []

    def bump() -> None:
        try:
            for _ in range(10):
                with session_scope(writers) as session:
                    user = session.get(User, user_id, with_for_update=True)
                    assert user is not None
                    user.username = str(int(user.username) + 1) if user.username.isdigit() else "1"
        except BaseException as exc:  # collected and asserted on below
            errors.append(exc)

    threads = [threading.Thread(target=bump) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    with session_scope(writers) as session:
        assert session.get(User, user_id).username == "80"  # type: ignore[union-attr]


def test_a_sqlite_writer_that_would_not_wait_gets_writer_busy(request: pytest.FixtureRequest) -> None:
    """NOWAIT (SQLite's file lock): the web process's inline writes give way at once to a writer in progress."""
    db_engine = make_engine(migrated_copy_url("sqlite", request, "nowait"))
    request.addfinalizer(db_engine.dispose)
    writers = make_sessionmaker(db_engine)
    with session_scope(writers) as holder:
        holder.connection()  # BEGIN IMMEDIATE: this session holds the write lock
        started = time.monotonic()
        with pytest.raises(WriterBusy), session_scope(writers) as eager:
            eager.connection(execution_options={NOWAIT: True})
        assert time.monotonic() - started < 0.5
    with session_scope(writers) as eager:  # free again: the same writer goes ahead
        eager.connection(execution_options={NOWAIT: True})
        name = "nowait-writer"
        eager.add(User(username=name, username_key=name, password_hash="-"))
    with session_scope(make_sessionmaker(db_engine, read_only=True)) as session:
        assert session.scalar(select(func.count()).select_from(User).where(User.username == name)) == 1
