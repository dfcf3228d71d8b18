"""Engine, sessions and the declarative Base.

SQLite runs in WAL mode with foreign keys on; PostgreSQL is used as is. One
session per unit of work: ``session_scope`` commits on success and rolls back
on error, so services never call ``commit`` themselves.

Two kinds of session: writers (the default) and readers (``read_only=True``, what
GET requests get). On SQLite a writer's transaction begins IMMEDIATE, taking the
database's single write lock up front, and writers of every process queue for it on
a file lock (handed over at once, where SQLite's busy handler sleeps); readers begin
DEFERRED and run side by side in WAL mode. A reader that tries to write raises
``ReadOnlySession`` on every backend, so a GET route that writes is caught by the
tests instead of failing under load.

The database may restart under a running app (an upgrade, a fail-over, a crash):
``unavailable(exc)`` tells such an error (the server down or starting up, the connection cut)
from a statement that is wrong, so the web app answers 503 and the grading workers wait and
try again, and the PostgreSQL engine checks each pooled connection before handing it out, so
the first request after the restart gets a new one instead of a dead one.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import DateTime, Engine, MetaData, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import DeclarativeBase, ORMExecuteState, Session, sessionmaker
from sqlalchemy.types import TypeDecorator

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite stores naive ones)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given; use datetime.now(UTC)")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # Let SQLAlchemy, not the sqlite3 module, decide when transactions begin,
    # so SAVEPOINTs and BEGIN IMMEDIATE work as written.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


READ_ONLY = "ringlab_read_only"
NOWAIT = "ringlab_nowait"  # a SQLite writer that raises WriterBusy rather than wait for the lock
_WRITER_FD = "ringlab_writer_fd"
CONNECT_TIMEOUT_S = 10  # PostgreSQL: how long opening a connection may take before it counts as failed


class ReadOnlySession(RuntimeError):
    """A write through a reader session: the route should ask for a writer (WriteSessionDep)."""


class WriterBusy(TimeoutError):
    """Another connection holds the SQLite write lock, and this writer would not (or could no longer) wait."""


def _take_file_lock(path: str, timeout: float) -> int:
    """An exclusive lock on ``path`` (flock), waited for at most ``timeout`` seconds; returns its fd."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    deadline, pause = time.monotonic() + timeout, 0.0001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise WriterBusy("the database stayed busy; try again in a moment") from None
            time.sleep(pause)
            pause = min(pause * 2, 0.002)


def _sqlite_begin_for(lock_path: str | None, timeout: float) -> Any:
    def begin(conn: Any) -> None:
        if conn.get_execution_options().get(READ_ONLY):
            conn.exec_driver_sql("BEGIN")
            return
        # IMMEDIATE takes the write lock at BEGIN, so a transaction that reads and then writes
        # cannot fail with "database is locked" because another connection committed in
        # between (Django and Rails made the same choice for SQLite). Before it, writers of
        # every process (web workers, the grading worker, the CLI) queue on a file lock, which
        # hands over as soon as it is released, where SQLite's busy handler sleeps 1, 2, 5,
        # 10... ms between tries. The file lock is held until the connection goes back to the pool.
        info = conn.connection.info
        if lock_path is not None and _WRITER_FD not in info:
            wait = 0.0 if conn.get_execution_options().get(NOWAIT) else timeout
            info[_WRITER_FD] = _take_file_lock(lock_path, wait)
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return begin


def _release_writer(_dbapi_connection: Any, record: Any, *_: Any) -> None:
    fd = record.info.pop(_WRITER_FD, None) if record is not None else None
    if fd is not None:
        os.close(fd)  # closing the descriptor releases its flock


