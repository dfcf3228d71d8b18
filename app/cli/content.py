"""`ringlab content`: check, sync and export the authored content."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from app.cli.check import check, content_dir, fail_on_problems

app = typer.Typer(help="Authored content in content/.", no_args_is_help=True)


@app.command("check")
def content_check(
    path: Annotated[Path | None, typer.Argument(help="Content directory (default: content/).")] = None,
) -> None:
    """Validate a content tree; list every problem as path:line: message."""
    raise typer.Exit(check(path))


@app.command("sync")
def content_sync(
    path: Annotated[Path | None, typer.Argument(help="Content directory (default: content/).")] = None,
) -> None:
    """Validate content and upsert it into the database in one transaction."""
    from app.config import get_settings
    from app.content.service import sync_directory
    from app.db import make_engine, make_sessionmaker

    engine = make_engine(get_settings().sqlalchemy_url)
    try:
        report = sync_directory(path or content_dir(), make_sessionmaker(engine))
    except Exception as exc:
        fail_on_problems(exc)
        return
    finally:
        engine.dispose()
    summary = report.summary()
    parts = [
        f"{verb} " + (", ".join(f"{n} {k}" for k, n in counts.items()) or "nothing") for verb, counts in summary.items()
    ]
    typer.echo("synced: " + "; ".join(parts))


@app.command("export")
def content_export(
    fmt: Annotated[str, typer.Option("--format", help="Output format (json).")] = "json",
    path: Annotated[Path | None, typer.Argument(help="Content directory (default: content/).")] = None,
) -> None:
    """Print all content, answers included, as JSON."""
    from app.content.export import export_tree
    from app.content.loader import load_tree

    if fmt != "json":
        typer.echo(f"unknown format '{fmt}': only json is supported", err=True)
        raise typer.Exit(2)
    try:
        tree = load_tree(path or content_dir())
    except Exception as exc:
        fail_on_problems(exc)
        return
    json.dump(export_tree(tree), sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")
