"""`ringlab serve` as deployed, with its embedded worker killed by -9 in the middle of a job: the app,
never restarted, has that job and the next one graded within seconds, and says so on /healthz."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from app.db import make_engine, make_sessionmaker
from app.labs.models import LabWorker, Submission
from tests.conftest import BACKENDS, REPO, make_db_url
from tests.labs_app.conftest import solution

# A correct solution that takes a few seconds per group of ranks: printing keeps it from looking idle.
SLOW = (
    solution("collectives-p2p") + "\nimport time\nfor _ in range(3):\n    print('.', flush=True)\n    time.sleep(0.4)\n"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(params=BACKENDS)
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, subprocess.Popen[bytes]]]:
    url = make_db_url(request.param, request, "ringlab_embedded")
    env = {**os.environ, "DATABASE_URL": url, "RINGLAB_DATA_DIR": str(tmp_path), "RINGLAB_EMBEDDED_WORKER": "true"}
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--port", str(port)], cwd=REPO, env=env, stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(base + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        yield base, url, proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def student(client: httpx.Client, name: str) -> dict[str, str]:
    body = {"username": name, "password": "a-long-password"}
    assert client.post("/api/v1/auth/register", json=body).status_code == 201
    token = client.post("/api/v1/auth/token", json=body).json()["access_token"]
    return {"Authorization": f"Bearer {token}"}


def poll(client: httpx.Client, sid: int, auth: dict[str, str], until: set[str], timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        body: dict[str, Any] = client.get(f"/api/v1/submissions/{sid}", headers=auth).json()
        if body["status"] in until:
            return body
        assert time.monotonic() < deadline, f"submission {sid} still {body['status']} after {timeout} s"
        time.sleep(0.1)


def test_killing_the_embedded_worker_mid_job_loses_nothing(served: tuple[str, str, subprocess.Popen[bytes]]) -> None:
    base, url, app_proc = served
    engine = make_engine(url)
    factory = make_sessionmaker(engine)
    try:
        with httpx.Client(base_url=base, timeout=30) as client:
            ada, bob = student(client, "ada"), student(client, "bob")
            first = client.post("/api/v1/labs/collectives-p2p/submissions", json={"code": SLOW}, headers=ada).json()
            poll(client, first["id"], ada, {"running"}, timeout=180)  # a cold worker imports torch first
            with factory() as session:
                holder = session.scalar(select(Submission.worker_id).where(Submission.id == first["id"]))
                pid = session.scalar(select(LabWorker.pid).where(LabWorker.id == holder))
            assert pid is not None and pid != app_proc.pid
            os.kill(pid, signal.SIGKILL)
            killed = time.monotonic()
            code = solution("collectives-p2p")
            second = client.post("/api/v1/labs/collectives-p2p/submissions", json={"code": code}, headers=bob).json()

            done = poll(client, first["id"], ada, {"graded", "failed", "error"}, timeout=90)
            took_first = time.monotonic() - killed
            after = poll(client, second["id"], bob, {"graded", "failed", "error"}, timeout=90)
            took_second = time.monotonic() - killed
            print(f"after kill -9: the held job graded in {took_first:.1f} s, the next in {took_second:.1f} s")
            assert done["status"] == "graded" and done["score"] == done["max_score"], done["verdict"]
            assert after["status"] == "graded" and after["score"] == after["max_score"], after
            assert took_second < 60
            with factory() as session:
                row = session.get(Submission, first["id"])
                assert row is not None and row.attempts == 2  # the killed claim, then the one that graded it
                dead = session.get(LabWorker, holder)
                assert dead is not None and dead.stopped_at is not None
            health = client.get("/healthz")
            assert health.status_code == 200, health.text
            assert health.json()["workers"]["alive"] == 1  # the new worker; the dead one is not counted
            assert app_proc.poll() is None  # the app itself was never restarted
    finally:
        engine.dispose()
