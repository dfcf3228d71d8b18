"""`ringlab users`: accounts from the terminal."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from app.cli.courses import RoleChoice

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from app.accounts.models import User

app = typer.Typer(help="Accounts.", no_args_is_help=True)


@app.command("create")
def users_create(
    username: Annotated[str, typer.Argument(help="The new account's username.")],
    admin: Annotated[
        bool, typer.Option("--admin", help="Make a site administrator: every course, its staff, and accounts.")
    ] = False,
    course: Annotated[str, typer.Option(help="The course to enrol the account in (not an administrator).")] = "default",
    role: Annotated[
        RoleChoice | None, typer.Option(help="The account's role in --course (default: student).", case_sensitive=False)
    ] = None,
    instructor: Annotated[
        bool, typer.Option("--instructor", help="Deprecated: the same as --role instructor.")
    ] = False,
    password: Annotated[
        str | None, typer.Option(help="Password (prompted for, hidden, if not given; or RINGLAB_PASSWORD).")
    ] = None,
) -> None:
    """Create an account in --course with --role; with --admin, a site administrator (in every course)."""
    import os

    from app.accounts.models import Role
    from app.accounts.service import register
    from app.config import get_settings
    from app.courses import members
    from app.db import make_engine, make_sessionmaker, session_scope, utcnow
    from app.errors import DomainError

    if instructor:
        typer.echo(
            "warning: --instructor is deprecated: use --role instructor (--admin for a site administrator)", err=True
        )
        if role not in (None, RoleChoice.instructor):
            _fail(f"--instructor and --role {role.value if role else ''} disagree: give --role alone")
        role = RoleChoice.instructor
    if admin and role is not None:
        _fail("a site administrator is in every course already: leave out --role and --instructor with --admin")
    secret = password or os.environ.get("RINGLAB_PASSWORD")
    if not secret:
        secret = typer.prompt("Password", hide_input=True, confirmation_prompt=True)
    engine = make_engine(get_settings().sqlalchemy_url)
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            user = register(username, secret, session=session, role=Role.admin if admin else Role.student)
            if admin:
                typer.echo(f"created admin '{user.username}' (a site administrator: every course)")
                return
            chosen = (role or RoleChoice.student).course_role()
            members.add(course, user, chosen, actor=members.TERMINAL, session=session, now=utcnow())
            typer.echo(f"created {chosen.value} '{user.username}' in course '{course}'")
    except DomainError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(1) from None
    finally:
        engine.dispose()


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


@contextmanager
def _account(username: str) -> Iterator[tuple[Session, User]]:
    """A database session (committed on success) and the account named ``username``; exit 1 if there is none."""
    from app.accounts.service import find_user
    from app.config import get_settings
    from app.db import make_engine, make_sessionmaker, session_scope

    engine = make_engine(get_settings().sqlalchemy_url)
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            user = find_user(username, session=session)
            if user is None:
                typer.echo(f"error: there is no account '{username}' (see `ringlab users create`)", err=True)
                raise typer.Exit(1)
            yield session, user
    finally:
        engine.dispose()


@app.command("reset-password")
def users_reset_password(
    username: Annotated[str, typer.Argument(help="The account whose password is reset.")],
    base_url: Annotated[
        str, typer.Option(help="The server's address as its users reach it (the link starts with it).")
    ] = "http://127.0.0.1:8000",
    hours: Annotated[float, typer.Option(min=0.1, max=168, help="How long the link works.")] = 24,
) -> None:
    """Print a one-time link that sets a new password for USERNAME (the newest link only; it works once)."""
    from datetime import timedelta

    from app.accounts.recovery import issue_reset
    from app.db import utcnow

    with _account(username) as (session, user):
        issued = issue_reset(user, by=None, session=session, now=utcnow(), ttl=timedelta(hours=hours))
        typer.echo(f"{base_url.rstrip('/')}/reset/{issued.token}")
        until = f"{issued.expires_at:%Y-%m-%d %H:%M} UTC"
        typer.echo(f"works once, until {until}; give it to {user.username}, privately", err=True)


@app.command("accommodate")
def users_accommodate(
    username: Annotated[str, typer.Argument(help="The student's username.")],
    multiplier: Annotated[
        float | None, typer.Option(help="Time limit multiplier, 1 to 4 (1.5 is time and a half).")
    ] = None,
    extra_minutes: Annotated[int | None, typer.Option(help="Minutes added after the multiplier.")] = None,
    note: Annotated[str, typer.Option(help="Why, for instructors (never shown to the student).")] = "",
    remove: Annotated[bool, typer.Option("--remove", help="Take the extra time away.")] = False,
) -> None:
    """Grant, change, show (no options) or --remove a student's extra time on every timed quiz."""
    from app.db import utcnow
    from app.errors import DomainError
    from app.quizzes import accommodations

    try:
        with _account(username) as (session, user):
            if remove:
                gone = accommodations.remove(user.id, session=session)
                typer.echo(f"removed {user.username}'s extra time" if gone else f"{user.username} had no extra time")
                return
            found = accommodations.get(user.id, session=session)
            if multiplier is not None or extra_minutes is not None:
                # An option left out keeps its current value (or none: 1x, 0 minutes).
                found = accommodations.grant(
                    user.id,
                    multiplier=multiplier if multiplier is not None else found.time_multiplier if found else 1.0,
                    extra_minutes=extra_minutes if extra_minutes is not None else found.extra_minutes if found else 0,
                    note=note or (found.note if found else ""),
                    granted_by=None, session=session, now=utcnow(),
                )  # fmt: skip
            if found is None:
                typer.echo(f"{user.username} has no extra time: each quiz's own time limit")
                return
            example = accommodations.limit_minutes(60, found.time_multiplier, found.extra_minutes)
            typer.echo(
                f"{user.username} gets {accommodations.describe(found)} on every timed quiz "
                f"(a 60-minute quiz: {example} minutes), from the next attempt started"
            )
    except DomainError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(1) from None


@app.command("delete")
def users_delete(
    username: Annotated[str, typer.Argument(help="The account to delete.")],
    yes: Annotated[bool, typer.Option("--yes", help="Delete without asking first (for scripts).")] = False,
) -> None:
    """Delete an account and everything it made, in every course; the audit log records it by number, not name."""
    from app.accounts import deletion
    from app.courses.members import TERMINAL
    from app.db import utcnow
    from app.errors import DomainError

    def rows(counts: dict[str, int]) -> str:
        total = sum(counts.values())
        return ", ".join(f"{table} {n}" for table, n in counts.items()) + f" ({total} row{'s' if total != 1 else ''})"

    try:
        with _account(username) as (session, user):
            user_id, name = user.id, user.username
            if not yes:
                goes = rows(deletion.preview(user_id, session=session))
                typer.echo(f"{name} (account #{user_id}) and everything it made: {goes}")
                typer.confirm("Delete it, in every course? This cannot be undone", abort=True)
            done = deletion.delete_account(user_id, actor=TERMINAL, session=session, now=utcnow())
            typer.echo(f"deleted {name} (account #{user_id}): {rows(done.counts)}")
    except DomainError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(1) from None
