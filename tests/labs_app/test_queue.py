"""The grading queue: atomic claims, leases that expire, retries that never count against the student."""

from __future__ import annotations

import threading
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.labs import queue
from app.labs.models import Submission, SubmissionStatus
from tests.factories import make_user
from tests.labs_app.conftest import Clock, capacity, unique

LEASE, ATTEMPTS = 30.0, 3
PASSED = {"status": "passed", "score": 10, "max_score": 10, "message": "all checks passed", "checks": []}
OURS = {"status": "internal_error", "score": 0, "max_score": 10, "message": "the grader failed", "checks": []}


def queued(session: Session, clock: Clock, n: int = 1, *, gpus: int = 0) -> list[Submission]:
    user = make_user(session, unique("q"))
    rows = []
    for i in range(n):
        at = clock.advance(1)
        row = Submission(
            user_id=user.id,
            lab_id="ring-allreduce",
            code=f"# {i}\n",
            gpus_needed=gpus,
            attempts=0,
            regrades=0,
            submitted_at=at,
            queued_at=at,
        )
        session.add(row)
        rows.append(row)
    session.commit()
    return rows


def claim(session: Session, clock: Clock, name: str = "w1", gpus: int = 0) -> queue.Job | None:
    cap = capacity(name, gpus)
    queue.register(cap, session=session, now=clock())
    return queue.claim(cap, session=session, now=clock(), lease_s=LEASE, max_attempts=ATTEMPTS)


def test_claims_take_the_oldest_job_once(session: Session, clock: Clock) -> None:
    first, second = queued(session, clock, 2)
    a, b = claim(session, clock, "a"), claim(session, clock, "b")
    assert a is not None and b is not None
    assert (a.id, b.id) == (first.id, second.id)
    assert a.attempt == 1
    assert claim(session, clock, "c") is None
    session.refresh(first)
    assert (first.status, first.worker_id, first.heartbeat_at) == (SubmissionStatus.running, "a", clock())


def test_an_expired_lease_returns_the_job_and_only_the_new_holder_finishes_it(session: Session, clock: Clock) -> None:
    (sub,) = queued(session, clock)
    job = claim(session, clock, "killed")
    assert job is not None
    clock.advance(LEASE - 1)
    assert queue.renew(job.id, "killed", session=session, now=clock())  # renewed: still held
    clock.advance(LEASE - 1)
    assert claim(session, clock, "other") is None  # renewed lease has not expired yet
    clock.advance(2)
    again = claim(session, clock, "other")
    assert again is not None and again.id == sub.id and again.attempt == 2
    assert not queue.renew(job.id, "killed", session=session, now=clock())
    assert queue.finish(job, "killed", PASSED, session=session, now=clock(), max_attempts=ATTEMPTS) is None
    status = queue.finish(again, "other", PASSED, session=session, now=clock(), max_attempts=ATTEMPTS)
    assert status == SubmissionStatus.graded
    session.refresh(sub)
    assert (sub.status, sub.score, sub.max_score, sub.worker_id) == (SubmissionStatus.graded, 10, 10, "other")


def test_a_job_whose_workers_keep_dying_becomes_our_error(session: Session, clock: Clock) -> None:
    (sub,) = queued(session, clock)
    for attempt in range(1, ATTEMPTS + 1):
        job = claim(session, clock, f"w{attempt}")
        assert job is not None and job.attempt == attempt
        clock.advance(LEASE + 1)
    assert claim(session, clock, "last") is None
    session.refresh(sub)
    assert sub.status == SubmissionStatus.error and sub.score is None
    assert sub.verdict is not None and "not your fault" in sub.verdict["message"]


