"""Sends what the outbox owes to LMS gradebooks (AGS scores), with back-off, from any number of processes.

A row is claimed with a short lease (an UPDATE that only one process wins), sent with no transaction open,
and recorded: sent if no newer change came meanwhile (else it stays owed and goes again), or retried after
``BACKOFF``. A process killed mid-send leaves a lease that expires: another sends the row. The platform
keeps the latest score per student and column, so a score sent twice is harmless; one never sent is not.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from pylti1p3.assignments_grades import AssignmentsGradesService
from pylti1p3.grade import Grade
from pylti1p3.lineitem import LineItem as LibLineItem
from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope, utcnow
from app.lti import adapter, outbox, scores
from app.lti.contexts import bind_line_item
from app.lti.models import ContextLink, Identity, LineItem, Outbox, OutboxStatus, Platform

log = logging.getLogger("ringlab.lti")
LEASE = timedelta(seconds=60)
BACKOFF = (5, 15, 60, 300, 900, 3600)  # seconds before the 1st, 2nd, ... retry; then hourly
SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"


def backoff(tries: int) -> timedelta:
    return timedelta(seconds=BACKOFF[min(tries, len(BACKOFF)) - 1] if tries > 0 else 0)


@dataclass(frozen=True)
class Claimed:
    id: int
    version: int


def claim(*, session: Session, now: datetime, limit: int = 20) -> list[Claimed]:
    free = or_(Outbox.claimed_until.is_(None), Outbox.claimed_until < now)
    due = session.execute(
        select(Outbox.id, Outbox.version)
        .where(Outbox.status == OutboxStatus.pending, Outbox.next_at <= now, free)
        .order_by(Outbox.next_at)
        .limit(limit)
    ).all()
    won = []
    for row_id, version in due:
        result = session.execute(update(Outbox).where(Outbox.id == row_id, free).values(claimed_until=now + LEASE))
        if getattr(result, "rowcount", 0) == 1:
            won.append(Claimed(row_id, version))
    return won


@dataclass(frozen=True)
class Outcome:
    status: OutboxStatus | None  # sent / skipped; None: failed, to retry
    score: float | None = None
    error: str | None = None


def _line_item(context: ContextLink, resource: str, ags: AssignmentsGradesService, session: Session) -> str | None:
    item = session.scalars(
        select(LineItem).where(LineItem.context_pk == context.id, LineItem.resource == resource)
    ).first()
    if item is not None and item.url:
        return item.url
    if not context.lineitems_url:
        return None
    found = ags.find_lineitem_by_resource_id(resource)  # a column deep linking made but no one has launched yet
    if found is None or not found.get_id():
        return None
    return bind_line_item(context, resource, str(found.get_id()), session=session).url


def send_one(job: Claimed, factory: sessionmaker[Session], now: datetime) -> Outcome:
    """Send one row's score. Reads in one short transaction; the HTTP calls hold none."""
    with session_scope(factory) as session:
        row = session.get(Outbox, job.id)
        if row is None:
            return Outcome(OutboxStatus.skipped, error="gone")
        context = session.get(ContextLink, row.context_pk)
        platform = session.get(Platform, context.platform_id) if context else None
        sub = session.scalar(
            select(Identity.sub).where(Identity.platform_id == context.platform_id, Identity.user_id == row.user_id)
        ) if context else None  # fmt: skip
        if context is None or platform is None or sub is None or context.course_id is None:
            return Outcome(OutboxStatus.skipped, error="The LMS course or the student's LMS account is gone.")
        if SCORE_SCOPE not in (context.ags_scopes or []):
            return Outcome(OutboxStatus.skipped, error="The LMS did not grant Ringlab the score scope for this course.")
        registration = adapter.registration(platform, session=session, now=now)
        ags = AssignmentsGradesService(
            adapter.Connector(registration),
            cast(Any, {"scope": list(context.ags_scopes), "lineitems": context.lineitems_url or "", "lineitem": ""}),
        )
        counted = scores.counted(row.resource, row.user_id, context.course_id, session=session)
        resource, changed_at = row.resource, row.changed_at
        try:
            url = _line_item(context, resource, ags, session)
        except Exception as exc:  # the LMS is down or refused: retried
            return Outcome(None, error=_reason(exc))
    if url is None:
        return Outcome(
            OutboxStatus.skipped, error="The LMS course has no column for this item (add it with deep linking)."
        )
    grade = (
        Grade()
        .set_user_id(sub)
        .set_timestamp(_iso(max(changed_at, counted.submitted_at) if counted and counted.submitted_at else changed_at))
    )
    if counted is None:
        grade.set_activity_progress("Initialized").set_grading_progress("NotReady")
    else:
        grade.set_score_given(counted.score).set_score_maximum(counted.maximum)
        grade.set_activity_progress("Completed").set_grading_progress("FullyGraded")
        if counted.started_at:
            grade.set_started_at(_iso(counted.started_at))
        if counted.submitted_at:
            grade.set_submitted_at(_iso(counted.submitted_at))
    try:
        ags.put_grade(grade, LibLineItem({"id": url}))  # type: ignore[typeddict-item]
    except Exception as exc:
        return Outcome(None, error=_reason(exc))
    return Outcome(OutboxStatus.sent, score=counted.score if counted else None)


