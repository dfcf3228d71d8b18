"""``/healthz``: can the site do its job? One report per component, 503 when it cannot.

- **database**: reachable (a read) and writable (a real committed write, at most every
  ``PROBE_EVERY_S``; on SQLite also enough free space in the data directory);
- **content**: loaded at least once (``content_syncs``), with when and which digest;
- **workers**: how many grading workers heartbeat now, how many jobs are queued and the
  oldest one's age, and what confines their ranks (``confinement``: live workers per
  ``cgroup v1``, ``cgroup v2`` or ``none``). Grading is down when a job has waited 30 s with no
  worker alive, or when the oldest has waited longer than ``RINGLAB_HEALTH_MAX_QUEUE_AGE_S``.
"""

from __future__ import annotations

import shutil
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import case, func, select, text, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Mapped, Session, mapped_column, sessionmaker

from app.content import service as content
from app.db import Base, UTCDateTime, session_scope, utcnow
from app.labs import service as labs
from app.labs.models import Submission, SubmissionStatus
from app.lti.models import Outbox, OutboxStatus

PROBE_EVERY_S = 5.0  # an unauthenticated route: it must not let anyone make the database write at will
MIN_FREE_BYTES = 8 << 20  # SQLite: below this the data directory counts as full
NO_WORKER_GRACE_S = 30.0  # a worker restarting (or just started) is not yet an outage


class HealthProbe(Base):
    """One row that /healthz rewrites to prove the database takes writes."""

    __tablename__ = "health_probes"

    id: Mapped[int] = mapped_column(primary_key=True)
    checked_at: Mapped[datetime] = mapped_column(UTCDateTime)


class WriteProbe:
    """A committed write, remembered for ``PROBE_EVERY_S``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.at = -PROBE_EVERY_S
        self.result: tuple[bool, str | None] = (False, "not checked yet")

    def check(self, factory: sessionmaker[Session], url: str) -> tuple[bool, str | None]:
        folder = sqlite_dir(url)
        if folder is not None:  # cheap (statvfs): every time
            free = shutil.disk_usage(folder).free
            if free < MIN_FREE_BYTES:
                return False, f"the data directory {folder} is full ({free} bytes free)"
        with self.lock:
            if time.monotonic() - self.at < PROBE_EVERY_S:
                return self.result
            self.result = self._write(factory)
            self.at = time.monotonic()
            return self.result

    @staticmethod
    def _write(factory: sessionmaker[Session]) -> tuple[bool, str | None]:
        try:
            with session_scope(factory) as session:
                now = utcnow()
                if not session.execute(update(HealthProbe).where(HealthProbe.id == 1).values(checked_at=now)).rowcount:  # type: ignore[attr-defined]
                    session.add(HealthProbe(id=1, checked_at=now))
        except SQLAlchemyError as exc:
            return False, f"a write failed: {str(exc.orig if hasattr(exc, 'orig') else exc)[:200]}"
        return True, None


def sqlite_dir(url: str) -> Path | None:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    return Path(parsed.database).resolve().parent


def report(state: Any, *, max_queue_age_s: float) -> tuple[bool, dict[str, Any]]:
    """(healthy, the per-component report) for the app whose ``app.state`` is ``state``."""
    now = utcnow()
    db: dict[str, Any] = {"ok": False, "reachable": False, "writable": False}
    loaded: dict[str, Any] = {"ok": False}
    workers: dict[str, Any] = {"ok": False}
    lms: dict[str, Any] = {"ok": False}
    try:
        with state.readers() as session:
            session.execute(text("SELECT 1"))
            db["reachable"] = True
            last = content.last_sync(session)
            loaded = {"ok": last is not None}
            if last is not None:
                loaded.update(synced_at=last.synced_at.isoformat(), digest=last.digest)
            workers = grading(session, now=now, max_queue_age_s=max_queue_age_s)
            lms = lti_health(session, now=now)
    except SQLAlchemyError as exc:
        db["problem"] = f"the database cannot be read: {str(getattr(exc, 'orig', exc))[:200]}"
    if db["reachable"]:
        probe: WriteProbe = state.health_probe
        db["writable"], problem = probe.check(state.sessionmaker, str(state.engine.url))
        if problem:
            db["problem"] = problem
    db["ok"] = db["reachable"] and db["writable"]
    parts = {"database": db, "content": loaded, "workers": workers}
    healthy = all(part["ok"] for part in parts.values())
    # An LMS that is down delays grades in its gradebook, not Ringlab: reported, never a reason for a 503.
    return healthy, {"status": "ok" if healthy else "unavailable", **parts, "lms": lms}


LMS_FAILING_S = 900.0  # an owed score failing this long is a problem to look at (app.lti.sender retries it)


def lti_health(session: Session, *, now: datetime) -> dict[str, Any]:
    """Scores owed to LMS gradebooks: how many, the oldest, and how many are failing."""
    owed = Outbox.status == OutboxStatus.pending
    count, oldest, failing = session.execute(
        select(func.count(), func.min(Outbox.changed_at), func.sum(case((Outbox.tries > 0, 1), else_=0))).where(owed)
    ).one()
    age = round((now - oldest).total_seconds(), 1) if oldest is not None else None
    out: dict[str, Any] = {"owed": int(count or 0), "failing": int(failing or 0), "oldest_owed_s": age}
    out["ok"] = not (failing and age is not None and age > LMS_FAILING_S)
    if not out["ok"]:
        out["problem"] = f"{failing} score(s) for LMS gradebooks failing to send, the oldest owed for {age:.0f} s"
    return out


def grading(session: Session, *, now: datetime, max_queue_age_s: float) -> dict[str, Any]:
    live = labs.workers(session=session, now=now)
    alive = len(live)
    confinement: dict[str, int] = {}
    for w in live:
        confinement[w.confinement] = confinement.get(w.confinement, 0) + 1
    queued = select(func.count(), func.min(Submission.queued_at)).where(Submission.status == SubmissionStatus.queued)
    count, oldest = session.execute(queued).one()
    age = round((now - oldest).total_seconds(), 1) if oldest is not None else None
    problem = None
    if count and not alive and age is not None and age > NO_WORKER_GRACE_S:
        problem = f"{count} job(s) queued and no grading worker alive"
    elif age is not None and age > max_queue_age_s:
        problem = f"the oldest queued job has waited {age:.0f} s (more than {max_queue_age_s:.0f} s)"
    out: dict[str, Any] = {"ok": problem is None, "alive": alive, "queued": int(count or 0), "oldest_queued_s": age}
    out["confinement"] = confinement
    if problem:
        out["problem"] = problem
    return out
