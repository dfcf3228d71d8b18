"""A queued job wakes the workers at once (app.labs.wake), after its commit only, on both backends."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url

from app.db import make_engine, make_sessionmaker, session_scope, utcnow
from app.labs import catalog, queue, service, wake
from app.labs.models import Submission, SubmissionStatus
from app.labs.settings import LabSettings
from tests.conftest import BACKENDS, migrated_copy_url
from tests.factories import make_user, student_principal
from tests.labs_app.conftest import capacity, unique


@pytest.fixture(params=BACKENDS)
def engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    engine = make_engine(migrated_copy_url(request.param, request, "wake"))
    yield engine
    engine.dispose()


@pytest.fixture
def listener(engine: Engine) -> Iterator[wake.Listener]:
    listening = wake.listen(engine)
    assert listening is not None
    yield listening
    listening.close()


def submit(engine: Engine, *, fail: bool = False) -> int:
    with session_scope(make_sessionmaker(engine)) as session:
        lab = catalog.get_lab(session, "ring-allreduce")
        user = make_user(session, unique("wake"))
        limits = service.Limits.of(LabSettings())
        row = service.submit(lab, student_principal(user), "x = 1\n", session=session, now=utcnow(), limits=limits)
        if fail:
            raise RuntimeError("the request failed after queueing")
        return row.id


def test_addresses_are_per_sqlite_file_and_none_elsewhere() -> None:
    one, two = wake.address(make_url("sqlite:////a/ringlab.sqlite3")), wake.address(make_url("sqlite:////b/x.db"))
    assert one and two and one != two and one.startswith("\0")
    assert wake.address(make_url("postgresql+psycopg://db/ringlab")) is None
    assert wake.address(make_url("sqlite://")) is None


def test_a_committed_submission_wakes_the_worker(engine: Engine, listener: wake.Listener) -> None:
    assert not listener.wait(0.05)
    submit(engine)
    started = time.monotonic()
    assert listener.wait(5)
    assert time.monotonic() - started < 1
    assert not listener.wait(0.05)  # one wake-up, consumed


def test_a_rolled_back_submission_wakes_nobody(engine: Engine, listener: wake.Listener) -> None:
    with pytest.raises(RuntimeError):
        submit(engine, fail=True)
    assert not listener.wait(0.3)
    with session_scope(make_sessionmaker(engine)) as session:  # the next commit does not wake either
        make_user(session, unique("quiet"))
    assert not listener.wait(0.3)


ON_SQLITE = pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
ON_POSTGRESQL = pytest.mark.parametrize("engine", [b for b in BACKENDS if b == "postgresql"], indirect=True)


@ON_SQLITE
def test_on_sqlite_only_one_worker_per_host_listens(engine: Engine, listener: wake.Listener) -> None:
    assert wake.listen(engine) is None  # the socket is taken: this worker polls


@ON_POSTGRESQL
def test_on_postgresql_every_listening_worker_is_woken(engine: Engine, listener: wake.Listener) -> None:
    other = wake.listen(engine)
    assert other is not None
    try:
        submit(engine)
        assert listener.wait(5) and other.wait(5)
    finally:
        other.close()


@ON_POSTGRESQL
def test_a_postgresql_listener_that_loses_its_connection_polls_then_listens_again(
    engine: Engine, listener: wake.Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert isinstance(listener, wake.PgListener) and listener.conn is not None
    monkeypatch.setattr(wake, "RECONNECT_S", 0.2)
    with engine.connect() as conn:  # what a server restart does to it
        conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": listener.conn.info.backend_pid})
    started = time.monotonic()
    assert listener.wait(5)  # lost: reports woken, so its worker polls
    assert time.monotonic() - started < 1
    assert listener.conn is None
    time.sleep(0.3)
    assert listener.wait(0.05)  # reconnects here, then polls once more
    assert listener.conn is not None
    assert not listener.wait(0.2)  # listening again: quiet until a job comes
    submit(engine)
    assert listener.wait(5)


def test_a_woken_worker_grades_long_before_its_next_poll(
    engine: Engine, listener: wake.Listener, tmp_path: Path
) -> None:
    from app.labs.worker import Worker

    graded = threading.Event()

    def grade(job: queue.Job, backend: str) -> dict[str, object]:
        graded.set()
        return {"status": "passed", "score": 10, "max_score": 10, "message": "ok", "checks": []}

    worker = Worker(make_sessionmaker(engine), grade, capacity(unique("woken")), cache_dir=tmp_path,
                    poll_s=60, wake=listener)  # fmt: skip
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    try:
        time.sleep(0.6)  # idle: past its first look at the queue
        sid = submit(engine)
        assert graded.wait(5), "the worker was not woken"
    finally:
        stop.set()
        thread.join(timeout=10)
    with make_sessionmaker(engine)() as session:
        row = session.get(Submission, sid)
        assert row is not None and row.status == SubmissionStatus.graded
        assert row.finished_at is not None and row.finished_at - row.submitted_at < timedelta(seconds=5)