def _iso(when: datetime) -> str:
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _reason(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    response = getattr(exc, "response", None)
    body = getattr(response, "text", "") if response is not None else ""
    return (text + (f": {body[:300]}" if body else ""))[:1000]


def record(job: Claimed, outcome: Outcome, *, session: Session, now: datetime) -> None:
    row = session.get(Outbox, job.id)
    if row is None:
        return
    row.claimed_until = None
    if outcome.status is None:
        row.tries += 1
        row.next_at = now + backoff(row.tries)
        row.last_error = outcome.error
        return
    row.last_error = outcome.error
    row.tries = 0
    if outcome.status == OutboxStatus.sent:
        row.sent_score, row.sent_at = outcome.score, now
    if row.version == job.version:  # a change that came while sending is sent next
        row.status = outcome.status


def drain(factory: sessionmaker[Session], *, now: datetime | None = None, limit: int = 20) -> int:
    """Send what is due now; returns how many rows were tried. Blocking: run it in a thread."""
    with session_scope(factory) as session:
        jobs = claim(session=session, now=now or utcnow(), limit=limit)
    for job in jobs:
        outcome = send_one(job, factory, now or utcnow())
        if outcome.status is None:
            log.warning("LTI score %s not sent (will retry): %s", job.id, outcome.error)
        with session_scope(factory) as session:
            record(job, outcome, session=session, now=now or utcnow())
    return len(jobs)


def resend(context_pk: int, resource: str, *, session: Session, now: datetime) -> int:
    """Owe every student's score for one column again now (staff's "Resend")."""
    result = session.execute(
        update(Outbox)
        .where(Outbox.context_pk == context_pk, Outbox.resource == resource)
        .values(status=OutboxStatus.pending, next_at=now, tries=0, claimed_until=None, version=Outbox.version + 1)
    )
    return int(getattr(result, "rowcount", 0) or 0)


async def run(factory: sessionmaker[Session], every: float) -> None:
    """The web process's sender: ``drain`` every ``every`` seconds, in a thread, for as long as the app runs;
    once a minute it also clears expired launch state (OIDC states, unused nonces, finished launches)."""
    import time

    import anyio.to_thread

    if every <= 0:
        return
    purged = 0.0
    while True:
        try:
            for _ in range(10):  # a full batch: more may be due
                if not await anyio.to_thread.run_sync(drain, factory):
                    break
            if time.monotonic() - purged > 60:
                await anyio.to_thread.run_sync(_purge, factory)
                purged = time.monotonic()
        except Exception as exc:  # the database restarting, say: the next round tries again (no traceback)
            log.warning("LTI scores: not sent this round (%s: %s)", type(exc).__name__, str(exc).splitlines()[0][:200])
        await _until_woken(every)


async def _until_woken(every: float) -> None:
    """Sleep ``every`` seconds, or less when this process owes a new score (``outbox.WAKE``)."""
    import asyncio
    import time

    deadline = time.monotonic() + every
    while time.monotonic() < deadline:
        if outbox.WAKE.is_set():
            outbox.WAKE.clear()
            await asyncio.sleep(0.05)  # the request that owed it commits as its response goes
            return
        await asyncio.sleep(min(0.05, every))


def _purge(factory: sessionmaker[Session]) -> None:
    with session_scope(factory) as session:
        adapter.purge_expired(session=session, now=utcnow())
