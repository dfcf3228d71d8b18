"""Run Alembic migrations from code (``ringlab db upgrade``, app start-up, tests)."""

from __future__ import annotations

from alembic import command
from alembic.config import Config

from app.config import REPO_ROOT


def alembic_config(url: str) -> Config:
    config = Config(str(REPO_ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(REPO_ROOT / "migrations"))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "heads") -> None:
    """Bring the database at ``url`` up to ``revision``."""
    command.upgrade(alembic_config(url), revision)
