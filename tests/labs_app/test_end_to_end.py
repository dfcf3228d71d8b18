"""A real worker (real bubblewrap sandbox, real torch.distributed ranks) grades submissions made through the API."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.labs.queue import Job
from app.labs.worker import Worker, capacity
from app.main import create_app
from tests.conftest import CONTENT_DIR
from tests.factories import PASSWORD, make_user
from tests.labs_app.conftest import solution, unique


@pytest.fixture(scope="module")
def grader() -> Iterator[Any]:
    from labs.host.grader import Grader

    g = Grader(CONTENT_DIR / "labs", pool_size=1)
    if g.refusal:
        g.close()
        pytest.fail(f"the sandbox cannot start here: {g.refusal} (scripts/test.sh installs bubblewrap)")
    yield g
    g.close()


@pytest.fixture
def running_worker(live_factory: sessionmaker[Session], grader: Any, tmp_path: Path) -> Iterator[Worker]:
    def grade(job: Job, backend: str) -> dict[str, Any]:
        return grader.grade(job.lab_id, job.code, backend=backend, world_sizes=[2, 4], lab_dir=job.lab_dir).to_dict()  # type: ignore[no-any-return]

    worker = Worker(live_factory, grade, capacity(gpu_count=0, sandboxed=True), cache_dir=tmp_path / "cache")
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    yield worker
    stop.set()
    thread.join(timeout=60)


@pytest.fixture
def live_client(live_url: str, tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(database_url=live_url, data_dir=tmp_path, content_dir=CONTENT_DIR, sync_content_on_start=False)
    with TestClient(create_app(settings)) as client:
        yield client


def wait_done(client: TestClient, sid: int, auth: dict[str, str], timeout: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body: dict[str, Any] = client.get(f"/api/v1/submissions/{sid}", headers=auth).json()
        if body["status"] not in ("queued", "running"):
            return body
        time.sleep(0.1)
    raise AssertionError(f"submission {sid} still {body['status']} after {timeout} s")


def test_a_worker_grades_api_submissions_end_to_end(
    live_client: TestClient, live_factory: sessionmaker[Session], running_worker: Worker
) -> None:
    name = unique("e2e")
    with live_factory() as session:
        make_user(session, name)
    token = live_client.post("/api/v1/auth/token", json={"username": name, "password": PASSWORD}).json()
    auth = {"Authorization": f"Bearer {token['access_token']}"}

    sid = live_client.post(
        "/api/v1/labs/ring-allreduce/submissions", json={"code": solution("ring-allreduce")}, headers=auth
    ).json()["id"]
    body = wait_done(live_client, sid, auth)
    assert body["status"] == "graded", body["verdict"]
    assert body["score"] == body["max_score"] == 10
    assert all(c["passed"] for c in body["checks"]) and len(body["checks"]) == 4
    volume = body["verdict"]["data"]
    assert volume["backend"] == "gloo"
    assert body["started_at"] and body["finished_at"]

    bad = live_client.post(
        "/api/v1/labs/ring-allreduce/submissions", json={"code": "def ring_all_reduce(t):\n  x = (\n"}, headers=auth
    ).json()["id"]
    body = wait_done(live_client, bad, auth)
    assert body["status"] == "failed" and body["score"] == 0
    assert body["verdict"]["status"] == "compile_error" and "line 2" in body["verdict"]["message"]

    wrong = "import torch.distributed as dist\n\ndef ring_all_reduce(t):\n    t.mul_(2)\n"
    sid = live_client.post("/api/v1/labs/ring-allreduce/submissions", json={"code": wrong}, headers=auth).json()["id"]
    body = wait_done(live_client, sid, auth)
    assert body["status"] == "graded" and body["score"] < body["max_score"]
    assert not next(c for c in body["checks"] if c["id"] == "ring-all-reduce")["passed"]
