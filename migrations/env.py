"""Alembic environment: the URL comes from the caller's config or from Settings."""

from __future__ import annotations

from alembic import context

from app.config import get_settings
from app.db import Base, make_engine
from app.models import load_all

load_all()
config = context.config
url = config.get_main_option("sqlalchemy.url") or get_settings().sqlalchemy_url


def run_offline() -> None:
    context.configure(url=url, target_metadata=Base.metadata, literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = make_engine(url)
    with engine.connect() as conn:
        _run(conn)
    engine.dispose()


def _run(connection) -> None:  # type: ignore[no-untyped-def]
    # Batch mode lets ALTER TABLE work on SQLite, which cannot alter most things in place.
    context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
