"""`ringlab db backup` and `ringlab db restore`, run as an operator would, while the app writes.

A writer thread adds students one transaction at a time (account, session, API token, a lab
submission, a quiz attempt with its answers, card states and reviews). The backup is taken in
the middle of that; the restored database must be exactly the source as of one moment: every
table's rows equal to the source's minus the students written after that moment, no student
half there, and every foreign key holding.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, inspect, select, text
from sqlalchemy.orm import Session

from app.accounts.models import Role, User
from app.accounts.service import hasher, issue_api_token, register, start_session
from app.backup import BackupError, backup, restore
from app.content.records import Card, Lab, Quiz
from app.db import make_engine, make_sessionmaker, session_scope
from app.migrate import upgrade
from tests.conftest import BACKENDS, REPO, make_db_url, migrated_copy_url
from tests.factories import PASSWORD, make_attempt, make_reviews, make_submission
from tests.pg import PostgresCluster

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
LOAD = "load-"  # usernames of the students the writer adds


def ringlab(*args: str, url: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": url}
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        [sys.executable, "-m", "app", *args], cwd=REPO, capture_output=True, text=True, env=env, timeout=300
    )


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Content:
    """Ids of synced content the students' rows point at."""

    def __init__(self, session: Session):
        quiz = session.scalars(select(Quiz.id).order_by(Quiz.id)).first()
        lab = session.scalars(select(Lab.id).order_by(Lab.id)).first()
        card = session.scalars(select(Card).order_by(Card.id)).first()
        assert quiz and lab and card
        self.quiz, self.lab, self.deck = quiz, lab, card.deck_id
        self.cards = list(session.scalars(select(Card.id).where(Card.deck_id == self.deck).order_by(Card.id)))[:3]


def add_student(session: Session, username: str, content: Content, password_hash: str) -> None:
    """One student and their work, in the caller's one transaction."""
    user = User(username=username, username_key=username, password_hash=password_hash, role=Role.student)
    session.add(user)
    session.flush()
    start_session(user, session=session, now=NOW, ttl=timedelta(days=1))
    issue_api_token(user, session=session, now=NOW, ttl=timedelta(days=1))
    make_submission(session, user.id, content.lab, score=7, submitted_at=NOW, commit=False)
    make_attempt(session, user.id, content.quiz, right=2, started_at=NOW, submitted_at=NOW, commit=False)
    make_reviews(session, user.id, content.deck, content.cards, ratings=[3, 2, 3, 4], start=NOW, due=NOW, commit=False)


class Writer(threading.Thread):
    """Adds one student per transaction until stopped, counting the commits."""

    def __init__(self, engine: Engine, content: Content, password_hash: str):
        super().__init__(daemon=True)
        self.factory = make_sessionmaker(engine)
        self.content, self.password_hash = content, password_hash
        self.committed = 0
        self.halt = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.halt.is_set():
                with session_scope(self.factory) as session:
                    add_student(session, f"{LOAD}{self.committed:05d}", self.content, self.password_hash)
                self.committed += 1
                self.halt.wait(0.005)  # leave the machine's CPUs to others now and then
        except BaseException as exc:
            self.error = exc

    def wait_for(self, n: int) -> None:
        while self.committed < n and self.is_alive():
            self.halt.wait(0.01)
        assert self.error is None, self.error
        assert self.committed >= n


@pytest.fixture
def source(backend: str, request: pytest.FixtureRequest) -> Iterator[tuple[str, Engine, Content, str]]:
    """A migrated database with content, an instructor signed up the real way and a few students."""
    url = migrated_copy_url(backend, request, "backup_source")
    engine = make_engine(url)
    password_hash = hasher().hash(PASSWORD)
    with session_scope(make_sessionmaker(engine)) as session:
        content = Content(session)
        register("prof", PASSWORD, session=session, role=Role.admin)
        for n in range(5):
            add_student(session, f"student-{n}", content, password_hash)
    yield url, engine, content, password_hash
    engine.dispose()


def snapshot(engine: Engine) -> dict[str, list[dict[str, Any]]]:
    """Every table's rows as the driver returns them (no type processing), in a stable order."""
    tables = inspect(engine).get_table_names()
    out = {}
    with engine.connect() as conn:
        for table in tables:
            rows = [dict(r._mapping) for r in conn.execute(text(f'SELECT * FROM "{table}"'))]
            out[table] = sorted(rows, key=repr)
    return out


