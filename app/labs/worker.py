"""The grading worker: claim a job, grade it in a fresh sandbox, write the verdict; forever.

It runs in its own process (``ringlab worker``, or the one ``ringlab serve`` starts),
never in the web process: the engine (``labs.host.grader``, which imports torch) is
imported inside ``start`` only. ``Worker`` itself takes any ``grade`` function, so
tests drive the queue logic with a fake one and the real engine alike.

The database may restart under it (``app.db.unavailable`` tells such errors apart). The worker
then waits and tries again rather than exit: a look at the queue is simply retried; a verdict
already computed, and the lab it needs, are retried until the database takes them (so the code
is not run twice); a claim whose answer was lost is taken up again (``queue.resume``).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from app.db import reason, session_scope, unavailable, utcnow
from app.labs import queue, wake
from app.labs.cache import LabUnavailable, materialise
from app.labs.catalog import PublishedLab, choose_backend, submitted_lab
from app.labs.models import SubmissionStatus
from app.labs.queue import HEARTBEAT_S, Capacity, Job
from app.labs.wake import Listener

log = logging.getLogger("ringlab.worker")
WOKEN_POLL_S = 0.5  # with a wake-up listener: how often to look for expired leases anyway
RETRY_S = (0.2, 0.5, 1.0, 2.0)  # pauses between tries while the database is unavailable; then the last
T = TypeVar("T")
# The torch release every lab is proven on: pyproject's worker extra pins it (tests/labs_app/test_worker_torch.py
# keeps the two equal). A reference may use what only this release has (``dist.all_gather_single``, which
# torch 2.11 lacks), so a worker on another one could fail a lab's own solution and every student with it.
TORCH_SERIES = "2.13"
Grade = Callable[[Job, str], dict[str, Any]]  # (job with its lab_dir, backend) -> Verdict.to_dict()
Load = Callable[[Job], None]  # loads the job's lab (its checks) before grading; raising means it cannot be


def new_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def torch_mismatch(version: str, series: str | None = None) -> str | None:
    """Why a worker with torch ``version`` must not grade, or None when it is the release the labs are proven on."""
    series = series or TORCH_SERIES
    release = version.split("+")[0]
    if release == series or release.startswith(f"{series}."):
        return None
    return (
        f"torch {version} is installed, but the labs are proven on torch {series}: a lab's own reference may fail on "
        f"another release. Install torch=={series}.0 (on a GPU node, its CUDA build), or set "
        "RINGLAB_WORKER_ANY_TORCH=1 to grade anyway (then prove the labs there first: ringlab lab test)"
    )


def published_preloads(readers: sessionmaker[Session]) -> list[str]:
    """Every module a synced lab asks the warm template to import (from the database, not the disk:
    a worker on a GPU node may have no content folder)."""
    from app.labs import catalog

    try:
        with readers() as session:
            labs = catalog.all_labs(session)
    except Exception:  # the database is not migrated yet: the template warms up without them
        log.warning("could not read the labs' preloads from the database", exc_info=True)
        return []
    return sorted({m for lab in labs.values() for m in lab.spec.preload})


def usable_cpus() -> int:
    """The CPUs this process may run on (``taskset``, a container's cpuset), not every CPU of the host."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # no affinity call on this platform
        return os.cpu_count() or 1


def capacity(*, gpu_count: int, sandboxed: bool, worker_id: str | None = None, confinement: str = "none") -> Capacity:
    return Capacity(
        worker_id=worker_id or new_worker_id(),
        hostname=socket.gethostname(),
        pid=os.getpid(),
        cpu_count=usable_cpus(),
        gpu_count=gpu_count,
        sandboxed=sandboxed,
        confinement=confinement,
    )


class Worker:
    def __init__(
        self,
        factory: sessionmaker[Session],
        grade: Grade,
        capacity: Capacity,
        *,
        cache_dir: Path,
        load: Load | None = None,
        lease_s: float = 30.0,
        max_attempts: int = 3,
        poll_s: float = 0.05,
        clock: Callable[[], datetime] = utcnow,
        readers: sessionmaker[Session] | None = None,
        wake: Listener | None = None,
    ):
        self.factory = factory
        # Polling only reads: on SQLite a reader takes no lock, so an idle worker never makes
        # a web request wait (writers begin IMMEDIATE, app.db).
        self.readers = readers or factory
        self.grade = grade
        self.capacity = capacity
        # Each lab version the worker grades is written out here once (app.labs.cache).
        self.cache_dir = cache_dir
        self.load = load
        self.lease_s = lease_s
        self.max_attempts = max_attempts
        self.poll_s = poll_s
        # Woken when a job is queued (app.labs.wake): then polling, less often, only finds
        # expired leases and wake-ups that were missed.
        self.wake = wake
        self.clock = clock
        self.registered = False
        self.stopping = threading.Event()  # ``run``'s stop: retries give up once it is set
        # A claim met an unavailable database: it may have committed unseen (queue.resume).
        self.unsure_claim = False

    def register(self) -> None:
        with session_scope(self.factory) as session:
            queue.register(self.capacity, session=session, now=self.clock())
        self.registered = True

    def step(self) -> SubmissionStatus | None:
        """Grade at most one job. Returns its new status, or None if there was none (or the lease was lost)."""
        job = self._resume() if self.unsure_claim else None
        if job is None:
            job = self._claim()
        if job is None:
            return None
        lost = threading.Event()
        done = threading.Event()
        beat = threading.Thread(target=self._heartbeat, args=(job, done, lost), name="lease", daemon=True)
        beat.start()
        try:
            verdict = self._grade(job)
        finally:
            done.set()
            beat.join()
        status = self._until_written(f"submission {job.id}: its verdict", lambda: self._finish(job, verdict))
        if status is None:
            log.warning("submission %s: lease lost while grading; its new holder grades it", job.id)
        else:
            log.info("submission %s (%s): %s, %s", job.id, job.lab_id, status, verdict.get("status"))
        return status

    def _claim(self) -> Job | None:
        with session_scope(self.readers) as session:
            if not queue.has_work(self.capacity, session=session, now=self.clock(), lease_s=self.lease_s):
                return None
        # A fresh transaction that starts with its write: on SQLite it waits for the lock, never a stale read.
        try:
            with session_scope(self.factory) as session:
                return queue.claim(
                    self.capacity,
                    session=session,
                    now=self.clock(),
                    lease_s=self.lease_s,
                    max_attempts=self.max_attempts,
                )
        except Exception as exc:
            self.unsure_claim = unavailable(exc)
            raise

    def _resume(self) -> Job | None:
        with session_scope(self.factory) as session:
            job = queue.resume(self.capacity.worker_id, session=session, now=self.clock())
        self.unsure_claim = False
        if job is not None:
            log.warning("submission %s: its claim committed as the database went away; grading it now", job.id)
        return job

    def _finish(self, job: Job, verdict: dict[str, Any]) -> SubmissionStatus | None:
        with session_scope(self.factory) as session:
            return queue.finish(
                job, self.capacity.worker_id, verdict, session=session, now=self.clock(), max_attempts=self.max_attempts
            )

    def _until_written(self, what: str, work: Callable[[], T]) -> T:
        """``work()``, tried again while the database is unavailable, until it succeeds or the worker stops.

        For what cannot be had again without grading again: a verdict the worker holds, the lab of
        a job it has claimed. If the worker stops first, the job's lease brings it back to the queue.
        """
        tries = 0
        while True:
            try:
                done = work()
            except Exception as exc:
                if not unavailable(exc) or self.stopping.is_set():
                    raise
                pause = RETRY_S[min(tries, len(RETRY_S) - 1)]
                if not tries:
                    log.warning(
                        "%s: the database is unavailable (%s); trying again until it is back", what, reason(exc)
                    )
                tries += 1
                self.stopping.wait(pause)
                continue
            if tries:
                log.info("%s: written after %s tries; the database is back", what, tries + 1)
            return done

    def _grade(self, job: Job) -> dict[str, Any]:
        try:
            lab = self._until_written(f"submission {job.id}: reading its lab", lambda: self._lab(job))
            job = replace(job, lab_dir=materialise(lab, self.cache_dir))
            if self.load is not None:
                self.load(job)
        except SQLAlchemyError:  # a busy or restarting database: retried, as any failure of ours
            log.exception("submission %s: could not read its lab", job.id)
            return {
                "status": "internal_error",
                "message": "the lab could not be read; this is not your fault",
                "checks": [],
            }
        except Exception as exc:  # the lab itself is broken: no retry can help, and other labs go on
            log.exception("submission %s: lab %s (version %s) cannot be loaded", job.id, job.lab_id, job.lab_version)
            return lab_unavailable(job, exc)
        backend = choose_backend(lab, self.capacity.gpu_count)
        try:
            verdict = self.grade(job, backend)
        except Exception:  # the grader's own failure: retried, never the student's fault
            log.exception("submission %s: the grader raised", job.id)
            return {"status": "internal_error", "message": "the grader failed; this is not your fault", "checks": []}
        verdict.setdefault("data", {})["backend"] = backend
        return verdict

    def _lab(self, job: Job) -> PublishedLab:
        with session_scope(self.readers) as session:
            return submitted_lab(session, job.lab_id, job.lab_version)

    def _heartbeat(self, job: Job, done: threading.Event, lost: threading.Event) -> None:
        while not done.wait(min(self.lease_s / 3, HEARTBEAT_S)):
            try:
                with session_scope(self.factory) as session:
                    if not queue.renew(job.id, self.capacity.worker_id, session=session, now=self.clock()):
                        lost.set()
                        return
            except Exception as exc:  # a busy or restarting database: try again at the next beat
                if not unavailable(exc):
                    log.exception("submission %s: could not renew the lease", job.id)
                else:
                    log.warning("submission %s: could not renew the lease (%s)", job.id, reason(exc))

    def run(self, stop: threading.Event, *, parent_pid: int | None = None) -> None:
        """Drain the queue until ``stop`` is set (or the parent process, if given, has gone).

        The worker registers at once and writes a heartbeat every ``HEARTBEAT_S``, idle or not
        (one tiny write: on SQLite it holds the write lock for well under a millisecond), so it
        is shown alive only while it really is. A clean stop marks it stopped.
        """
        self.stopping = stop
        last_seen = time.monotonic()
        down = False  # the database was unavailable at the last step
        while not stop.is_set():
            if parent_pid is not None and os.getppid() != parent_pid:
                log.info("parent process %s has gone: stopping", parent_pid)
                break
            try:
                if not self.registered:
                    self.register()
                    last_seen = time.monotonic()
                status = self.step()
                if time.monotonic() - last_seen > HEARTBEAT_S:
                    with session_scope(self.factory) as session:
                        queue.seen(self.capacity.worker_id, session=session, now=self.clock())
                    last_seen = time.monotonic()
            except Exception as exc:  # a job held, if any, comes back through its lease
                if not unavailable(exc):
                    log.exception("worker step failed; retrying")
                elif not down:  # a restart: said once, not every second until it is over
                    log.warning("the database is unavailable (%s); trying again every second", reason(exc))
                down = down or unavailable(exc)
                stop.wait(1.0)
                continue
            if down:
                log.info("the database is back; grading again")
                down = False
            if status is None:
                self._idle(stop)
        self._stopped()

    def _stopped(self) -> None:
        if not self.registered:
            return
        try:
            with session_scope(self.factory) as session:
                queue.stopped(self.capacity.worker_id, session=session, now=self.clock())
        except SQLAlchemyError:
            log.exception("could not mark this worker stopped; it stops heartbeating instead")

    def _idle(self, stop: threading.Event) -> None:
        """Wait ``poll_s``, less if a job is queued (woken) or ``stop`` is set."""
        if self.wake is None:
            stop.wait(self.poll_s)
            return
        deadline = time.monotonic() + self.poll_s
        while not stop.is_set() and (left := deadline - time.monotonic()) > 0:
            if self.wake.wait(min(left, WOKEN_POLL_S)):
                return


def lab_unavailable(job: Job, exc: BaseException) -> dict[str, Any]:
    """Our error, final at once: the job's lab cannot be loaded, so every retry would fail the same way."""
    version = f" (version {job.lab_version})" if job.lab_version is not None else ""
    detail = str(exc) if isinstance(exc, LabUnavailable) else f"{type(exc).__name__}: {exc}"
    message = (
        f"lab {job.lab_id}{version} could not be loaded by the grader, so your code was not run: {detail[:500]}. "
        "This is not your fault and does not count against you; an instructor can re-grade it once the lab is fixed."
    )
    return {"status": "internal_error", "final": True, "message": message, "checks": []}


def start(
    *,
    unsafe: bool,
    pool_size: int,
    parent_pid: int | None = None,
    worker_id: str | None = None,
    stop: threading.Event | None = None,
    allow_no_cgroups: bool | None = None,
) -> int:
    """Run one worker against DATABASE_URL until SIGTERM/SIGINT; the exit code for the CLI.

    ``allow_no_cgroups`` (default: ``RINGLAB_ALLOW_NO_CGROUPS=1``): grade even where control groups
    cannot limit the ranks (``labs.host.grader.Grader``); otherwise such a worker refuses to start.
    """
    from app.config import get_settings
    from app.db import make_engine, make_sessionmaker
    from app.labs.settings import LabSettings
    from labs.host.grader import Grader, gpu_count

    settings, lab_settings = get_settings(), LabSettings()
    mismatch = None if lab_settings.worker_any_torch else torch_mismatch(metadata.version("torch"))
    if mismatch is not None:
        log.error("refusing to grade: %s.", mismatch)
        return 2
    gpus = gpu_count()
    engine = make_engine(settings.sqlalchemy_url)
    readers = make_sessionmaker(engine, read_only=True)
    grader = Grader(
        settings.content_dir / "labs", pool_size=pool_size, gpus=gpus > 0, unsafe_no_sandbox=unsafe,
        preload=published_preloads(readers), preload_source=lambda: published_preloads(readers),
        allow_without_cgroups=allow_no_cgroups,
    )  # fmt: skip
    if grader.refusal is not None:
        hint = "" if grader.refusal.startswith("control groups") else (
            " Install bubblewrap (apt-get install bubblewrap); --unsafe-no-sandbox runs it unconfined, "
            "for development only."
        )  # fmt: skip
        log.error("refusing to grade untrusted code: %s.%s", grader.refusal, hint)
        grader.close()
        return 2
    stop = stop or threading.Event()
    # Event.set takes a lock the interrupted main thread may hold: set it from another thread.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: threading.Thread(target=stop.set).start())

    def load(job: Job) -> None:
        grader.lab(job.lab_id, job.lab_dir)  # lab.yaml and checks.py, from the job's own version

    def grade(job: Job, backend: str) -> dict[str, Any]:
        return grader.grade(job.lab_id, job.code, backend=backend, lab_dir=job.lab_dir).to_dict()

    listener = wake.listen(engine)
    worker = Worker(
        make_sessionmaker(engine),
        grade,
        capacity(gpu_count=gpus, sandboxed=not unsafe, worker_id=worker_id, confinement=grader.confinement),
        readers=make_sessionmaker(engine, read_only=True),
        cache_dir=settings.data_dir / "lab-cache",
        load=load,
        lease_s=lab_settings.lab_lease_s,
        max_attempts=lab_settings.lab_max_attempts,
        wake=listener,
        poll_s=WOKEN_POLL_S if listener is not None else 0.05,
    )
    sandbox = "OFF (unsafe)" if unsafe else "bubblewrap"
    log.info("worker %s: %s CPUs, %s GPUs, sandbox %s, limits per rank: %s", worker.capacity.worker_id,
             worker.capacity.cpu_count, gpus, sandbox, grader.confinement)  # fmt: skip
    try:
        worker.run(stop, parent_pid=parent_pid)
    finally:
        grader.close()
        if listener is not None:
            listener.close()
        engine.dispose()
    return 0
