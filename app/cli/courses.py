"""`ringlab courses`: courses' members and join codes from the terminal (the courses themselves are content files).

What a course's instructors do on its settings page, with the same rules (``app.courses.members``);
every change is in the audit log with "terminal" as who made it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from app.courses.models import CourseRole

app = typer.Typer(help="Courses: who is in each, in what role, and their join codes.", no_args_is_help=True)


class RoleChoice(enum.StrEnum):
    """``app.courses.models.CourseRole``'s values, without loading the database layer to show ``--help``."""

    student = "student"
    ta = "ta"
    instructor = "instructor"

    def course_role(self) -> CourseRole:
        from app.courses.models import CourseRole

        return CourseRole(self.value)


@contextmanager
def _session() -> Iterator[Session]:
    """A database session, committed when the command succeeds; a domain error prints ``error: ...`` and exits 1."""
    from app.config import get_settings
    from app.db import make_engine, make_sessionmaker, session_scope
    from app.errors import DomainError

    engine = make_engine(get_settings().sqlalchemy_url)
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            yield session
    except DomainError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(1) from None
    finally:
        engine.dispose()


def _joining(course_id: str, session: Session) -> str:
    from app.config import get_settings
    from app.courses import members, service

    j = members.joining(service.get_course(course_id, session=session), get_settings().join_code)
    parts = [f"join code {j.code}"] if j.code else []
    if j.operator_code:
        parts.append("RINGLAB_JOIN_CODE")
    if j.open:
        parts.append("open (anyone who signs up)")
    return ", ".join(parts) or "closed"


def _people(n: int, one: str) -> str:
    return f"{n} {one}{'s' if n != 1 else ''}"


@app.command("list")
def courses_list() -> None:
    """Every course: its id, title, term, members by role, and how people join it."""
    from app.courses import members, service
    from app.courses.models import CourseRole

    with _session() as session:
        for course in service.live_courses(session=session):
            n = members.counts(course.id, session=session)
            people = ", ".join(
                [_people(n[CourseRole.student], "student"), _people(n[CourseRole.ta], "TA"),
                 _people(n[CourseRole.instructor], "instructor")]
            )  # fmt: skip
            term = f" ({course.term})" if course.term else ""
            typer.echo(f"{course.id}\t{course.title}{term}\t{people}\t{_joining(course.id, session)}")


@app.command("show")
def courses_show(
    course: Annotated[str, typer.Argument(help="The course's id (its folder under content/courses/).")],
) -> None:
    """A course's dates and how people join it, then its members: username, full name, role."""
    from app.courses import service

    with _session() as session:
        row = service.get_course(course, session=session)
        typer.echo(f"{row.id}: {row.title}" + (f" ({row.term})" if row.term else ""))
        if row.starts_on or row.ends_on:
            typer.echo(f"runs {row.starts_on or '…'} to {row.ends_on or '…'}, {row.time_zone}")
        typer.echo(f"joining: {_joining(row.id, session)}")
        people = service.roster(row.id, session=session)
        if not people:
            typer.echo("no members")
        for user, role in people:
            typer.echo(f"{user.username}\t{user.full_name or ''}\t{role.value}")


@app.command("enroll")
def courses_enroll(
    username: Annotated[str, typer.Argument(help="An existing account's username.")],
    course: Annotated[str, typer.Argument(help="The course's id.")],
    role: Annotated[
        RoleChoice, typer.Option(help="Their role in the course.", case_sensitive=False)
    ] = RoleChoice.student,
) -> None:
    """Put USERNAME in COURSE with --role (or change their role there)."""
    from app.courses import members
    from app.db import utcnow

    with _session() as session:
        user = members.account(username, session=session)
        members.add(course, user, role.course_role(), actor=members.TERMINAL, session=session, now=utcnow())
        typer.echo(f"{user.username} is {'an' if role == RoleChoice.instructor else 'a'} {role.value} of '{course}'")


@app.command("remove")
def courses_remove(
    username: Annotated[str, typer.Argument(help="The member's username.")],
    course: Annotated[str, typer.Argument(help="The course's id.")],
) -> None:
    """Take USERNAME out of COURSE (their work stays in it)."""
    from app.courses import members
    from app.db import utcnow

    with _session() as session:
        user = members.account(username, session=session)
        members.remove(course, user, actor=members.TERMINAL, session=session, now=utcnow())
        typer.echo(f"removed {user.username} from '{course}'")


@app.command("join-code")
def courses_join_code(
    course: Annotated[str, typer.Argument(help="The course's id.")],
    new: Annotated[bool, typer.Option("--new", help="Make a new join code (the old one stops working).")] = False,
    off: Annotated[bool, typer.Option("--off", help="Turn off joining by code.")] = False,
) -> None:
    """Show COURSE's join code; --new makes a new one, --off turns joining by code off."""
    from app.courses import members
    from app.db import utcnow

    if new and off:
        typer.echo("error: give --new or --off, not both", err=True)
        raise typer.Exit(1)
    with _session() as session:
        if new:
            code = members.new_join_code(course, actor=members.TERMINAL, session=session, now=utcnow())
            typer.echo(code)
            typer.echo(f"the new join code of '{course}'; the old one no longer works", err=True)
            return
        if off:
            members.close_joining(course, actor=members.TERMINAL, session=session, now=utcnow())
        typer.echo(f"{course}: {_joining(course, session)}")


@app.command("import")
def courses_import(
    course: Annotated[str, typer.Argument(help="The course's id.")],
    file: Annotated[Path, typer.Argument(help="A CSV file: a header row, then username,name,email a line.")],
    base_url: Annotated[
        str, typer.Option(help="The server's address as its users reach it (the new accounts' links start with it).")
    ] = "http://127.0.0.1:8000",
) -> None:
    """Enrol everyone in FILE as a student of COURSE, making accounts for new usernames.

    Prints each new account's one-time link (it sets the password). A file with any bad line changes nothing.
    """
    from app.courses import members, roster
    from app.db import utcnow

    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        typer.echo(f"error: cannot read {file}: {exc} (save it as UTF-8 CSV)", err=True)
        raise typer.Exit(1) from None
    try:
        rows = roster.parse(text)
    except roster.RosterError as exc:
        for problem in exc.problems:
            typer.echo(f"error: {file}: {problem}", err=True)
        typer.echo("error: nothing was imported", err=True)
        raise typer.Exit(1) from None
    with _session() as session:
        done = members.import_roster(course, rows, by=None, actor=members.TERMINAL, session=session, now=utcnow())
        for new in done.created:
            link = f"{base_url.rstrip('/')}/reset/{new.reset.token}"
            typer.echo(f"{new.user.username}\t{link}")
        typer.echo(
            f"'{course}': {_people(len(done.created), 'new account')}, {len(done.enrolled)} existing enrolled, "
            f"{len(done.already)} already in it",
            err=True,
        )
        if done.created:
            until = f"{done.created[0].reset.expires_at:%Y-%m-%d %H:%M} UTC"
            typer.echo(f"each link sets its account's password once, until {until}: pass them on privately", err=True)