def test_infrastructure_errors_are_retried_then_reported_as_ours(session: Session, clock: Clock) -> None:
    (sub,) = queued(session, clock)
    for attempt in range(1, ATTEMPTS):
        job = claim(session, clock)
        assert job is not None
        assert queue.finish(job, "w1", OURS, session=session, now=clock(), max_attempts=ATTEMPTS) == "queued"
        session.refresh(sub)
        assert sub.status == SubmissionStatus.queued and sub.verdict is None and sub.attempts == attempt
    job = claim(session, clock)
    assert job is not None
    assert queue.finish(job, "w1", OURS, session=session, now=clock(), max_attempts=ATTEMPTS) == "error"
    session.refresh(sub)
    assert sub.status == SubmissionStatus.error and sub.score is None


def test_student_faults_are_final_and_scored(session: Session, clock: Clock) -> None:
    (sub,) = queued(session, clock)
    job = claim(session, clock)
    assert job is not None
    verdict = {**PASSED, "status": "compile_error", "score": 0, "message": "SyntaxError at line 3"}
    assert queue.finish(job, "w1", verdict, session=session, now=clock(), max_attempts=ATTEMPTS) == "failed"
    session.refresh(sub)
    assert (sub.status, sub.score, sub.attempts) == (SubmissionStatus.failed, 0, 1)


def test_gpu_jobs_wait_for_a_worker_with_enough_gpus(session: Session, clock: Clock) -> None:
    (gpu_job,) = queued(session, clock, gpus=2)
    assert claim(session, clock, "cpu-only") is None
    assert claim(session, clock, "one-gpu", gpus=1) is None
    job = claim(session, clock, "two-gpus", gpus=2)
    assert job is not None and job.id == gpu_job.id


def test_concurrent_workers_never_claim_the_same_job(live_factory: sessionmaker[Session], clock: Clock) -> None:
    with live_factory() as session:
        ids = {s.id for s in queued(session, clock, 24)}
    claimed: list[int] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def drain(name: str) -> None:
        try:
            while True:
                with live_factory() as session, session.begin():
                    job = queue.claim(capacity(name), session=session, now=clock(), lease_s=LEASE, max_attempts=3)
                if job is None:
                    return
                with lock:
                    claimed.append(job.id)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=drain, args=(f"t{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    mine = [i for i in claimed if i in ids]
    assert sorted(mine) == sorted(ids)  # every job claimed, none twice
    with live_factory() as session:
        rows = session.scalars(select(Submission).where(Submission.id.in_(ids))).all()
        assert all(r.status == SubmissionStatus.running and r.attempts == 1 for r in rows)


def test_an_idle_worker_only_reads(session: Session, clock: Clock) -> None:
    cap = capacity("idle")
    assert not queue.has_work(cap, session=session, now=clock(), lease_s=LEASE)
    queued(session, clock)
    assert queue.has_work(cap, session=session, now=clock(), lease_s=LEASE)
    job = claim(session, clock)
    assert job is not None and not queue.has_work(cap, session=session, now=clock(), lease_s=LEASE)
    clock.advance(LEASE + 1)
    assert queue.has_work(cap, session=session, now=clock(), lease_s=LEASE)  # an expired lease to reap


def test_the_worker_retries_when_the_grader_raises(
    live_factory: sessionmaker[Session], clock: Clock, tmp_path: Path
) -> None:
    from app.labs.worker import Worker

    with live_factory() as session:
        (sub,) = queued(session, clock)
    calls: list[int] = []

    def flaky(job: queue.Job, backend: str) -> dict[str, object]:
        calls.append(job.attempt)
        if job.attempt == 1:
            raise RuntimeError("the sandbox pool broke")
        return {**PASSED, "lab": job.lab_id}

    worker = Worker(live_factory, flaky, capacity("flaky"), cache_dir=tmp_path, clock=clock)
    worker.register()
    assert worker.step() == SubmissionStatus.queued
    assert worker.step() == SubmissionStatus.graded
    assert calls == [1, 2]
    with live_factory() as session:
        row = session.get(Submission, sub.id)
        assert row is not None and row.score == 10 and row.verdict is not None
        assert row.verdict["data"]["backend"] == "gloo"
