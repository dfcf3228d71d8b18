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


@pytest.mark.parametrize("backend", BACKENDS)
def test_lab_scores_keep_one_decimal_and_round_down_on_the_way_back(
    backend: str, request: pytest.FixtureRequest
) -> None:
    from alembic import command
    from sqlalchemy import text

    from app.migrate import alembic_config

    url = make_db_url(backend, request, "ringlab_fractional_scores")
    upgrade(url)
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO users (id, username, username_key, password_hash, role, created_at)"
                " VALUES (990, 'frac', 'frac', 'x', 'student', CURRENT_TIMESTAMP)"
            )
        )
        conn.execute(
            text(
                "INSERT INTO lab_submissions (user_id, lab_id, code, status, gpus_needed, attempts, submitted_at,"
                " queued_at, score, max_score, regrades)"
                " VALUES (990, 'ring-allreduce', 'x', 'graded', 0, 1, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, 7.5, 10, 0)"
            )
        )
        assert conn.execute(text("SELECT score FROM lab_submissions")).scalar() == 7.5  # partial credit, kept
    engine.dispose()
    command.downgrade(alembic_config(url), "0010_fractional_scores-1")
    engine = make_engine(url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT score FROM lab_submissions")).scalar() == 7  # whole points, rounded down
    engine.dispose()
    upgrade(url)
