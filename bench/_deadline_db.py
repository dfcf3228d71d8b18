"""The database side of the deadline bench: the queue over time, and whether every submission was
graded exactly once (what ``lab_submissions`` and ``lab_workers`` record), and a back-to-back re-grade."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.accounts.models import Role
from app.content.courses import DEFAULT_COURSE
from app.courses.models import CourseRole
from app.db import make_engine, session_scope, utcnow
from app.labs import catalog, service
from app.labs.models import IN_FLIGHT, LabWorker, Submission
from app.web.auth import Principal

Factory = sessionmaker[Session]


def sample_queue(url: str, stop: threading.Event, out: list[tuple[float, int, int]]) -> None:
    """Every second until ``stop``: (wall time, jobs waiting, jobs being graded)."""
    engine = make_engine(url)
    query = select(Submission.status, func.count()).where(Submission.status.in_(IN_FLIGHT)).group_by(Submission.status)
    try:
        while not stop.is_set():
            at = time.time()
            with engine.connect() as conn:
                counts = {str(status): int(n) for status, n in conn.execute(query).all()}
            out.append((at, counts.get("queued", 0), counts.get("running", 0)))
            stop.wait(max(0.0, 1.0 - (time.time() - at)))
    finally:
        engine.dispose()


def verdicts_written(factory: Factory) -> int:
    """What the workers count: one per verdict written (lab_workers.graded)."""
    with factory() as session:
        return int(session.scalar(select(func.coalesce(func.sum(LabWorker.graded), 0))) or 0)


def rows(factory: Factory, ids: list[int]) -> dict[int, Submission]:
    with factory() as session:
        found = session.scalars(select(Submission).where(Submission.id.in_(ids))).all()
        session.expunge_all()
    return {r.id: r for r in found}


@dataclass(frozen=True)
class Audit:
    no_row: int  # acknowledged (202 with an id), but no such row
    never_graded: int  # a row, still queued or running at the end
    claimed_twice: int  # attempts > 1: a worker's claim was lost or retried, so the code ran again
    extra_writes: int  # verdicts the workers counted beyond one per finished submission

    @property
    def lost(self) -> int:
        return self.no_row + self.never_graded

    @property
    def doubled(self) -> int:
        return self.claimed_twice + max(0, self.extra_writes)

    def line(self) -> str:
        return (
            f"lost {self.lost} (acknowledged but no row {self.no_row}, never graded {self.never_graded}); "
            f"double-graded {self.doubled} (claimed more than once {self.claimed_twice}, "
            f"verdicts written beyond one each {self.extra_writes})"
        )


def audit(found: dict[int, Submission], ids: list[int], writes: int) -> Audit:
    done = sum(1 for r in found.values() if r.done and r.finished_at is not None)
    return Audit(
        no_row=sum(1 for i in ids if i not in found),
        never_graded=sum(1 for r in found.values() if not r.done),
        claimed_twice=sum(1 for r in found.values() if r.attempts > 1),
        extra_writes=writes - done,
    )


def wait_graded(factory: Factory, ids: list[int], timeout: float) -> dict[int, Submission]:
    """The rows once none of ``ids`` is in flight (or after ``timeout``). Asks with a count every 0.5 s:
    loading every row (code and verdict) each time cost the back-to-back run a tenth of the machine."""
    deadline = time.monotonic() + timeout
    waiting = select(func.count()).where(Submission.id.in_(ids), Submission.status.in_(IN_FLIGHT))
    while time.monotonic() < deadline:
        with factory() as session:
            if not session.scalar(waiting):
                break
        time.sleep(0.5)
    return rows(factory, ids)


def back_to_back(factory: Factory, ids: list[int], timeout: float) -> tuple[float, dict[int, Submission], Audit]:
    """Queue the same submissions again, all at once; graded per minute until the last verdict."""
    before = verdicts_written(factory)
    with session_scope(factory) as session:
        by_lab: dict[str, list[int]] = {}
        for r in session.scalars(select(Submission).where(Submission.id.in_(ids))):
            by_lab.setdefault(r.lab_id, []).append(r.id)
        began = time.time()
        for lab, lab_ids in by_lab.items():
            service.regrade(lab_ids, lab, session=session, now=utcnow())
    return _graded_at_once(factory, ids, began, before, timeout)


def queued_at_once(
    factory: Factory, people: list[tuple[int, str]], work: list[tuple[str, str]], timeout: float
) -> tuple[float, dict[int, Submission], Audit]:
    """Submit ``work`` ((lab, code) each, one per person of ``people``: (user id, username)) in one
    transaction, as the app queues a submission, and wait for every verdict: graded per minute."""
    before = verdicts_written(factory)
    limits = service.Limits(max_code_bytes=10**7, per_window=10**6, window_s=60)
    with session_scope(factory) as session:
        labs = {lab: catalog.get_lab(session, lab) for lab in {lab for lab, _ in work}}
        began = time.time()
        made = []
        for (user_id, name), (lab, code) in zip(people, work, strict=True):
            who = Principal(user_id, name, Role.student, course_id=DEFAULT_COURSE, course_role=CourseRole.student)
            made.append(service.submit(labs[lab], who, code, session=session, now=utcnow(), limits=limits))
    return _graded_at_once(factory, [m.id for m in made], began, before, timeout)


def _graded_at_once(
    factory: Factory, ids: list[int], began: float, before: int, timeout: float
) -> tuple[float, dict[int, Submission], Audit]:
    found = wait_graded(factory, ids, timeout)
    last = max((r.finished_at.timestamp() for r in found.values() if r.finished_at), default=began)
    return len(ids) / max(last - began, 1e-9) * 60, found, audit(found, ids, verdicts_written(factory) - before)


def rush_rate(samples: list[tuple[float, int, int]], finished: list[float]) -> tuple[float, float, int] | None:
    """Graded per minute from the first to the last second the queue had jobs waiting (the workers
    had work all along), that span in seconds, and how many of its samples saw jobs waiting."""
    busy = [at for at, queued, _ in samples if queued > 0]
    if len(busy) < 2:
        return None
    start, end = busy[0], busy[-1]
    graded = sum(1 for at in finished if start <= at <= end)
    return graded / (end - start) * 60, end - start, len(busy)


def wait_for_workers(factory: Factory, n: int, timeout: float = 180) -> bool:
    """True once ``n`` grading workers heartbeat (registered, not stopped); False after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with factory() as session:
            if len(service.workers(session=session, now=utcnow())) >= n:
                return True
        time.sleep(0.5)
    return False
