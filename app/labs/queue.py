"""The grading queue in the database: claim, lease, finish. Torch-free; the worker and tests use it.

Every function takes ``now`` so tests can move the clock. A claim is one UPDATE whose
WHERE picks the oldest queued job this worker can run: on PostgreSQL the pick is
``FOR UPDATE SKIP LOCKED``, so concurrent workers take different rows; on SQLite the
UPDATE itself takes the database's write lock, and ``AND status = 'queued'`` makes a
second claimer of the same row update nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import CursorResult, select, update
from sqlalchemy.orm import Session

from app.labs.models import LabWorker, Submission, SubmissionStatus
from app.lti import outbox

S = Submission
HEARTBEAT_S = 10.0  # a worker writes its heartbeat this often, idle or grading
ALIVE_S = 3 * HEARTBEAT_S  # shown alive while its last heartbeat is this recent
STUDENT_FAULT = {"compile_error", "not_allowed", "runtime_error", "crashed", "time_limit", "deadlock", "memory_limit"}
INFRA = {"refused", "internal_error"}


@dataclass(frozen=True)
class Capacity:
    """What a worker advertises; it only takes jobs it can run."""

    worker_id: str
    hostname: str
    pid: int
    cpu_count: int
    gpu_count: int
    sandboxed: bool
    confinement: str = "none"  # "cgroup v1", "cgroup v2" or "none" (labs.host.grader.Grader.confinement)


@dataclass(frozen=True)
class Job:
    id: int
    lab_id: str
    code: str
    attempt: int
    lab_version: int | None = None  # None: submitted before labs were versioned; graded on the current one
    lab_dir: Path | None = None  # where the worker materialised that version, once it has


def register(capacity: Capacity, *, session: Session, now: datetime) -> None:
    """Advertise this worker (insert or refresh its row). Writes first, so SQLite never fails on a stale read."""
    values = {
        "hostname": capacity.hostname,
        "pid": capacity.pid,
        "cpu_count": capacity.cpu_count,
        "gpu_count": capacity.gpu_count,
        "sandboxed": capacity.sandboxed,
        "confinement": capacity.confinement,
        "last_seen_at": now,
        "stopped_at": None,
    }
    found = _rows(session.execute(update(LabWorker).where(LabWorker.id == capacity.worker_id).values(**values)))
    if not found:
        session.add(LabWorker(id=capacity.worker_id, started_at=now, graded=0, **values))
        session.flush()


def seen(worker_id: str, *, session: Session, now: datetime) -> None:
    """The worker's heartbeat: it is shown alive only while this keeps coming."""
    session.execute(update(LabWorker).where(LabWorker.id == worker_id).values(last_seen_at=now))


def release(worker_id: str, *, session: Session, now: datetime, max_attempts: int) -> int:
    """A worker is known to be dead (its supervisor saw it exit): its jobs go back to the queue now,
    without waiting for their leases, keeping their attempt count (out of attempts: our error).
    Returns how many jobs it held."""
    held = (S.status == SubmissionStatus.running) & (S.worker_id == worker_id)
    back = _rows(
        session.execute(
            update(S)
            .where(held, S.attempts < max_attempts)
            .values(status=SubmissionStatus.queued, worker_id=None, heartbeat_at=None)
            .execution_options(synchronize_session=False)
        )
    )
    verdict = _ours(f"the grading worker died {max_attempts} times while grading it; an instructor can re-grade it")
    given_up = _rows(
        session.execute(
            update(S)
            .where(held, S.attempts >= max_attempts)
            .values(status=SubmissionStatus.error, worker_id=None, finished_at=now, verdict=verdict)
            .execution_options(synchronize_session=False)
        )
    )
    stopped(worker_id, session=session, now=now)
    return back + given_up


def stopped(worker_id: str, *, session: Session, now: datetime) -> None:
    """The worker is gone (a clean stop, or its supervisor saw it die): no longer shown alive."""
    session.execute(update(LabWorker).where(LabWorker.id == worker_id).values(stopped_at=now))


def _rows(result: Any) -> int:
    assert isinstance(result, CursorResult)
    return result.rowcount


def reap(*, session: Session, now: datetime, lease_s: float, max_attempts: int) -> int:
    """Return running jobs whose lease expired to the queue (or, out of attempts, mark them an error)."""
    expired = (S.status == SubmissionStatus.running) & (S.heartbeat_at < now - timedelta(seconds=lease_s))
    back = _rows(
        session.execute(
            update(S)
            .where(expired, S.attempts < max_attempts)
            .values(status=SubmissionStatus.queued, worker_id=None, heartbeat_at=None)
            .execution_options(synchronize_session=False)
        )
    )
    verdict = _ours(f"the grading worker stopped answering {max_attempts} times; an instructor can re-grade it")
    given_up = _rows(
        session.execute(
            update(S)
            .where(expired, S.attempts >= max_attempts)
            .values(status=SubmissionStatus.error, worker_id=None, finished_at=now, verdict=verdict)
            .execution_options(synchronize_session=False)
        )
    )
    return back + given_up


def has_work(capacity: Capacity, *, session: Session, now: datetime, lease_s: float) -> bool:
    """A read-only look: is there a job to claim or a lease to reap? An idle worker writes nothing.

    On SQLite this matters: there is one write lock, and web requests that write wait for it.
    """
    waiting = select(S.id).where(S.status == SubmissionStatus.queued, S.gpus_needed <= capacity.gpu_count).limit(1)
    cutoff = now - timedelta(seconds=lease_s)
    stale = select(S.id).where(S.status == SubmissionStatus.running, S.heartbeat_at < cutoff).limit(1)
    return session.scalar(waiting) is not None or session.scalar(stale) is not None


