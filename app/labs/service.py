"""Submitting code to a lab and reading results: the one service behind the pages and the API."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.content.records import Lab as LabRow
from app.courses import extensions, policy
from app.errors import Conflict, DomainError, InvalidInput, NotFound, RateLimited
from app.labs import queue_view, wake
from app.labs.catalog import PublishedLab as Lab
from app.labs.catalog import gpus_needed
from app.labs.models import IN_FLIGHT, SCORED, LabWorker, Submission, SubmissionStatus
from app.labs.queue import ALIVE_S
from app.labs.settings import LabSettings
from app.web.auth import Principal
from labs.verdict import points_number

S = Submission
GRADED = SCORED  # a verdict on the student's code


class TooLarge(DomainError):
    status_code = 413


@dataclass(frozen=True)
class Limits:
    max_code_bytes: int
    per_window: int
    window_s: int

    @classmethod
    def of(cls, settings: LabSettings) -> Limits:
        return cls(settings.lab_max_code_bytes, settings.lab_submit_limit, settings.lab_submit_window_s)


def submit(lab: Lab, user: Principal, code: str, *, session: Session, now: datetime, limits: Limits) -> Submission:
    """Queue ``code`` for grading. One job in flight per student per lab, and a per-lab rate limit."""
    size = len(_utf8(code))
    if size > limits.max_code_bytes:
        raise TooLarge(f"The code is {size} bytes; a submission may be at most {limits.max_code_bytes // 1024} KiB.")
    if not code.strip():
        raise InvalidInput("The submission is empty: paste your code or upload a .py file.", field="code")
    if "\0" in code:  # PostgreSQL cannot store it, and Python cannot compile it: say so now, on every database
        line = code.count("\n", 0, code.index("\0")) + 1
        raise InvalidInput(
            f"The file contains a NUL byte (line {line}): save it as plain UTF-8 text without NUL bytes.", field="code"
        )
    # A no-op write on the student's row: it serialises this student's submissions (a row lock on
    # PostgreSQL, the write lock on SQLite), so two quick clicks cannot both pass the checks below.
    course_id = user.working_course()
    lock = update(User).where(User.id == user.id).values(id=User.id)
    session.execute(lock.execution_options(synchronize_session=False))
    mine = (S.user_id == user.id) & (S.lab_id == lab.id)
    _check_terms(lab, user.id, course_id, mine, session=session, now=now)
    if session.scalar(select(func.count()).select_from(S).where(mine, S.status.in_(IN_FLIGHT))):
        raise Conflict("Your previous submission to this lab is still being graded; wait for its result.")
    since = now - timedelta(seconds=limits.window_s)
    recent = list(session.scalars(select(S.submitted_at).where(mine, S.submitted_at > since).order_by(S.submitted_at)))
    if len(recent) >= limits.per_window:
        wait = max(1, math.ceil((recent[-limits.per_window] - since).total_seconds()))
        raise RateLimited(
            f"At most {limits.per_window} submissions per lab every {limits.window_s // 60} minutes; "
            f"try again in {wait} s.",
            retry_after=wait,
        )
    submission = S(
        user_id=user.id,
        lab_id=lab.id,
        lab_version=lab.version,
        code=code,
        status=SubmissionStatus.queued,
        gpus_needed=gpus_needed(lab),
        attempts=0,
        regrades=0,
        submitted_at=now,
        queued_at=now,
        max_score=lab.spec.max_score,
        course_id=course_id,
    )
    session.add(submission)
    session.flush()
    wake.ask_to_wake(session)
    return submission


def _check_terms(lab: Lab, user_id: int, course_id: str, mine: Any, *, session: Session, now: datetime) -> None:
    """The course's terms for the lab: assigned, still open, submissions left (extensions counted)."""
    extensions.admit(
        course_id, user_id, "lab", lab.id, policy.Own(lab.spec.due), session=session, now=now,
        used=lambda: session.scalar(select(func.count()).select_from(S).where(mine, S.course_id == course_id)) or 0,
    )  # fmt: skip


def _utf8(code: str) -> bytes:
    """The code as UTF-8; a lone surrogate (JSON can carry one, as "\\ud800") cannot be stored or run."""
    try:
        return code.encode()
    except UnicodeEncodeError as exc:
        line = code.count("\n", 0, exc.start) + 1
        raise InvalidInput(
            f"The code contains a lone surrogate (U+{ord(code[exc.start]):04X}) at line {line}, which is not "
            "valid Unicode text: remove it or write it as an escape inside a string.",
            field="code",
        ) from None


def get_submission(submission_id: int, user: Principal, *, session: Session) -> Submission:
    """The submission if ``user`` may see it (its author or an instructor); else NotFound, as if absent."""
    # populate_existing: a poll must see the worker's latest write, not the identity map's copy (one query)
    submission = session.get(S, submission_id, populate_existing=True)
    if submission is None or (submission.user_id != user.id and not user.sees_course(submission.course_id)):
        raise NotFound(f"There is no submission {submission_id} of yours.")
    return submission


