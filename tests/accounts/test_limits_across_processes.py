"""Sign-in and sign-up limits hold across web processes: two real `ringlab serve` on one database.

Both servers listen on 127.0.0.1 and the requests come from 127.0.0.1, as behind a local
proxy that nobody named: a rotating X-Forwarded-For must not buy more attempts either.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.migrate import upgrade
from tests.conftest import BACKENDS, make_db_url

REPO = Path(__file__).resolve().parents[2]
LIMITS = {"RINGLAB_SIGNUP_LIMIT_PER_CLIENT": "2", "RINGLAB_SIGNIN_LIMIT_PER_ACCOUNT": "3",
          "RINGLAB_SIGNIN_LIMIT_PER_CLIENT": "5"}  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(url: str, data: Path, name: str) -> tuple[subprocess.Popen[bytes], str]:
    env = {**os.environ, **LIMITS, "DATABASE_URL": url, "RINGLAB_DATA_DIR": str(data),
           "RINGLAB_EMBEDDED_WORKER": "false", "RINGLAB_SYNC_CONTENT_ON_START": "false"}  # fmt: skip
    env.pop("RINGLAB_TRUSTED_PROXIES", None)
    port = _free_port()
    log = open(data / f"{name}.log", "wb")  # noqa: SIM115 - open for the server's whole life
    command = [sys.executable, "-m", "app", "serve", "--port", str(port)]
    proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    return proc, f"http://127.0.0.1:{port}"


def _wait_until_up(proc: subprocess.Popen[bytes], base: str, log: Path) -> None:
    deadline = time.monotonic() + 90
    while True:
        try:
            httpx.get(base + "/healthz", timeout=2)  # 503 without content is still up
            return
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"server did not start:\n{log.read_text()}")
        time.sleep(0.2)


@pytest.fixture(params=BACKENDS)
def two_servers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    url = make_db_url(request.param, request, "ringlab_two_servers")
    upgrade(url)
    started = [_serve(url, tmp_path, name) for name in ("a", "b")]
    try:
        for (proc, base), name in zip(started, ("a", "b"), strict=True):
            _wait_until_up(proc, base, tmp_path / f"{name}.log")
        yield started[0][1], started[1][1]
    finally:
        for proc, _ in started:
            proc.terminate()
        for proc, _ in started:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_limits_hold_across_two_web_processes(two_servers: tuple[str, str]) -> None:
    a, b = two_servers

    def post(base: str, path: str, body: dict[str, str], forwarded: str) -> int:
        headers = {"X-Forwarded-For": forwarded}
        return httpx.post(base + path, json=body, headers=headers, timeout=30).status_code

    # Sign-ups: 2 per address, whichever process takes them.
    signups = [
        post(server, "/api/v1/auth/register", {"username": f"user{i}", "password": "long-enough-pw"}, f"192.0.2.{i}")
        for i, server in enumerate((a, b, a, b))
    ]
    assert signups == [201, 201, 429, 429]
    # Failed sign-ins: 3 per account, then 429 even with the right password, on either process.
    wrong = {"username": "user0", "password": "wrong-password"}
    failures = [post(server, "/api/v1/auth/token", wrong, f"198.51.100.{i}") for i, server in enumerate((a, b, a, b))]
    assert failures == [401, 401, 401, 429]
    right = {"username": "user0", "password": "long-enough-pw"}
    assert post(b, "/api/v1/auth/token", right, "198.51.100.99") == 429
    # Sign-in attempts: 5 per address; 3 are used (the refused ones do not count), 2 are left.
    others = [
        post(server, "/api/v1/auth/token", {"username": f"nobody{i}", "password": "x" * 12}, f"203.0.113.{i}")
        for i, server in enumerate((a, b, a, b))
    ]
    assert others == [401, 401, 429, 429]
