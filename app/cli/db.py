"""`ringlab db`: the schema, and backups."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(help="Database schema.", no_args_is_help=True)


@app.command("upgrade")
def db_upgrade(revision: Annotated[str, typer.Argument(help="Target revision.")] = "heads") -> None:
    """Create or migrate the database named by DATABASE_URL (default: SQLite in the data directory)."""
    from app.config import get_settings
    from app.migrate import upgrade

    url = get_settings().sqlalchemy_url
    upgrade(url, revision)
    typer.echo(f"database at {revision}: {_redact(url)}")


def _redact(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


@app.command("backup")
def db_backup(path: Annotated[Path, typer.Argument(help="The new backup file (it must not exist).")]) -> None:
    """Copy the database to PATH while the app serves (SQLite: online backup; PostgreSQL: pg_dump -Fc)."""
    from app.backup import backup

    _on_the_database(backup, path)


@app.command("restore")
def db_restore(path: Annotated[Path, typer.Argument(help="A file written by `ringlab db backup`.")]) -> None:
    """Restore a backup into the EMPTY database named by DATABASE_URL: all of it, or nothing."""
    from app.backup import restore

    _on_the_database(restore, path)


def _on_the_database(action: Callable[[str, Path], Any], path: Path) -> None:
    """``action`` (backup or restore) on DATABASE_URL's database and ``path``; its summary, or the error and exit 1."""
    from app.backup import BackupError
    from app.config import get_settings

    try:
        done = action(get_settings().sqlalchemy_url, path)
    except BackupError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(done.describe())