def claim(capacity: Capacity, *, session: Session, now: datetime, lease_s: float, max_attempts: int) -> Job | None:
    """Atomically take the oldest queued job this worker can run, with a fresh lease; None if there is none."""
    reap(session=session, now=now, lease_s=lease_s, max_attempts=max_attempts)
    pick = (
        select(S.id)
        .where(S.status == SubmissionStatus.queued, S.gpus_needed <= capacity.gpu_count)
        .order_by(S.queued_at, S.id)
        .limit(1)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    row = session.execute(
        update(S)
        .where(S.id == pick, S.status == SubmissionStatus.queued)
        .values(
            status=SubmissionStatus.running,
            worker_id=capacity.worker_id,
            attempts=S.attempts + 1,
            started_at=now,
            heartbeat_at=now,
        )
        .returning(S.id, S.lab_id, S.code, S.attempts, S.lab_version)
        .execution_options(synchronize_session=False)
    ).first()
    if row is not None:
        seen(capacity.worker_id, session=session, now=now)
    return None if row is None else Job(row.id, row.lab_id, row.code, row.attempts, row.lab_version)


def resume(worker_id: str, *, session: Session, now: datetime) -> Job | None:
    """The running job this worker holds, with a fresh lease and its attempt count unchanged; None if none.

    For a worker whose claim met a dropped connection (a database restart): the claim may have
    committed with no answer reaching the worker. Taking that job up again grades it now, once,
    instead of leaving it to wait for its lease to expire and be claimed a second time.
    """
    held = (S.status == SubmissionStatus.running) & (S.worker_id == worker_id)
    first = select(S.id).where(held).order_by(S.id).limit(1).scalar_subquery()
    row = session.execute(
        update(S)
        .where(S.id == first, held)
        .values(heartbeat_at=now)
        .returning(S.id, S.lab_id, S.code, S.attempts, S.lab_version)
        .execution_options(synchronize_session=False)
    ).first()
    return None if row is None else Job(row.id, row.lab_id, row.code, row.attempts, row.lab_version)


def renew(job_id: int, worker_id: str, *, session: Session, now: datetime) -> bool:
    """Extend the lease; False if this worker no longer holds the job (it expired and was re-claimed)."""
    held = _rows(
        session.execute(
            update(S)
            .where(S.id == job_id, S.worker_id == worker_id, S.status == SubmissionStatus.running)
            .values(heartbeat_at=now)
            .execution_options(synchronize_session=False)
        )
    )
    seen(worker_id, session=session, now=now)
    return held == 1


def outcome(verdict_status: str) -> SubmissionStatus | None:
    """The row status for a verdict status; None for our own failures (retried)."""
    if verdict_status in INFRA:
        return None
    return SubmissionStatus.failed if verdict_status in STUDENT_FAULT else SubmissionStatus.graded


def finish(
    job: Job, worker_id: str, verdict: dict[str, Any], *, session: Session, now: datetime, max_attempts: int
) -> SubmissionStatus | None:
    """Write the verdict, in the caller's one transaction, if this worker still holds the lease.

    Our own failures (sandbox refused, grader error) put the job back in the queue until
    ``max_attempts`` claims have been spent, then mark it ``error``; they never score. A verdict
    marked ``final`` (the lab itself cannot be loaded: retrying cannot help) is an ``error`` at once.
    Returns the new status, or None if the lease was lost (another worker grades it).

    A lease that expired while the database was away (the worker could write neither heartbeat nor
    verdict) puts the job back in the queue; until another worker claims it (``attempts`` grows), the
    verdict written late still counts, so the code is not run a second time.
    """
    status = outcome(str(verdict.get("status")))
    mine = (S.worker_id == worker_id) & (S.status == SubmissionStatus.running)
    reaped = S.worker_id.is_(None) & (S.status == SubmissionStatus.queued) & (S.attempts == job.attempt)
    held = (S.id == job.id) & (mine | reaped)
    if status is None and job.attempt < max_attempts and not verdict.get("final"):
        values: dict[str, Any] = {"status": SubmissionStatus.queued, "worker_id": None, "heartbeat_at": None}
        status = SubmissionStatus.queued
    elif status is None:
        status = SubmissionStatus.error
        values = {"status": status, "worker_id": worker_id, "finished_at": now, "verdict": verdict, "score": None}
    else:
        values = {
            "status": status,
            "worker_id": worker_id,
            "finished_at": now,
            "verdict": verdict,
            "score": round(float(verdict.get("score", 0)), 1),  # points to one decimal (partial credit)
            "max_score": int(verdict.get("max_score", 0)),
        }
    done = _rows(session.execute(update(S).where(held).values(**values).execution_options(synchronize_session=False)))
    if done != 1:
        return None
    if status != SubmissionStatus.queued:
        session.execute(update(LabWorker).where(LabWorker.id == worker_id).values(graded=LabWorker.graded + 1))
    if status in (SubmissionStatus.graded, SubmissionStatus.failed):
        # The LMS gradebooks that show this lab learn of it in this same transaction (app.lti.outbox).
        whose = session.execute(select(S.user_id, S.course_id).where(S.id == job.id)).one()
        outbox.score_changed(whose.user_id, whose.course_id, "lab", job.lab_id, session=session, now=now)
    return status


def _ours(message: str) -> dict[str, Any]:
    return {"status": "internal_error", "message": f"{message}. This is not your fault.", "checks": [], "output": {}}
