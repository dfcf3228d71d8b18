"""Each lab page's "Submit from your terminal" section: the exact commands, and they are real ones."""

from __future__ import annotations

import re
import shlex
from html import unescape

import typer
from fastapi.testclient import TestClient

from app.cli.root import app as cli


def commands(page: str) -> dict[str, str]:
    found = re.findall(r'<code data-testid="terminal-(\w+)">([^<]*)</code>', page)
    return {step: unescape(text) for step, text in found}


def test_the_lab_page_gives_this_labs_commands_and_links_the_api_docs(client: TestClient) -> None:
    page = client.get("/labs/ring-allreduce").text
    assert '<h2 id="lab-terminal-heading">Submit from your terminal</h2>' in page
    assert commands(page) == {
        "login": "ringlab login --server http://testserver",
        "fetch": "ringlab fetch ring-allreduce",
        "submit": "ringlab submit ring-allreduce ring-allreduce/starter.py",
    }
    assert '<a href="/api/docs">API documentation</a>' in page
    assert client.get("/api/docs").status_code == 200


def test_a_lab_with_a_driver_says_fetch_brings_it_too(client: TestClient) -> None:
    page = client.get("/labs/ddp-from-scratch").text
    assert "the starter code, driver.py, data_parallel.py and mlp.py in a folder" in page
    assert commands(page)["fetch"] == "ringlab fetch ddp-from-scratch"


def test_every_command_on_the_page_parses_as_a_ringlab_command(client: TestClient) -> None:
    group = typer.main.get_command(cli)
    for line in commands(client.get("/labs/ring-allreduce").text).values():
        program, name, *args = shlex.split(line)
        assert program == "ringlab" and name in group.commands, line  # type: ignore[attr-defined]
        # Parsing raises a usage error for an unknown option or a missing argument.
        group.commands[name].make_context(name, args)  # type: ignore[attr-defined]