def waiting_status(submission_id: int, user: Principal, *, session: Session) -> str | None:
    """The status a long poll is held on while the submission is not done; None once done (or NotFound)."""
    submission = get_submission(submission_id, user, session=session)
    return None if submission.done else submission.status.value


def history(lab_id: str, user_id: int, *, session: Session, limit: int = 50) -> list[Submission]:
    query = select(S).where(S.lab_id == lab_id, S.user_id == user_id).order_by(S.id.desc()).limit(limit)
    return list(session.scalars(query))


def position(submission: Submission, *, session: Session) -> int | None:
    """1 for the next job to be claimed; None once it is no longer queued."""
    if submission.status != SubmissionStatus.queued:
        return None
    ahead = (S.queued_at < submission.queued_at) | ((S.queued_at == submission.queued_at) & (S.id < submission.id))
    count = session.scalar(select(func.count()).select_from(S).where(S.status == SubmissionStatus.queued, ahead))
    return int(count or 0) + 1


def snapshot(*, session: Session, now: datetime, gpus_needed: int = 0) -> queue_view.Snapshot:
    """The queue now: its depth, what runs, the oldest job, the workers that can take a job needing
    ``gpus_needed`` GPUs, and the median grading time of the last ten minutes."""
    counts = {
        status: (int(n), oldest)
        for status, n, oldest in session.execute(
            select(S.status, func.count(), func.min(S.queued_at)).where(S.status.in_(IN_FLIGHT)).group_by(S.status)
        )
    }
    depth, oldest = counts.get(SubmissionStatus.queued, (0, None))
    able = sum(1 for w in workers(session=session, now=now) if w.gpu_count >= gpus_needed)
    return queue_view.Snapshot(
        depth=depth,
        running=counts.get(SubmissionStatus.running, (0, None))[0],
        oldest_queued_at=oldest,
        workers=able,
        grade_s=queue_view.median(grade_times(session=session, now=now)),
    )


def _recent(now: datetime) -> Any:
    """Jobs finished in the last ``WINDOW_S``; the ``queued_at`` bound lets the queue's index find them."""
    since = now - timedelta(seconds=queue_view.WINDOW_S)
    return (S.queued_at >= now - timedelta(seconds=queue_view.LOOKBACK_S)) & (S.finished_at >= since)


def grade_times(*, session: Session, now: datetime) -> list[float]:
    """Claim-to-verdict seconds of the jobs graded in the last ten minutes, newest first (at most SAMPLE).

    Each poll of a waiting page asks, so this reads the queue's index backwards, SAMPLE rows per verdict:
    the queue is first in, first out, so the jobs queued last are the ones finished last."""
    since = now - timedelta(seconds=queue_view.WINDOW_S)
    spans: list[tuple[datetime, float]] = []
    for status in GRADED:
        last = select(S.started_at, S.finished_at).where(S.status == status)
        for started, finished in session.execute(last.order_by(S.queued_at.desc()).limit(queue_view.SAMPLE)):
            if started is not None and finished is not None and finished >= since:
                spans.append((finished, (finished - started).total_seconds()))
    spans.sort(key=lambda span: span[0], reverse=True)
    return [seconds for _, seconds in spans[: queue_view.SAMPLE]]


def estimate(submission: Submission, *, session: Session, now: datetime) -> queue_view.Estimate | None:
    """Where a queued submission stands and how long it should wait; None once it is no longer queued."""
    place = position(submission, session=session)
    if place is None:
        return None
    return queue_view.estimate(place, snapshot(session=session, now=now, gpus_needed=submission.gpus_needed))


def estimate_new(lab: Lab, *, session: Session, now: datetime) -> queue_view.Estimate:
    """What a submission to ``lab`` made now would wait: behind every queued job."""
    state = snapshot(session=session, now=now, gpus_needed=gpus_needed(lab))
    return queue_view.estimate(state.depth + 1, state)


def board(*, session: Session, now: datetime) -> queue_view.Board:
    """The queue as staff see it: depth, oldest job, each alive worker's job now and recent rate."""
    state = snapshot(session=session, now=now)
    alive = workers(session=session, now=now)
    ids = [w.id for w in alive]
    finished = S.status.in_((*GRADED, SubmissionStatus.error)) & _recent(now) & S.worker_id.in_(ids)
    recent = {w: n for w, n in session.execute(select(S.worker_id, func.count()).where(finished).group_by(S.worker_id))}
    running = (S.status == SubmissionStatus.running) & S.worker_id.in_(ids)
    holding = {worker: job for job, worker in session.execute(select(S.id, S.worker_id).where(running))}
    rates = [
        queue_view.WorkerRate(
            worker_id=w.id,
            hostname=w.hostname,
            cpu_count=w.cpu_count,
            gpu_count=w.gpu_count,
            recent=int(recent.get(w.id, 0)),
            per_minute=queue_view.per_minute(
                int(recent.get(w.id, 0)), window_s=queue_view.WINDOW_S, up_s=(now - w.started_at).total_seconds()
            ),
            job_id=holding.get(w.id),
        )
        for w in alive
    ]
    oldest = state.oldest_queued_at
    return queue_view.Board(
        snapshot=state,
        workers=rates,
        new_job=queue_view.estimate(state.depth + 1, state),
        oldest_age_s=(now - oldest).total_seconds() if oldest is not None else None,
    )


