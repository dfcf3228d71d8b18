"""A grading queue in a known state, built with the queue's own calls: what workers do, at set times.

Shared by the queue estimate tests, the instructor home's queue and the browser journey (which
writes into its server's database the same way)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from app.labs import queue
from app.labs.models import Submission, SubmissionStatus

LEASE, ATTEMPTS = 30.0, 3
PASSED = {"status": "passed", "score": 10, "max_score": 10, "message": "all checks passed", "checks": []}


def worker(session: Session, name: str, at: datetime, *, gpus: int = 0) -> queue.Capacity:
    """A worker that starts (registers) at ``at``."""
    cap = queue.Capacity(worker_id=name, hostname="grader", pid=1, cpu_count=2, gpu_count=gpus, sandboxed=True)
    queue.register(cap, session=session, now=at)
    session.commit()
    return cap


def enqueue(session: Session, user_id: int, at: datetime, *, lab: str = "ring-allreduce") -> Submission:
    row = Submission(
        user_id=user_id, lab_id=lab, code="x = 1\n", status=SubmissionStatus.queued, gpus_needed=0,
        attempts=0, regrades=0, submitted_at=at, queued_at=at, max_score=10,
    )  # fmt: skip
    session.add(row)
    session.commit()
    return row


def claim(session: Session, cap: queue.Capacity, at: datetime, expected: Submission) -> queue.Job:
    job = queue.claim(cap, session=session, now=at, lease_s=LEASE, max_attempts=ATTEMPTS)
    assert job is not None and job.id == expected.id, "the queue held an older job than the test expected"
    session.commit()
    return job


def grade(session: Session, cap: queue.Capacity, user_id: int, at: datetime, seconds: float) -> Submission:
    """One job submitted and claimed at ``at``, its verdict written ``seconds`` later."""
    row = enqueue(session, user_id, at)
    job = claim(session, cap, at, row)
    status = queue.finish(job, cap.worker_id, PASSED, session=session, now=at + timedelta(seconds=seconds),
                          max_attempts=ATTEMPTS)  # fmt: skip
    assert status == SubmissionStatus.graded
    session.commit()
    return row


def hold(session: Session, cap: queue.Capacity, user_id: int, at: datetime) -> queue.Job:
    """A job the worker claims at ``at`` and keeps grading (its lease renewed by whoever holds it)."""
    return claim(session, cap, at, enqueue(session, user_id, at))


@dataclass(frozen=True)
class Busy:
    worker: queue.Capacity
    held: int  # the job it grades
    queued: int  # the job queued behind it


def busy(session: Session, a: int, b: int, name: str, now: datetime, grade_s: float = 40.0) -> Busy:
    """A worker that started five minutes before ``now``, graded three of ``a``'s jobs in ``grade_s`` each
    and is grading a fourth (its lease and heartbeat renewed at ``now``), and ``b``'s job queued behind it."""
    at = now - timedelta(minutes=5)
    cap = worker(session, name, at)
    for _ in range(3):
        grade(session, cap, a, at, grade_s)
        at += timedelta(seconds=grade_s + 1)
    held = hold(session, cap, a, at + timedelta(seconds=1))
    first = enqueue(session, b, at + timedelta(seconds=2)).id
    assert queue.renew(held.id, cap.worker_id, session=session, now=now)  # still grading it
    session.commit()
    return Busy(cap, held.id, first)
