"""The `ringlab` command's root: the web app and the grading worker; the other groups come from their modules."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from app.cli import content, courses, db, lab, lti, users
from app.client import commands as client_commands

if TYPE_CHECKING:
    from app.labs.supervisor import Supervisor

app = typer.Typer(help="Ringlab: learn distributed deep-learning training by doing.", no_args_is_help=True)
app.add_typer(db.app, name="db")
app.add_typer(content.app, name="content")
app.add_typer(users.app, name="users")
app.add_typer(courses.app, name="courses")
app.add_typer(lab.app, name="lab")
app.add_typer(lti.app, name="lti")


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

    settings = get_settings()
    url = settings.sqlalchemy_url
    upgrade(url)
    if settings.sync_content_on_start:
        _sync_content()
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


def _sync_content() -> None:
    """Sync content/ before the embedded worker starts, which reads the labs' ``preload`` lists from the
    database for its warm template; the web processes then skip their own sync on start."""
    import logging
    import os

    from app.config import get_settings
    from app.content.service import sync_directory
    from app.content.source import ContentError
    from app.db import make_engine, make_sessionmaker
    from app.paths import ENV_PREFIX

    settings = get_settings()
    engine = make_engine(settings.sqlalchemy_url)
    try:
        report = sync_directory(settings.content_dir, make_sessionmaker(engine))
        typer.echo(f"content synced: {report.summary()}", err=True)
    except ContentError as exc:  # as the web process would: keep serving what is already loaded
        logging.getLogger("ringlab").error("content not synced, still serving the last good content:\n%s", exc)
    finally:
        engine.dispose()
    settings.sync_content_on_start = False  # this process's app (one web process)
    os.environ[f"{ENV_PREFIX}SYNC_CONTENT_ON_START"] = "false"  # and the processes of --workers N


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


# The student's side (app/client): login, labs, fetch, submit against a server's JSON API.
client_commands.register(app)
