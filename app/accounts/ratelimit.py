"""Rate limits for signing in and up, counted in the database.

Every web process, and every replica on PostgreSQL, counts the same events, so running N
processes does not give a client N times the limit. A limit is a sliding window: at most
``events`` counted events per key in the last ``window_s`` seconds. Checking and counting
happen in one transaction that holds the key's lock (the write lock on SQLite, an advisory
lock on PostgreSQL), so two processes cannot both take the last event. Keys are stored as
digests: the table never holds an address or an account name.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select, text
from sqlalchemy.orm import Session

from app.accounts.models import LimitHit
from app.errors import RateLimited

KEEP = timedelta(hours=1)  # the longest window; older events are deleted as new ones come


@dataclass
class Limit:
    bucket: str
    events: int
    window_s: int


def retry_after(hits: Sequence[datetime], limit: Limit, now: datetime) -> int | None:
    """Seconds until one more event fits in the window, or None if it fits now (pure)."""
    since = now - timedelta(seconds=limit.window_s)
    recent = sorted(h for h in hits if h > since)
    if len(recent) < limit.events:
        return None
    must_leave = recent[len(recent) - limit.events] if limit.events > 0 else now
    return max(1, math.ceil((must_leave - since).total_seconds()))


def digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def take(limit: Limit, key: str, what: str, *, session: Session, now: datetime) -> int:
    """Count one event for ``key``, or raise RateLimited ("Too many <what>") if the window is full.

    Returns the event's id, for ``release``. Takes effect when ``session`` commits.
    """
    hashed = digest(key)
    if session.get_bind().dialect.name == "postgresql":
        # Held to the end of the transaction: one check-and-count per key at a time.
        lock_id = int.from_bytes(hashlib.sha256(f"{limit.bucket}:{hashed}".encode()).digest()[:8], "big", signed=True)
        session.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": lock_id})
    session.execute(delete(LimitHit).where(LimitHit.at < now - KEEP))
    since = now - timedelta(seconds=limit.window_s)
    query = select(LimitHit.at).where(LimitHit.bucket == limit.bucket, LimitHit.key == hashed, LimitHit.at > since)
    wait = retry_after(list(session.scalars(query)), limit, now)
    if wait is not None:
        raise RateLimited(f"Too many {what}. Try again in {wait} seconds.", retry_after=wait)
    hit = LimitHit(bucket=limit.bucket, key=hashed, at=now)
    session.add(hit)
    session.flush()
    return hit.id


def release(hit_id: int, *, session: Session) -> None:
    """Uncount an event ``take`` counted (a sign-in that turned out not to be a failure)."""
    session.execute(delete(LimitHit).where(LimitHit.id == hit_id))