def owners(state: dict[str, list[dict[str, Any]]]) -> dict[str, list[int | None]]:
    """The student (users.id) each row belongs to, row for row; None for shared rows (content, schema)."""
    attempt_user = {r["id"]: r["user_id"] for r in state["quiz_attempts"]}
    out: dict[str, list[int | None]] = {}
    for table, rows in state.items():
        if table == "users":
            out[table] = [r["id"] for r in rows]
        else:
            out[table] = [
                r["user_id"] if "user_id" in r else attempt_user[r["attempt_id"]] if "attempt_id" in r else None
                for r in rows
            ]
    return out


def foreign_key_orphans(engine: Engine) -> tuple[int, list[str]]:
    """How many foreign keys the database declares, and a line for each one some row breaks."""
    checked, broken = 0, []
    with engine.connect() as conn:
        inspector = inspect(conn)  # on this connection: a second one would wait for SQLite's writer lock
        if engine.dialect.name == "sqlite":
            broken += [repr(tuple(r)) for r in conn.exec_driver_sql("PRAGMA foreign_key_check")]
        for table in inspector.get_table_names():
            for fk in inspector.get_foreign_keys(table):
                checked += 1
                cols, refs, parent = fk["constrained_columns"], fk["referred_columns"], fk["referred_table"]
                match = " AND ".join(f'p."{r}" = c."{c}"' for c, r in zip(cols, refs, strict=True))
                present = " AND ".join(f'c."{c}" IS NOT NULL' for c in cols)
                sql = (
                    f'SELECT count(*) FROM "{table}" c WHERE {present} '
                    f'AND NOT EXISTS (SELECT 1 FROM "{parent}" p WHERE {match})'
                )
                if n := conn.execute(text(sql)).scalar_one():
                    broken.append(f"{table}.{cols} -> {parent}: {n} orphans")
    return checked, broken


def revisions(engine: Engine) -> str:
    with engine.connect() as conn:
        return ", ".join(sorted(conn.execute(text("SELECT version_num FROM alembic_version")).scalars()))


