"""The `ringlab` command. Imports stay inside commands so `content check` starts fast."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from app.client import commands as client_commands

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from app.accounts.models import User
    from app.labs.supervisor import Supervisor

app = typer.Typer(help="Ringlab: learn distributed deep-learning training by doing.", no_args_is_help=True)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
content_app = typer.Typer(help="Authored content in content/.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(content_app, name="content")
users_app = typer.Typer(help="Accounts.", no_args_is_help=True)
app.add_typer(users_app, name="users")
lab_app = typer.Typer(help="Labs: prove them before students see them.", no_args_is_help=True)
app.add_typer(lab_app, name="lab")


def _fail_on_problems(exc: Exception) -> None:
    from app.content.source import ContentError

    if isinstance(exc, ContentError):
        for problem in exc.problems:
            typer.echo(str(problem), err=True)
        typer.echo(f"{len(exc.problems)} problem(s) found; nothing was changed.", err=True)
        raise typer.Exit(1)
    raise exc


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    workers: Annotated[int, typer.Option(help="Web worker processes.")] = 1,
    reload: Annotated[bool, typer.Option(help="Restart on code changes (development).")] = False,
) -> None:
    """Migrate the database, sync content and serve the web app."""
    import uvicorn

    from app.config import get_settings
    from app.migrate import upgrade

    url = get_settings().sqlalchemy_url
    upgrade(url)
    worker = _embedded_worker(url)
    try:
        # Keep-alive longer than uvicorn's 5 s default: a busy client that reuses a connection
        # just as the server closes it sees a dropped request.
        uvicorn.run(
            "app.asgi:app", host=host, port=port, workers=workers, reload=reload, timeout_keep_alive=30,
            # Forwarded headers are the app's to judge (RINGLAB_TRUSTED_PROXIES): uvicorn's own
            # handling would believe any local client's X-Forwarded-For.
            proxy_headers=False,
        )  # fmt: skip
    finally:
        if worker is not None:
            worker.stop()


def _embedded_worker(url: str) -> Supervisor | None:
    """On the embedded default (SQLite), one grading worker as a child process (never in the web
    process), restarted whenever it exits (app.labs.supervisor)."""
    import logging
    import os

    from app.db import make_engine, make_sessionmaker
    from app.labs.settings import LabSettings
    from app.labs.supervisor import Supervisor

    settings = LabSettings()
    if not settings.embedded(url):
        return None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    typer.echo("starting the embedded grading worker (RINGLAB_EMBEDDED_WORKER=false turns it off)", err=True)
    parent = str(os.getpid())

    def command(worker_id: str) -> list[str]:
        return [sys.executable, "-m", "app", "worker", "--parent-pid", parent, "--worker-id", worker_id]

    supervisor = Supervisor(command, make_sessionmaker(make_engine(url)), max_attempts=settings.lab_max_attempts)
    supervisor.start()
    return supervisor


@app.command()
def worker(
    unsafe_no_sandbox: Annotated[
        bool, typer.Option("--unsafe-no-sandbox", help="Run student code WITHOUT a sandbox (development only).")
    ] = False,
    pool: Annotated[int | None, typer.Option(help="Warm sandboxes kept ready (RINGLAB_WORKER_POOL_SIZE).")] = None,
    parent_pid: Annotated[int | None, typer.Option(hidden=True, help="Stop when this process is gone.")] = None,
    worker_id: Annotated[
        str | None, typer.Option(hidden=True, help="The id to register as (its supervisor's).")
    ] = None,
    allow_no_cgroups: Annotated[
        bool,
        typer.Option(
            "--allow-no-cgroups",
            help="Grade even where control groups cannot limit each rank's memory and processes "
            "(RINGLAB_ALLOW_NO_CGROUPS=1): rlimits alone do not contain shared memory. Not for untrusted code.",
        ),
    ] = False,
) -> None:
    """Run one grading worker against DATABASE_URL: claims lab submissions and grades them in a sandbox."""
    import logging

    from app.labs.settings import LabSettings
    from app.labs.worker import start

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if unsafe_no_sandbox:
        banner = "!" * 78
        typer.secho(
            f"{banner}\n  --unsafe-no-sandbox: student code runs UNCONFINED, as this user, with this\n"
            f"  machine's network and files. Development only: never on a server with students.\n{banner}",
            fg=typer.colors.RED, bold=True, err=True,
        )  # fmt: skip
    settings = LabSettings()
    _lower_priority(settings.worker_nice)
    size = pool if pool is not None else settings.worker_pool_size
    allow = True if allow_no_cgroups else None  # None: RINGLAB_ALLOW_NO_CGROUPS decides
    raise typer.Exit(
        start(
            unsafe=unsafe_no_sandbox, pool_size=size, parent_pid=parent_pid, worker_id=worker_id,
            allow_no_cgroups=allow,
        )
    )  # fmt: skip


def _lower_priority(nice: int) -> None:
    """Run this worker, and what it starts (sandboxes inherit it), ``nice`` steps below its parent.

    Grading is CPU-bound for whole seconds; a web request is milliseconds. On the web server's
    machine the niced ranks take the CPU the web process leaves, instead of half of it.
    """
    import contextlib
    import os

    if nice <= 0:
        return
    os.nice(nice)
    # Where the kernel groups processes by session (autogroup, on by default in Debian's and
    # Ubuntu's kernels), niceness only orders processes within a group, and the groups share the
    # CPU as equals: grading would use up the web process's group share. A worker started by
    # `ringlab serve` (not a group leader) takes a session, so a group, of its own, niced the same.
    with contextlib.suppress(OSError):
        os.setsid()
        Path("/proc/self/autogroup").write_text(f"{nice}\n")


@db_app.command("upgrade")
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


@db_app.command("backup")
def db_backup(path: Annotated[Path, typer.Argument(help="The new backup file (it must not exist).")]) -> None:
    """Copy the database to PATH while the app serves (SQLite: online backup; PostgreSQL: pg_dump -Fc)."""
    from app.backup import BackupError, backup
    from app.config import get_settings

    try:
        written = backup(get_settings().sqlalchemy_url, path)
    except BackupError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(written.describe())


@db_app.command("restore")
def db_restore(path: Annotated[Path, typer.Argument(help="A file written by `ringlab db backup`.")]) -> None:
    """Restore a backup into the EMPTY database named by DATABASE_URL: all of it, or nothing."""
    from app.backup import BackupError, restore
    from app.config import get_settings

    try:
        restored = restore(get_settings().sqlalchemy_url, path)
    except BackupError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(restored.describe())


@content_app.command("check")
def content_check(
    path: Annotated[Path | None, typer.Argument(help="Content directory (default: content/).")] = None,
) -> None:
    """Validate a content tree; list every problem as path:line: message."""
    from app.config import get_settings
    from app.content.check_cache import CheckCache
    from app.content.loader import load_tree

    root = path or _content_dir()
    # What the slow checks found for the same texts last time (app.content.check_cache).
    cache = CheckCache(get_settings().data_dir / "cache" / "content-check.json")
    try:
        tree = load_tree(root, cache=cache)
    except Exception as exc:
        cache.save()
        _fail_on_problems(exc)
        return
    cache.save()
    n_questions = sum(len(q.questions) for q in tree.quizzes)
    n_exercises = sum(len(s.exercises) for s in tree.exercise_sets)
    n_cards = sum(len(d.cards) for d in tree.decks)
    n_labs = len(tree.labs)  # not every folder: content/labs/_common/ holds the helpers labs share
    typer.echo(
        f"ok: {len(tree.quizzes)} quizzes ({n_questions} questions), {len(tree.exercise_sets)} exercise sets "
        f"({n_exercises} exercises), {len(tree.decks)} decks ({n_cards} cards), {n_labs} labs"
    )


@content_app.command("sync")
def content_sync(
    path: Annotated[Path | None, typer.Argument(help="Content directory (default: content/).")] = None,
) -> None:
    """Validate content and upsert it into the database in one transaction."""
    from app.config import get_settings
    from app.content.service import sync_directory
    from app.db import make_engine, make_sessionmaker

    engine = make_engine(get_settings().sqlalchemy_url)
    try:
        report = sync_directory(path or _content_dir(), make_sessionmaker(engine))
    except Exception as exc:
        _fail_on_problems(exc)
        return
    finally:
        engine.dispose()
    summary = report.summary()
    parts = [
        f"{verb} " + (", ".join(f"{n} {k}" for k, n in counts.items()) or "nothing") for verb, counts in summary.items()
    ]
    typer.echo("synced: " + "; ".join(parts))


@content_app.command("export")
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
        tree = load_tree(path or _content_dir())
    except Exception as exc:
        _fail_on_problems(exc)
        return
    json.dump(export_tree(tree), sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")


@users_app.command("create")
def users_create(
    username: Annotated[str, typer.Argument(help="The new account's username.")],
    instructor: Annotated[bool, typer.Option("--instructor", help="Make an instructor (default: student).")] = False,
    password: Annotated[
        str | None, typer.Option(help="Password (prompted for, hidden, if not given; or RINGLAB_PASSWORD).")
    ] = None,
) -> None:
    """Create an account; with --instructor, one that can see instructor pages."""
    import os

    from app.accounts.models import Role
    from app.accounts.service import register
    from app.config import get_settings
    from app.db import make_engine, make_sessionmaker, session_scope
    from app.errors import DomainError

    secret = password or os.environ.get("RINGLAB_PASSWORD")
    if not secret:
        secret = typer.prompt("Password", hide_input=True, confirmation_prompt=True)
    engine = make_engine(get_settings().sqlalchemy_url)
    role = Role.instructor if instructor else Role.student
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            user = register(username, secret, session=session, role=role)
            typer.echo(f"created {user.role.value} '{user.username}'")
    except DomainError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(1) from None
    finally:
        engine.dispose()


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


@users_app.command("reset-password")
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


@users_app.command("accommodate")
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


@lab_app.command("test")
def lab_test(
    lab_ids: Annotated[list[str] | None, typer.Argument(help="Lab ids (default: every lab).")] = None,
    record: Annotated[
        bool, typer.Option(help="Write the reference's communication picture to reference-wire.json.")
    ] = True,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Print every check's whole message for every file graded.")
    ] = False,
) -> None:
    """Prove labs: the reference at full marks, the starter below them without an error of ours, and each
    mutant in mutants/ losing exactly the checks its header names (``labs.spec.mutants``).

    A diff that no longer applies or a wrong header is an authoring error (``path:line: message``) and the
    lab is not proven. A reference slower to grade than the lab's target is a warning, not a failure.
    A GPU-only lab (``needs_gpu``) on a machine without enough CUDA GPUs is not run: named, the command
    exits 3; in a run of every lab it is listed as skipped and the exit code is the other labs'.
    """
    from labs.host.grader import Grader, gpu_count
    from labs.host.prove import (
        MIN_MUTANTS,
        prove,
        record_reference_wire,
        slow_warning,
        summary,
        table,
        tolerance_problems,
    )
    from labs.spec import LabError, load_labs, mutants

    root = _content_dir() / "labs"
    try:
        labs = load_labs(root)
    except LabError as exc:
        for problem in exc.problems:
            typer.echo(str(problem), err=True)
        raise typer.Exit(1) from None
    unknown = sorted(set(lab_ids or []) - set(labs))
    if unknown:
        typer.echo(f"no such lab: {', '.join(unknown)} (labs: {', '.join(sorted(labs))})", err=True)
        raise typer.Exit(2)
    failed, unproven = [], []
    gpus = gpu_count()
    with Grader(root, pool_size=1, gpus=gpus > 0) as grader:
        for lab_id in lab_ids or sorted(labs):
            lab = labs[lab_id]
            if lab.spec.needs_gpu and gpus < max(lab.spec.world_sizes):
                typer.echo(
                    f"\n{lab_id}: {lab.spec.title}\n  needs a CUDA GPU ({max(lab.spec.world_sizes)} per group of"
                    f" ranks; this machine has {gpus}): NOT RUN, so not proven here. Run it on a GPU node."
                )
                unproven.append(lab_id)
                continue
            try:
                found = mutants.load(lab)
            except LabError as exc:
                typer.echo(f"\n{lab_id}: {lab.spec.title}")
                for problem in exc.problems:
                    typer.echo(str(problem), err=True)
                failed.append(lab_id)
                continue
            rows = prove(grader, lab, found)
            typer.echo(f"\n{lab_id}: {lab.spec.title}\n{table(lab, rows, verbose=verbose)}")
            if tolerances := tolerance_problems(lab):
                for line in tolerances:
                    typer.echo(f"  {line}", err=True)
                failed.append(lab_id)
                continue
            if warning := slow_warning(lab, rows):
                typer.echo(f"  {warning}")
            result = summary(rows)
            if result["mutants"] < MIN_MUTANTS:
                typer.echo(
                    f"  {lab_id}: {result['mutants']} mutants in mutants/, at least {MIN_MUTANTS} needed", err=True
                )
            if not result["ok"]:
                failed.append(lab_id)
            elif record and (path := record_reference_wire(lab, rows[0].verdict)):
                typer.echo(f"  recorded the reference's communication in {path}")
    if failed:
        typer.echo(f"\nNOT PROVEN: {', '.join(failed)}", err=True)
        raise typer.Exit(1)
    if unproven and lab_ids:
        # Named on purpose and not run: not a pass. 3, not 1: nothing was found wrong with them.
        typer.echo(f"\nnot proven here (needs a CUDA GPU): {', '.join(unproven)}", err=True)
        raise typer.Exit(3)
    skipped = f" (skipped, needing a CUDA GPU: {', '.join(unproven)})" if unproven else ""
    proven = "references at full marks, starters below them, every mutant losing its checks"
    typer.echo(f"\nevery lab proven: {proven}{skipped}")


@lab_app.command("new")
def lab_new(
    lab_id: Annotated[str, typer.Argument(help="The new lab's id, its folder name in content/labs.")],
    exercise: Annotated[str, typer.Option(help="The exercise the lab grades by running code (its id).")],
    world_sizes: Annotated[str, typer.Option(help="Comma-separated world sizes the lab runs at.")] = "2,3,4",
    title: Annotated[str | None, typer.Option(help="The lab's title (default: from its id).")] = None,
    driver: Annotated[
        bool, typer.Option("--driver", help="A public driver.py owns the loop and calls the student's code.")
    ] = False,
    script: Annotated[bool, typer.Option("--script", help="The student writes a whole torchrun-style script.")] = False,
) -> None:
    """Write a complete lab folder to start from: proven as it stands (``ringlab lab test ID``), ready to edit.

    The example averages a tensor across the ranks and judges the result and the bytes each rank sends;
    comments marked EDIT show where an author changes it. Nothing is written if the id, the exercise or
    the world sizes are wrong, or the folder exists.
    """
    from app.content.loader import load_tree
    from app.content.source import ContentError
    from labs.host import scaffold

    content = _content_dir()
    try:
        sizes = [int(s) for s in world_sizes.split(",") if s.strip()]
    except ValueError:
        typer.echo(f"--world-sizes takes numbers separated by commas, e.g. 2,3,4; got '{world_sizes}'", err=True)
        raise typer.Exit(2) from None
    try:
        exercises = {e.id for s in load_tree(content, check_markdown=False).exercise_sets for e in s.exercises}
    except ContentError as exc:
        _fail_on_problems(exc)
    if exercise not in exercises:
        typer.echo(f"no exercise '{exercise}' in {content}/exercises: a lab grades one of the exercises", err=True)
        raise typer.Exit(2)
    try:
        files = scaffold.render(lab_id, exercise, sizes, driver=driver, script=script, title=title)
        folder = scaffold.write(content, files, lab_id)
    except scaffold.ScaffoldError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from None
    for name in files:
        typer.echo(f"  wrote {folder / name}")
    typer.echo(
        f"\nNext: ringlab content check (it passes), then ringlab lab test {lab_id} (it proves the lab: the reference"
        " at full marks, each mutant losing its checks). Edit the lines marked EDIT, one step at a time, and prove"
        " it again after each. The authoring guide is docs/authoring-labs.md."
    )


def _content_dir() -> Path:
    from app.config import get_settings

    return get_settings().content_dir


# The student's side (app/client): login, labs, fetch, submit against a server's JSON API.
client_commands.register(app)


def main() -> None:
    app()
