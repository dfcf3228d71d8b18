"""Backups: a consistent copy of the database while the app serves, and its restore into an empty one.

SQLite is copied with its online backup API in one step: one read transaction, so the copy is
the database as of one moment, and in WAL mode it never blocks the app's writers. PostgreSQL is
copied with ``pg_dump`` (custom format), which reads every table in one snapshot, and brought
back with ``pg_restore`` in one transaction. A restore goes into an empty database only, and
either all of the backup arrives or nothing does.

Every failure raises ``BackupError`` with a message for people; nothing is left half-written.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.engine import URL, make_url

PG_CLIENT = (
    "PostgreSQL's client tools (pg_dump, pg_restore), at least the server's version: Debian's and "
    "Ubuntu's postgresql-client package (apt-get install postgresql-client)"
)
SQLITE_MAGIC = b"SQLite format 3\x00"
PG_MAGIC = b"PGDMP"  # pg_dump's custom format


class BackupError(Exception):
    """A backup or restore that could not be done; the message says why and what to do."""


@dataclass(frozen=True)
class Written:
    """What ``backup`` wrote."""

    path: Path
    size: int
    tables: int
    seconds: float
    revisions: tuple[str, ...]
    source: str  # the database, password hidden

    def describe(self) -> str:
        return (
            f"wrote {self.path} ({_size(self.size)}, {self.tables} tables, schema at revision "
            f"{', '.join(self.revisions)}) in {self.seconds:.2f} s from {self.source}"
        )


@dataclass(frozen=True)
class Restored:
    """What ``restore`` brought back, and how its schema stands against this code's."""

    path: Path
    target: str  # the database, password hidden
    tables: int
    seconds: float
    revisions: tuple[str, ...]
    missing: tuple[str, ...]  # this code's heads the schema lacks
    state: str  # see schema_state

    def describe(self) -> str:
        done = f"restored {self.path} into {self.target} ({self.tables} tables) in {self.seconds:.2f} s"
        at = f"the schema is at the backup's revision {', '.join(self.revisions)}"
        if self.state == "current":
            return f"{done}; {at}, this code's: the app can start."
        if self.state == "older":
            return (
                f"{done}; {at}, older than this code's (which adds {', '.join(self.missing)}): "
                "run `ringlab db upgrade` before starting the app."
            )
        return (
            f"{done}; {at}, which this code does not know (a backup from a newer Ringlab?): "
            "run the Ringlab version that made it, or upgrade this code, before starting the app."
        )


def schema_state(revisions: set[str], heads: set[str], known: set[str], applied: set[str]) -> str:
    """``current``, ``older`` or ``unknown``: how a database at ``revisions`` stands against this code.

    ``heads`` are this code's Alembic heads, ``known`` every revision it has, and ``applied`` the
    revisions ``revisions`` include (themselves, their ancestors and what they depend on).
    """
    if not revisions <= known:
        return "unknown"
    return "current" if heads <= applied else "older"


def backup(url: str, path: Path) -> Written:
    """Copy the database at ``url`` to the new file ``path``, consistently, while the app serves."""
    parsed = make_url(url)
    path = path.absolute()
    if path.exists():
        raise BackupError(f"{path} already exists; give a new name (e.g. with the date), nothing was written")
    if not path.parent.is_dir():
        raise BackupError(f"there is no folder {path.parent}; create it first, nothing was written")
    started = time.monotonic()
    # Written beside the target and renamed at the end: PATH is either the whole backup or absent.
    partial = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        if parsed.get_backend_name() == "sqlite":
            tables, revisions = _sqlite_backup(_sqlite_file(parsed), partial)
        else:
            tables, revisions = _pg_backup(parsed, partial)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return Written(path, path.stat().st_size, tables, time.monotonic() - started, revisions, _redact(parsed))


def restore(url: str, path: Path) -> Restored:
    """Bring the backup ``path`` back into the empty database at ``url``: all of it, or nothing."""
    parsed = make_url(url)
    path = path.absolute()
    sqlite = parsed.get_backend_name() == "sqlite"
    _check_kind(path, sqlite=sqlite)
    started = time.monotonic()
    if sqlite:
        tables, revisions = _sqlite_restore(path, _sqlite_file(parsed), _redact(parsed))
    else:
        tables, revisions = _pg_restore(path, parsed)
    heads, known, applied = _code_revisions(url, revisions)
    return Restored(
        path, _redact(parsed), tables, time.monotonic() - started, revisions, tuple(sorted(heads - applied)),
        schema_state(set(revisions), heads, known, applied),
    )  # fmt: skip


