"""A queued job wakes a worker on the same host at once (app.labs.wake), after its commit only."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from app.db import make_engine, make_sessionmaker, session_scope, utcnow
from app.labs import catalog, queue, service, wake
from app.labs.models import Submission, SubmissionStatus
from app.labs.settings import LabSettings
from app.web.auth import Principal
from tests.conftest import CONTENT_DIR, migrated_db_url
from tests.factories import make_user
from tests.labs_app.conftest import capacity, unique


@pytest.fixture
def sqlite_engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    engine = make_engine(migrated_db_url("sqlite", request, "wake"))
    yield engine
    engine.dispose()


@pytest.fixture
def listener(sqlite_engine: Engine) -> Iterator[wake.Listener]:
    name = wake.address(sqlite_engine.url)
    assert name is not None
    listening = wake.Listener(name)
    yield listening
    listening.close()


def submit(engine: Engine, *, fail: bool = False) -> int:
    lab = catalog.get_lab(CONTENT_DIR, "ring-allreduce")
    with session_scope(make_sessionmaker(engine)) as session:
        user = make_user(session, unique("wake"))
        limits = service.Limits.of(LabSettings())
        row = service.submit(lab, Principal.of(user), "x = 1\n", session=session, now=utcnow(), limits=limits)
        if fail:
            raise RuntimeError("the request failed after queueing")
        return row.id


def test_addresses_are_per_sqlite_file_and_none_elsewhere() -> None:
    one, two = wake.address(make_url("sqlite:////a/ringlab.sqlite3")), wake.address(make_url("sqlite:////b/x.db"))
    assert one and two and one != two and one.startswith("\0")
    assert wake.address(make_url("postgresql+psycopg://db/ringlab")) is None
    assert wake.address(make_url("sqlite://")) is None


def test_a_committed_submission_wakes_the_worker(sqlite_engine: Engine, listener: wake.Listener) -> None:
    assert not listener.wait(0.05)
    submit(sqlite_engine)
    started = time.monotonic()
    assert listener.wait(5)
    assert time.monotonic() - started < 1
    assert not listener.wait(0.05)  # one wake-up, consumed


def test_a_rolled_back_submission_wakes_nobody(sqlite_engine: Engine, listener: wake.Listener) -> None:
    with pytest.raises(RuntimeError):
        submit(sqlite_engine, fail=True)
    assert not listener.wait(0.3)
    with session_scope(make_sessionmaker(sqlite_engine)) as session:  # the next commit does not wake either
        make_user(session, unique("quiet"))
    assert not listener.wait(0.3)


def test_only_one_worker_listens_per_database(sqlite_engine: Engine, listener: wake.Listener) -> None:
    name = wake.address(sqlite_engine.url)
    assert name is not None
    with pytest.raises(OSError):
        wake.Listener(name)


def test_a_woken_worker_grades_long_before_its_next_poll(sqlite_engine: Engine, listener: wake.Listener) -> None:
    from labs.worker import Worker

    graded = threading.Event()

    def grade(job: queue.Job, backend: str) -> dict[str, object]:
        graded.set()
        return {"status": "passed", "score": 10, "max_score": 10, "message": "ok", "checks": []}

    worker = Worker(make_sessionmaker(sqlite_engine), grade, capacity(unique("woken")), content_dir=CONTENT_DIR,
                    poll_s=60, wake=listener)  # fmt: skip
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    try:
        time.sleep(0.6)  # idle: past its first look at the queue
        sid = submit(sqlite_engine)
        assert graded.wait(5), "the worker was not woken"
    finally:
        stop.set()
        thread.join(timeout=10)
    with make_sessionmaker(sqlite_engine)() as session:
        row = session.get(Submission, sid)
        assert row is not None and row.status == SubmissionStatus.graded
        assert row.finished_at is not None and row.finished_at - row.submitted_at < timedelta(seconds=5)
