"""`ringlab login`, `labs`, `fetch` and `submit`: the student's side, against a server's JSON API.

Every expected failure (no server set, a refused token, a server that is down) is a ClientError:
one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer

from app.client import format as fmt
from app.client.config import ClientConfig, load, normalise_server, save
from app.client.http import Api, ClientError


@contextmanager
def _expected_errors() -> Iterator[None]:
    try:
        yield
    except ClientError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(fmt.NOT_GRADED) from None


def _api(*, signed_in: bool = True) -> Api:
    config = load(os.environ)
    if not config.server:
        raise ClientError("no server set: run ringlab login --server URL (or set RINGLAB_SERVER)")
    if signed_in and not config.token:
        raise ClientError(f"not signed in to {config.server}: run ringlab login")
    return Api(config.server, config.token)


def login(
    server: Annotated[
        str | None, typer.Option(help="The Ringlab server's address, e.g. https://ringlab.example.edu.")
    ] = None,
    username: Annotated[str | None, typer.Option(help="Your username (asked for if not given).")] = None,
    token: Annotated[str | None, typer.Option(help="Use this API token instead of a username and password.")] = None,
) -> None:
    """Sign in to a server: asks your username and password, and keeps the token in your config file."""
    with _expected_errors():
        base = normalise_server(server or load(os.environ).server or "")
        if not base:
            raise ClientError("which server? run ringlab login --server URL")
        if token is None:
            name = username or typer.prompt("Username")
            password = typer.prompt("Password", hide_input=True)
            issued = Api(base).post("/api/v1/auth/token", {"username": name, "password": password}, auth=False)
            token = str(issued["access_token"])
        me = Api(base, token).get("/api/v1/me")
        path = save(ClientConfig(server=base, token=token, username=me["username"]), os.environ)
    typer.echo(f"signed in to {base} as {me['username']} (token kept in {path})")


def labs() -> None:
    """List the labs: id, title, world sizes, and your best score so far."""
    with _expected_errors():
        found = _api().get("/api/v1/labs")
    typer.echo(fmt.labs_table(found))


def fetch(
    lab_id: Annotated[str, typer.Argument(help="The lab's id (see ringlab labs).")],
    folder: Annotated[
        Path | None, typer.Argument(help="Where to write the files (default: a folder named LAB_ID).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite files that are already there.")] = False,
) -> None:
    """Write a lab's statement.md, starter.py and public files (such as driver.py) into a folder."""
    target = folder or Path(lab_id)
    with _expected_errors():
        api = _api(signed_in=False)
        lab = quote(lab_id, safe="")
        detail = api.get(f"/api/v1/labs/{lab}")
        names = detail.get("public_files", [])
        public = {name: api.text(f"/labs/{lab}/public/{quote(name, safe='')}") for name in names}
        files = fmt.lab_files(detail, public)
        there = sorted(name for name in files if (target / name).exists())
        if there and not force:
            raise ClientError(f"{', '.join(there)} already in {target}/: not overwritten (--force overwrites them)")
        target.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (target / name).write_text(text, encoding="utf-8")
    typer.echo(f"wrote {', '.join(files)} to {target}/")
    typer.echo(f"edit starter.py, then: ringlab submit {lab_id} {target / 'starter.py'}")


def submit(
    lab_id: Annotated[str, typer.Argument(help="The lab's id (see ringlab labs).")],
    file: Annotated[Path, typer.Argument(help="Your Python file.")],
) -> None:
    """Submit a file and watch it: the queue while it waits, then every check and the total.

    Exit status 0 at full marks, 1 below full marks, 2 if it could not be submitted or graded.
    """
    with _expected_errors():
        try:
            code = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ClientError(f"cannot read {file}: {getattr(exc, 'strerror', None) or exc}") from None
        api = _api()
        created = api.post(f"/api/v1/labs/{quote(lab_id, safe='')}/submissions", {"code": code})
        typer.echo(f"submitted {file} to {lab_id} as submission {created['id']}")
        done = _watch(api, int(created["id"]), print_line=typer.echo)
    for line in fmt.result_lines(done):
        typer.echo(line)
    typer.echo(f"on the web: {api.server}/labs/submissions/{done['id']}")
    raise typer.Exit(fmt.exit_status(done))


def _watch(api: Api, submission_id: int, *, print_line: Callable[[str], Any]) -> dict[str, Any]:
    """Poll until the submission is done, printing each new progress line; the finished body."""
    said, hold, seen = None, fmt.FIRST_HOLD_S, "queued"
    try:
        while True:
            held = f"?wait={hold:g}&seen={seen}" if hold else ""  # held by the server until the status changes
            body: dict[str, Any] = api.get(f"/api/v1/submissions/{submission_id}{held}")
            line = fmt.progress_line(body)
            if line is None:
                return body
            if line != said:
                print_line(line)
                said = line
            hold, seen = fmt.next_hold_s(body), body.get("status", "queued")
            if not hold:  # a server without long polls: ask again after the pause it gives
                time.sleep(fmt.next_poll_s(body))
    except KeyboardInterrupt:
        page = f"{api.server}/labs/submissions/{submission_id}"
        sys.stderr.write(f"\nstopped watching; submission {submission_id} is still being graded: {page}\n")
        raise typer.Exit(130) from None


def register(app: typer.Typer) -> None:
    """Add the client's commands to the `ringlab` command."""
    app.command(rich_help_panel="Students")(login)
    app.command(rich_help_panel="Students")(labs)
    app.command(rich_help_panel="Students")(fetch)
    app.command(rich_help_panel="Students")(submit)