# --- SQLite ---------------------------------------------------------------------------------------


def _sqlite_file(parsed: URL) -> Path:
    if not parsed.database or parsed.database == ":memory:":
        raise BackupError("an in-memory SQLite database has nothing to back up or restore into")
    return Path(parsed.database).absolute()


def _sqlite_backup(database: Path, out: Path) -> tuple[int, tuple[str, ...]]:
    if not database.is_file():
        raise BackupError(f"there is no SQLite database at {database}; nothing was written")
    source = sqlite3.connect(database, timeout=30)
    copy = sqlite3.connect(out)
    try:
        # pages=-1: the whole database in one step, inside one read transaction (a snapshot).
        source.backup(copy)
        # A backup is one self-contained file: no write-ahead log beside it.
        copy.execute("PRAGMA journal_mode=DELETE")
        tables, revisions = _sqlite_contents(copy, f"the database at {database}")
        if copy.execute("PRAGMA quick_check").fetchone() != ("ok",):
            raise BackupError(f"the copy of {database} failed SQLite's quick_check; nothing was written")
    except sqlite3.Error as exc:
        raise BackupError(f"could not copy {database}: {exc}; nothing was written") from None
    finally:
        copy.close()
        source.close()
    return tables, revisions


def _sqlite_restore(path: Path, database: Path, target: str) -> tuple[int, tuple[str, ...]]:
    try:
        saved = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise BackupError(f"could not open {path}: {exc}") from None
    try:
        _sqlite_contents(saved, str(path))
        if database.exists():
            existing = sqlite3.connect(database, timeout=30)
            try:
                _refuse_non_empty(_sqlite_tables(existing), target)
            finally:
                existing.close()
        database.parent.mkdir(parents=True, exist_ok=True)
        into = sqlite3.connect(database, timeout=30)
        try:
            # One step, one write transaction on the target: a failure leaves it as it was.
            saved.backup(into)
            into.execute("PRAGMA journal_mode=WAL")  # the app's mode (app.db)
            return _sqlite_contents(into, target)
        finally:
            into.close()
    except sqlite3.Error as exc:
        raise BackupError(f"could not restore {path}: {exc}") from None
    finally:
        saved.close()


def _sqlite_tables(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
    return sorted(name for (name,) in rows)


def _sqlite_contents(conn: sqlite3.Connection, what: str) -> tuple[int, tuple[str, ...]]:
    tables = _sqlite_tables(conn)
    if "alembic_version" not in tables:
        raise BackupError(f"{what} has no Ringlab schema (no alembic_version table)")
    revisions = tuple(sorted(r for (r,) in conn.execute("SELECT version_num FROM alembic_version")))
    return len(tables), revisions


# --- PostgreSQL -----------------------------------------------------------------------------------


def _pg_tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise BackupError(f"{name} was not found on PATH. PostgreSQL backups need {PG_CLIENT}.")
    return found


def _pg_connection(parsed: URL) -> tuple[str, dict[str, str]]:
    """libpq connection options for ``parsed``, and the environment that carries its password.

    The password goes in PGPASSWORD, not on the command line, where any user could read it.
    """
    from psycopg.conninfo import make_conninfo

    _args, options = parsed.set(drivername="postgresql+psycopg").get_dialect()().create_connect_args(parsed)
    password = options.pop("password", None)
    env = dict(os.environ)
    if password:
        env["PGPASSWORD"] = str(password)
    return make_conninfo(**options), env


def _run(cmd: list[str], env: dict[str, str] | None, parsed: URL, what: str) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        message = done.stderr.strip()
        if parsed.password:
            message = message.replace(str(parsed.password), "***")
        raise BackupError(f"{what} failed for {_redact(parsed)}:\n{message}")
    return done.stdout


def _pg_contents(dump: Path, parsed: URL) -> tuple[int, tuple[str, ...]]:
    """The tables a custom-format dump holds and its Alembic revisions, read from the dump itself."""
    tool = _pg_tool("pg_restore")
    listing = _run([tool, "--list", str(dump)], None, parsed, f"pg_restore --list {dump}")
    tables: set[str] = set()
    for line in listing.splitlines():
        # "<id>; <oid> <oid> TABLE <schema> <name> <owner>", and "TABLE DATA ..." for the rows.
        parts = line.split()
        if not line.startswith(";") and len(parts) >= 7 and parts[3] == "TABLE" and parts[4] != "DATA":
            tables.add(parts[5])
    if "alembic_version" not in tables:
        raise BackupError(f"{dump} holds no Ringlab schema (no alembic_version table)")
    script = _run([tool, "--data-only", "--table=alembic_version", "--file=-", str(dump)], None, parsed, "pg_restore")
    return len(tables), _copied_rows(script)


def _copied_rows(script: str) -> tuple[str, ...]:
    """The one-column rows of the first COPY block in a plain-text dump."""
    rows: list[str] = []
    lines = iter(script.splitlines())
    for line in lines:
        if line.startswith("COPY "):
            for row in lines:
                if row == "\\.":
                    return tuple(sorted(rows))
                rows.append(row)
    return tuple(sorted(rows))


def _pg_backup(parsed: URL, out: Path) -> tuple[int, tuple[str, ...]]:
    tool = _pg_tool("pg_dump")
    conninfo, env = _pg_connection(parsed)
    _run([tool, "--format=custom", f"--file={out}", f"--dbname={conninfo}"], env, parsed, "pg_dump")
    return _pg_contents(out, parsed)


def _pg_restore(path: Path, parsed: URL) -> tuple[int, tuple[str, ...]]:
    tool = _pg_tool("pg_restore")
    _pg_contents(path, parsed)
    _refuse_non_empty(_pg_tables(parsed), _redact(parsed))
    conninfo, env = _pg_connection(parsed)
    # One transaction that stops at the first error: all of the backup, or nothing. Owners and
    # grants are the old server's roles; the restoring role owns everything instead.
    cmd = [tool, "--no-owner", "--no-privileges", "--exit-on-error", "--single-transaction", f"--dbname={conninfo}"]
    _run([*cmd, str(path)], env, parsed, f"pg_restore {path} (nothing was restored)")
    tables = _pg_tables(parsed)
    return len(tables), _pg_revisions(parsed)


def _pg_query(parsed: URL, sql: str) -> list[Any]:
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import OperationalError

    engine = create_engine(parsed)
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(sql)))
    except OperationalError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        raise BackupError(f"could not reach {_redact(parsed)}: {reason}") from None
    finally:
        engine.dispose()


