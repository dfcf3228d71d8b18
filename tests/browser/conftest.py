"""A real server and a real Chromium for the journeys a person takes.

The app runs under uvicorn in a subprocess on a free local port, with its own
SQLite file, exactly as `ringlab serve` runs it (the `ringlab` commands that make
its database and staff first run in the test process). Debian's Chromium is driven
by Playwright; a failing test leaves a screenshot in test-artifacts/.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.browser.pictures import picture
from tests.cli import ringlab

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("RINGLAB_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = REPO / "test-artifacts"
INSTRUCTOR = ("prof", "instructor-password-1")  # the default course's instructor
ADMIN = ("root", "admin-password-1")  # a site administrator


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve(tmp_path_factory.mktemp("browser-data")) as base:
        yield base


def server_env(data: Path, **extra: str) -> dict[str, str]:
    """The environment of a server (and of its `ringlab` commands) keeping its SQLite file in ``data``."""
    # Every browser journey signs up from 127.0.0.1: more than the default 10 sign-ups an hour.
    env = {**os.environ, "RINGLAB_DATA_DIR": str(data), "RINGLAB_SIGNUP_LIMIT_PER_CLIENT": "200", **extra}
    env.pop("DATABASE_URL", None)
    return env


@contextmanager
def serve(data: Path, **extra: str) -> Iterator[str]:
    """`ringlab serve` on a free port with its own database in ``data``; yields its base URL."""
    env = server_env(data, **extra)
    # Its database and staff, made by the `ringlab` commands in this process (tests.cli); then the server itself.
    for command in (
        ["db", "upgrade"],
        ["users", "create", INSTRUCTOR[0], "--role", "instructor", "--password", INSTRUCTOR[1]],
        ["users", "create", ADMIN[0], "--admin", "--password", ADMIN[1]],
    ):
        done = ringlab(*command, env=env)
        assert done.returncode == 0, f"ringlab {' '.join(command)}: {done.stderr}"
    port = _free_port()
    log = open(data / "server.log", "w")  # noqa: SIM115 - open for the server's whole life
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--port", str(port)], cwd=REPO, env=env, stdout=log, stderr=log
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(base + "/healthz", timeout=2) as response:
                if response.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"server did not start:\n{(data / 'server.log').read_text()}")
        time.sleep(0.2)
    try:
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: scripts/test.sh installs Debian's `chromium`.")
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--no-first-run", "--disable-sync"],
        )  # fmt: skip
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser, server: str, request: pytest.FixtureRequest) -> Iterator[Page]:
    context = browser.new_context(base_url=server)
    page = context.new_page()
    errors: list[str] = []
    # Script errors, CSP violations and missing assets are bugs even when the journey passes.
    # (A page answered 403 or 404 on purpose also logs "Failed to load resource"; that one is fine.)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on(
        "console", lambda m: errors.append(m.text) if m.type == "error" and "Failed to load" not in m.text else None
    )
    page.on(
        "response", lambda r: errors.append(f"{r.status} {r.url}") if "/static/" in r.url and r.status >= 400 else None
    )
    yield page
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        picture(page, ARTIFACTS / f"{request.node.name}.png")
    context.close()
    assert not errors, f"browser console errors: {errors}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    setattr(item, f"rep_{report.when}", report)


def sign_up(page: Page, prefix: str = "student") -> str:
    """Sign up a new student through the form (a fresh name each call) and wait for the dashboard."""
    username = f"{prefix}{secrets.token_hex(3)}"
    page.goto("/signup")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill("a-good-password")
    page.get_by_role("button", name="Sign up").click()
    expect(page.get_by_role("heading", name=f"Welcome, {username}")).to_be_visible()
    return username
