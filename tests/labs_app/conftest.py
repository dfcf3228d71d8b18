"""Fixtures for the lab pages, API, queue and worker.

Most tests run in the usual rolled-back transaction. The queue's concurrency and the
end-to-end grading need commits another connection can see, so ``live_url`` is a
fresh migrated database per backend that is never rolled back (each test uses its
own users and labs' rows).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.accounts.models import Role
from app.db import make_engine, make_sessionmaker
from app.labs import queue
from app.labs.catalog import PublishedLab, get_lab
from app.labs.queue import Capacity
from app.labs.settings import LabSettings
from tests.conftest import BACKENDS, CONTENT_DIR, migrated_copy_url
from tests.factories import csrf_token, make_user, sign_in

HX = {"HX-Request": "true"}

_names = itertools.count()


class Clock:
    """A clock tests move by hand."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def ring(session: Session) -> PublishedLab:
    return get_lab(session, "ring-allreduce")


@pytest.fixture
def lab_settings(app: FastAPI) -> LabSettings:
    settings = LabSettings(lab_submit_limit=3, lab_submit_window_s=600, lab_lease_s=30, lab_max_attempts=3)
    app.state.lab_settings = settings
    return settings


@pytest.fixture
def roomy(app: FastAPI) -> LabSettings:
    """Room for the several submissions a student makes to earn a hint or full marks."""
    settings = LabSettings(lab_submit_limit=20, lab_submit_window_s=600, lab_lease_s=30, lab_max_attempts=3)
    app.state.lab_settings = settings
    return settings


def signed_in(client: TestClient, session: Session, role: Role = Role.student, prefix: str = "page") -> str:
    """A new user of ``role``, signed in on ``client``; returns the username."""
    name = unique(prefix)
    make_user(session, name, role=role)
    sign_in(client, name)
    return name


def submit_graded(
    client: TestClient,
    session: Session,
    clock: Clock,
    result: dict[str, Any],
    code: str = "x = 1\n",
    lab: str = "ring-allreduce",
) -> int:
    """Submit through the page and let a worker's claim and finish record ``result``, as grading would."""
    r = client.post(f"/labs/{lab}/submissions", data={"code": code}, headers={**HX, "X-CSRF-Token": csrf_token(client)})
    assert r.status_code == 202, r.text
    sid = int(re.search(r"Submission #(\d+)", r.text).group(1))  # type: ignore[union-attr]
    job = queue.claim(capacity("w"), session=session, now=clock(), lease_s=30, max_attempts=3)
    assert job is not None and job.id == sid
    queue.finish(job, "w", result, session=session, now=clock(), max_attempts=3)
    session.commit()
    clock.advance(60)
    return sid


def capacity(name: str = "w1", gpus: int = 0) -> Capacity:
    return Capacity(worker_id=name, hostname="test", pid=1, cpu_count=2, gpu_count=gpus, sandboxed=True)


def unique(prefix: str) -> str:
    return f"{prefix}{next(_names)}"


@pytest.fixture(scope="session", params=BACKENDS)
def live_url(request: pytest.FixtureRequest) -> str:
    """A migrated database with content, committed for real (not rolled back)."""
    return migrated_copy_url(request.param, request, "ringlab_labs_live")


@pytest.fixture
def live_factory(live_url: str) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(live_url)
    yield make_sessionmaker(engine)
    engine.dispose()


def solution(lab: str) -> str:
    return (CONTENT_DIR / "labs" / lab / "solution.py").read_text()


def secret_files() -> list[Path]:
    """Every lab's trusted Python files: checks.py, solution.py and any helper not in public_files."""
    from labs.spec import load_labs

    found = []
    for lab in load_labs(CONTENT_DIR / "labs").values():
        public = {"starter.py", *lab.spec.public_files}
        found += [p for p in lab.folder.glob("*.py") if p.name not in public]
    return sorted(found)