def _pg_tables(parsed: URL) -> list[str]:
    rows = _pg_query(
        parsed,
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY table_name",
    )
    return [name for (name,) in rows]


def _pg_revisions(parsed: URL) -> tuple[str, ...]:
    return tuple(sorted(r for (r,) in _pg_query(parsed, "SELECT version_num FROM alembic_version")))


# --- shared ---------------------------------------------------------------------------------------


def _check_kind(path: Path, *, sqlite: bool) -> None:
    if not path.is_file():
        raise BackupError(f"there is no backup at {path}")
    with path.open("rb") as f:
        head = f.read(len(SQLITE_MAGIC))
    if head.startswith(PG_MAGIC) and sqlite:
        raise BackupError(
            f"{path} is a PostgreSQL backup (pg_dump) and the database is SQLite: set DATABASE_URL "
            "to an empty PostgreSQL database to restore it"
        )
    if head == SQLITE_MAGIC and not sqlite:
        raise BackupError(
            f"{path} is a SQLite backup and the database is PostgreSQL: restore it with DATABASE_URL "
            "unset (or set to a new SQLite file)"
        )
    if head != SQLITE_MAGIC and not head.startswith(PG_MAGIC):
        raise BackupError(f"{path} is not a backup made by `ringlab db backup`")


def _refuse_non_empty(tables: list[str], target: str) -> None:
    if tables:
        shown = ", ".join(tables[:5]) + (", …" if len(tables) > 5 else "")
        raise BackupError(
            f"{target} is not empty ({len(tables)} tables: {shown}); a backup is restored into an empty "
            "database only. Restore into a new database (PostgreSQL: createdb; SQLite: a new file) "
            "and point DATABASE_URL at it; nothing was changed."
        )


def _code_revisions(url: str, revisions: tuple[str, ...]) -> tuple[set[str], set[str], set[str]]:
    """This code's Alembic heads, every revision it knows, and those ``revisions`` include."""
    from alembic.script import ScriptDirectory

    from app.migrate import alembic_config

    script = ScriptDirectory.from_config(alembic_config(url))
    known = {r.revision for r in script.walk_revisions()}
    applied = {r.revision for r in script.iterate_revisions(revisions, "base")} if set(revisions) <= known else set()
    return set(script.get_heads()), known, applied


def _redact(parsed: URL) -> str:
    return parsed.render_as_string(hide_password=True)


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    return f"{n / 1024:.1f} KB" if n < 1024**2 else f"{n / 1024**2:.1f} MB"
