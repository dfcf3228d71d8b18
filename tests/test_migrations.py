"""Alembic migrations build the schema the models describe, on both backends."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from app.db import Base, make_engine
from app.migrate import upgrade
from app.models import load_all
from tests.conftest import BACKENDS, make_db_url


@pytest.mark.parametrize("backend", BACKENDS)
def test_migrations_match_models(backend: str, request: pytest.FixtureRequest) -> None:
    load_all()
    url = make_db_url(backend, request, "ringlab_migrations")
    upgrade(url)
    upgrade(url)  # idempotent
    engine = make_engine(url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
        tables = set(inspect(conn).get_table_names())
    engine.dispose()
    assert diff == [], "models and migrations differ: write a migration (alembic revision --autogenerate)"
    assert {"quizzes", "questions", "exercise_sets", "exercises", "decks", "cards"} <= tables


def test_sqlite_runs_in_wal_mode_with_foreign_keys(tmp_path) -> None:  # type: ignore[no-untyped-def]
    engine = make_engine(f"sqlite:///{tmp_path / 'x.sqlite3'}")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    engine.dispose()