def regrade(
    submission_ids: list[int] | None, lab_id: str, *, session: Session, now: datetime, course_id: str | None = None
) -> int:
    """Queue submissions again (by id, or every one of the lab in ``course_id`` when None); running ones are left alone.

    A re-grade is against the lab's current version: that is why an instructor re-grades (fixed checks)."""
    query = update(S).where(S.lab_id == lab_id, S.status.not_in(IN_FLIGHT))
    if course_id is not None:
        query = query.where(S.course_id == course_id)
    if submission_ids is not None:
        query = query.where(S.id.in_(submission_ids))
    result = session.execute(
        query.values(
            status=SubmissionStatus.queued,
            attempts=0,
            worker_id=None,
            queued_at=now,
            started_at=None,
            heartbeat_at=None,
            finished_at=None,
            regrades=S.regrades + 1,
            lab_version=select(LabRow.version).where(LabRow.id == S.lab_id).scalar_subquery(),
        ).execution_options(synchronize_session=False)
    )
    session.expire_all()
    queued = int(getattr(result, "rowcount", 0))
    if queued:
        wake.ask_to_wake(session)
    return queued


def workers(*, session: Session, now: datetime, alive_s: float = ALIVE_S) -> list[LabWorker]:
    """The workers alive now: heartbeating within ``alive_s`` and not stopped (or seen dead)."""
    alive = (LabWorker.last_seen_at > now - timedelta(seconds=alive_s)) & LabWorker.stopped_at.is_(None)
    return list(session.scalars(select(LabWorker).where(alive).order_by(LabWorker.started_at)))


def gpus_connected(*, session: Session, now: datetime) -> int:
    """The most GPUs any live worker has (the freshness rule of ``workers`` and /healthz); 0 when none."""
    return max((w.gpu_count for w in workers(session=session, now=now)), default=0)


def gpu_waiting(lab: Lab, *, session: Session, now: datetime, connected: int | None = None) -> bool:
    """A GPU-only lab that no live worker can take now: its jobs wait in the queue for one to connect."""
    need = gpus_needed(lab)
    if not need:
        return False
    have = connected if connected is not None else gpus_connected(session=session, now=now)
    return have < need


def gpu_waiting_labs(labs: list[Lab], *, session: Session, now: datetime) -> set[str]:
    """The ids of the GPU-only labs among ``labs`` that no live worker can take now (one query for all)."""
    connected = gpus_connected(session=session, now=now)
    return {lab.id for lab in labs if gpu_waiting(lab, session=session, now=now, connected=connected)}


def checks(submission: Submission, lab: Lab) -> list[dict[str, Any]]:
    """The submission's checks as the pages and the API show them; before grading, every check unscored."""
    verdict = submission.verdict or {}
    done = {c["id"]: c for c in verdict.get("checks", [])}
    rows = []
    for spec in lab.spec.checks:
        c = done.get(spec.id)
        rows.append(
            {
                "id": spec.id,
                "name": spec.title,
                "passed": bool(c and c["passed"]),
                "points": points_number(c["score"]) if c else 0,
                "max_points": spec.points,
                "message": c["message"] if c else "",
                "data": c.get("data", {}) if c else {},
                "run": c is not None,
                "cards": list(spec.cards),  # flashcards that teach the check: offered when it fails
            }
        )
    return rows


def volume_table(check_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For the ring lab: measured bytes each rank sent, next to 2(N-1)/N of the tensor's bytes."""
    rows = []
    for c in check_rows:
        if c["id"] != "communication-volume":
            continue
        for key, data in sorted(c["data"].items()):
            if not key.startswith("world_size_") or not isinstance(data, dict):
                continue
            n = int(key.removeprefix("world_size_"))
            theory = data.get("theoretical_bytes_per_rank", 0)
            ratios = data.get("ratio_to_theory", [])
            for rank, sent in enumerate(data.get("measured_bytes_per_rank", [])):
                ratio = ratios[rank] if rank < len(ratios) else None
                rows.append({"world_size": n, "rank": rank, "sent": sent, "theory": theory, "ratio": ratio,
                             "tensor_bytes": data.get("tensor_bytes", 0)})  # fmt: skip
    return rows


def in_flight(user_id: int, *, session: Session) -> int:
    """How many of the student's submissions are queued or being graded (for the dashboard)."""
    query = select(func.count()).select_from(Submission)
    return session.scalar(query.where(Submission.user_id == user_id, Submission.status.in_(IN_FLIGHT))) or 0
