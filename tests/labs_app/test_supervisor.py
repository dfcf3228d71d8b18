"""The supervisor of the embedded worker: a dead worker is restarted at once, with back-off if it keeps
dying, and the jobs it held go back to the queue at once with their attempt counts."""

from __future__ import annotations

import os
import signal
import sys
import time
from datetime import timedelta

from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope, utcnow
from app.labs import queue, service
from app.labs.models import LabWorker, Submission, SubmissionStatus
from app.labs.supervisor import Supervisor, backoff
from tests.factories import make_user
from tests.labs_app.conftest import capacity, unique

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def wait_for(predicate, timeout: float = 10.0) -> float:  # type: ignore[no-untyped-def]
    start = time.monotonic()
    while not predicate():
        assert time.monotonic() - start < timeout, "timed out"
        time.sleep(0.05)
    return time.monotonic() - start


def held_job(factory: sessionmaker[Session], worker_id: str, attempts: int) -> int:
    """A job the worker claimed ``attempts`` times and holds now, with a lease far from expiring."""
    now = utcnow()
    with session_scope(factory) as session:
        queue.register(capacity(worker_id), session=session, now=now)
        user = make_user(session, unique("held"))
        row = Submission(user_id=user.id, lab_id="ring-allreduce", lab_version=1, code="x = 1\n", gpus_needed=0,
                         attempts=0, regrades=0, submitted_at=now, queued_at=now)  # fmt: skip
        session.add(row)
        session.flush()
        session.execute(
            update(Submission)
            .where(Submission.id == row.id)
            .values(status=SubmissionStatus.running, worker_id=worker_id, attempts=attempts, heartbeat_at=now)
        )
        return row.id


def test_a_killed_worker_is_restarted_and_its_job_requeued_at_once(live_factory: sessionmaker[Session]) -> None:
    commands: list[str] = []

    def command(worker_id: str) -> list[str]:
        commands.append(worker_id)
        return SLEEPER

    supervisor = Supervisor(command, live_factory, max_attempts=3)
    supervisor.start()
    try:
        first, proc = supervisor.worker_id, supervisor.proc
        assert first is not None and proc is not None
        job = held_job(live_factory, first, attempts=1)
        last = held_job(live_factory, first, attempts=3)  # its last attempt: our error, not another claim
        os.kill(proc.pid, signal.SIGKILL)
        took = wait_for(lambda: supervisor.restarts == 1)
        assert took < 3.0, f"restarted after {took:.1f} s"
        assert supervisor.proc is not proc and supervisor.proc is not None and supervisor.proc.poll() is None
        assert proc.poll() == -signal.SIGKILL  # reaped: no zombie left
        with live_factory() as session:
            row = session.get(Submission, job)
            assert row is not None and row.status == SubmissionStatus.queued and row.worker_id is None
            assert row.attempts == 1  # kept: the next claim is its second
            spent = session.get(Submission, last)
            assert spent is not None and spent.status == SubmissionStatus.error and spent.verdict is not None
            assert "not your fault" in spent.verdict["message"]
            dead = session.get(LabWorker, first)
            assert dead is not None and dead.stopped_at is not None
            alive = {w.id for w in service.workers(session=session, now=utcnow())}
            assert first not in alive  # shown dead at once, though its last heartbeat is recent
        assert commands[1] != first  # a new worker, a new id
    finally:
        supervisor.stop()
    assert supervisor.proc is not None and supervisor.proc.poll() is not None


def test_a_worker_that_keeps_dying_is_restarted_with_growing_pauses(live_factory: sessionmaker[Session]) -> None:
    supervisor = Supervisor(lambda _id: [sys.executable, "-c", "raise SystemExit(1)"], live_factory, max_attempts=3)
    supervisor.start()
    try:
        wait_for(lambda: supervisor.restarts >= 2, timeout=10)
        time.sleep(1.5)
        assert supervisor.restarts <= 3  # pauses of 0, 1, 2 s: not a busy loop
    finally:
        supervisor.stop()
    assert [backoff(n) for n in range(7)] == [0.0, 1.0, 2.0, 5.0, 10.0, 30.0, 30.0]


def test_a_worker_that_refuses_to_grade_is_not_restarted(live_factory: sessionmaker[Session]) -> None:
    supervisor = Supervisor(lambda _id: [sys.executable, "-c", "raise SystemExit(2)"], live_factory, max_attempts=3)
    supervisor.start()
    try:
        time.sleep(1.0)
        assert supervisor.restarts == 0
    finally:
        supervisor.stop()


def test_a_worker_is_shown_alive_only_while_it_heartbeats(session: Session) -> None:
    now = utcnow()
    for name, seen in (("beating", now - timedelta(seconds=5)), ("silent", now - timedelta(seconds=queue.ALIVE_S + 1))):
        queue.register(capacity(name), session=session, now=seen)
    alive = {w.id for w in service.workers(session=session, now=now)}
    assert "beating" in alive and "silent" not in alive
    queue.stopped("beating", session=session, now=now)
    assert "beating" not in {w.id for w in service.workers(session=session, now=now)}