def test_backup_mid_load_restores_the_database_as_of_one_moment(
    backend: str, source: tuple[str, Engine, Content, str], request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url, engine, content, password_hash = source
    writer = Writer(engine, content, password_hash)
    writer.start()
    try:
        writer.wait_for(3)
        before = writer.committed
        done = ringlab("db", "backup", str(tmp_path / "ringlab.backup"), url=url)
        after = writer.committed
        writer.wait_for(after + 3)  # and it goes on writing after the copy
    finally:
        writer.halt.set()
        writer.join(timeout=60)
    assert writer.error is None, writer.error
    assert done.returncode == 0, done.stderr
    assert f"wrote {tmp_path / 'ringlab.backup'} (" in done.stdout
    assert f"schema at revision {revisions(engine)})" in done.stdout
    final = snapshot(engine)

    target = make_db_url(backend, request, "backup_target")
    back = ringlab("db", "restore", str(tmp_path / "ringlab.backup"), url=target)
    assert back.returncode == 0, back.stderr
    assert f"the schema is at the backup's revision {revisions(engine)}, this code's: the app can start" in back.stdout
    restored_engine = make_engine(target)
    try:
        restored = snapshot(restored_engine)

        # The moment: the writer's first k students are there, none of the later ones.
        load = {r["id"]: r["username"] for r in final["users"] if r["username"].startswith(LOAD)}
        present = sorted(r["username"] for r in restored["users"] if r["username"].startswith(LOAD))
        k = len(present)
        assert present == [f"{LOAD}{n:05d}" for n in range(k)]
        assert before <= k <= after < writer.committed, (before, k, after, writer.committed)
        later = {uid for uid, name in load.items() if int(name.removeprefix(LOAD)) >= k}

        # Every table: exactly the source's rows, less the later students' (so each student whole or absent).
        assert set(restored) == set(final)
        final_owners = owners(final)
        for table, rows in final.items():
            expected = [row for row, owner in zip(rows, final_owners[table], strict=True) if owner not in later]
            assert Counter(map(repr, restored[table])) == Counter(map(repr, expected)), table
        assert len(restored["lab_submissions"]) == 5 + k and len(restored["quiz_attempts"]) == 5 + k
        assert len(restored["flashcard_reviews"]) == 4 * (5 + k) and restored["quiz_answers"]

        checked, broken = foreign_key_orphans(restored_engine)
        assert checked >= 15 and broken == []
        assert checked == foreign_key_orphans(engine)[0]

        # The restored database takes new writes (PostgreSQL's sequences came back past the rows).
        with session_scope(make_sessionmaker(restored_engine)) as session:
            add_student(session, "after-restore", content, password_hash)

        # Not into a database that has rows: refused, and nothing changes.
        again = snapshot(restored_engine)
        refused = ringlab("db", "restore", str(tmp_path / "ringlab.backup"), url=target)
        assert refused.returncode == 1
        assert "is not empty" in refused.stderr and "restored into an empty database only" in refused.stderr
        assert "Traceback" not in refused.stderr
        assert snapshot(restored_engine) == again
    finally:
        restored_engine.dispose()


@pytest.mark.skipif("postgresql" not in BACKENDS, reason="RINGLAB_TEST_BACKENDS leaves out PostgreSQL")
def test_postgresql_backup_without_pg_dump_says_which_package(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    url = migrated_copy_url("postgresql", request, "backup_no_client")
    bare = tmp_path / "bin"  # a PATH with no PostgreSQL tools on it
    bare.mkdir()
    done = ringlab("db", "backup", str(tmp_path / "x.backup"), url=url, path=str(bare))
    assert done.returncode == 1
    assert "pg_dump was not found on PATH" in done.stderr and "postgresql-client" in done.stderr
    assert "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == [bare]  # nothing written, not even a partial file


@pytest.mark.skipif("postgresql" not in BACKENDS, reason="RINGLAB_TEST_BACKENDS leaves out PostgreSQL")
def test_postgresql_password_stays_out_of_messages(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    cluster: PostgresCluster = request.getfixturevalue("postgres")
    url = f"postgresql+psycopg://ringlab:hunter2-secret@127.0.0.1:{cluster.port}/no_such_database"
    with pytest.raises(BackupError) as failed:
        backup(url, tmp_path / "x.backup")
    assert "no_such_database" in str(failed.value) and "ringlab:***@" in str(failed.value)
    assert "hunter2" not in str(failed.value)


def test_sqlite_restore_of_an_older_backup_says_to_upgrade(tmp_path: Path) -> None:
    old = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    upgrade(old, "0005")
    written = backup(old, tmp_path / "old.backup")
    assert written.revisions == ("0005",) and written.size == (tmp_path / "old.backup").stat().st_size
    assert not list(tmp_path.glob("*-journal")) and not list(tmp_path.glob(".*partial*"))
    restored = restore(f"sqlite:///{tmp_path / 'new' / 'restored.sqlite3'}", tmp_path / "old.backup")
    assert restored.state == "older" and restored.revisions == ("0005",)
    assert "older than this code's" in restored.describe() and "run `ringlab db upgrade`" in restored.describe()
    upgrade(f"sqlite:///{tmp_path / 'new' / 'restored.sqlite3'}")  # and the upgrade takes it from there


def test_sqlite_bad_input_gets_a_clear_message_and_changes_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'live.sqlite3'}"
    with pytest.raises(BackupError, match="there is no SQLite database at"):
        backup(url, tmp_path / "a.backup")
    upgrade(url, "0002")
    (tmp_path / "taken.backup").write_text("keep me")
    with pytest.raises(BackupError, match="already exists; give a new name"):
        backup(url, tmp_path / "taken.backup")
    assert (tmp_path / "taken.backup").read_text() == "keep me"
    with pytest.raises(BackupError, match="there is no folder"):
        backup(url, tmp_path / "missing" / "a.backup")

    empty = f"sqlite:///{tmp_path / 'empty.sqlite3'}"
    with pytest.raises(BackupError, match="there is no backup at"):
        restore(empty, tmp_path / "nothing.backup")
    (tmp_path / "pg.backup").write_bytes(b"PGDMP\x01\x0e\x00" + b"\x00" * 64)
    with pytest.raises(BackupError, match=r"is a PostgreSQL backup \(pg_dump\) and the database is SQLite"):
        restore(empty, tmp_path / "pg.backup")
    with pytest.raises(BackupError, match="is not a backup made by `ringlab db backup`"):
        restore(empty, tmp_path / "taken.backup")
    other = tmp_path / "other.sqlite3"
    stranger = make_engine(f"sqlite:///{other}")
    with stranger.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE notes (x)")
    stranger.dispose()
    with pytest.raises(BackupError, match="has no Ringlab schema"):
        restore(empty, other)
    assert not (tmp_path / "empty.sqlite3").exists()