def make_engine(url: str) -> Engine:
    """An engine for ``url``; creates the SQLite file's directory if needed."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        on_disk = bool(parsed.database) and parsed.database != ":memory:"
        if on_disk:
            Path(str(parsed.database)).parent.mkdir(parents=True, exist_ok=True)
        # As many connections as request threads, so no request waits for one.
        # Most recently used first, so a few warm connections (statement caches) do most work.
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 30},
            pool_size=40,
            max_overflow=40,
            pool_use_lifo=True,
        )
        event.listen(engine, "connect", _sqlite_pragmas)
        lock_path = f"{parsed.database}-writer.lock" if on_disk else None
        event.listen(engine, "begin", _sqlite_begin_for(lock_path, timeout=30))
        event.listen(engine, "checkin", _release_writer)
        event.listen(engine, "invalidate", _release_writer)
        return engine
    # pool_pre_ping: a connection the server dropped (a restart) is noticed and replaced when it is
    # checked out, not by the request that uses it. connect_timeout: with the server unreachable, a
    # request (or a worker) gets an error in seconds, not when TCP gives up minutes later.
    return create_engine(
        url, pool_pre_ping=True, pool_size=10, max_overflow=20, connect_args={"connect_timeout": CONNECT_TIMEOUT_S}
    )


def unavailable(exc: BaseException) -> bool:
    """True when ``exc`` says the database cannot serve right now, though the same work would succeed
    once it can: the server is down, starting up or shutting down, the connection was cut, every
    pooled connection is busy, or (SQLite) another writer holds the lock. False for everything
    else, such as a statement the database refused."""
    if isinstance(exc, WriterBusy | PoolTimeout):
        return True
    if not isinstance(exc, DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    orig = exc.orig
    if isinstance(orig, sqlite3.OperationalError):
        return "locked" in str(orig) or "busy" in str(orig)
    # psycopg raises PostgreSQL's connection failures, shutdowns and start-ups (57P01-57P03), "too
    # many connections" and the other conditions a retry outlives (deadlocks, serialization
    # failures) as OperationalError, and statements the server refused as other classes. Looked
    # up, not imported: an error from psycopg means the driver is loaded already.
    psycopg = sys.modules.get("psycopg")
    if psycopg is None:
        return False
    return isinstance(orig, psycopg.OperationalError)


def reason(exc: BaseException) -> str:
    """The first line of what the driver said (or of ``exc``), for a one-line log entry."""
    cause = getattr(exc, "orig", None) or exc
    return (str(cause).strip().splitlines() or [type(cause).__name__])[0][:200]


def make_sessionmaker(engine: Engine, *, read_only: bool = False) -> sessionmaker[Session]:
    """Writer sessions, or with ``read_only`` reader sessions (see the module docstring)."""
    if read_only:
        options: dict[str, Any] = {READ_ONLY: True}
        if engine.dialect.name == "postgresql":
            # Each statement on its own, with no BEGIN and COMMIT around them: two round trips fewer
            # for every GET. A reader loses nothing by it: at READ COMMITTED, PostgreSQL's default
            # and ours, each statement of a transaction sees the data as of its own start anyway.
            options["isolation_level"] = "AUTOCOMMIT"
        return sessionmaker(bind=engine.execution_options(**options), expire_on_commit=False, info={READ_ONLY: True})
    return sessionmaker(bind=engine, expire_on_commit=False)


@event.listens_for(Session, "do_orm_execute")
def _refuse_bulk_writes(state: ORMExecuteState) -> None:
    if state.session.info.get(READ_ONLY) and (state.is_insert or state.is_update or state.is_delete):
        raise ReadOnlySession(f"a write through a read-only session: {state.statement}")


@event.listens_for(Session, "before_flush")
def _refuse_flushes(session: Session, _context: Any, _instances: Any) -> None:
    if session.info.get(READ_ONLY) and (session.new or session.deleted or session.dirty):
        raise ReadOnlySession("a flush of changed objects through a read-only session")


def insert_for(session: Session) -> Any:
    """``insert`` for the session's backend, the one with ``ON CONFLICT`` clauses (SQLite or PostgreSQL)."""
    from sqlalchemy.dialects import postgresql, sqlite

    return postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A session committed when the block succeeds and rolled back when it raises."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
