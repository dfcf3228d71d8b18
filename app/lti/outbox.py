"""Scores owed to LMS gradebooks: noted in the same transaction as the work that changed them.

A quiz submitted or a lab graded calls ``score_changed``: for every LMS course linked to the work's course
whose platform knows the student, the (course, item, student) row is set to be sent (again). One row per
student and column, so a burst of submissions sends only the latest score. ``app.lti.sender`` sends.
"""

from __future__ import annotations

import threading
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db import insert_for
from app.lti.models import ContextLink, Identity, Outbox, OutboxStatus

GRADED = ("quiz", "lab")
# Set when this process owes a score: its sender (app.lti.sender.run) wakes at once instead of at its next
# round. Another process's changes (a grading worker's) wait for the round.
WAKE = threading.Event()


def score_changed(user_id: int, course_id: str, kind: str, item_id: str, *, session: Session, now: datetime) -> int:
    """Note that the student's score on the item may have changed; returns how many LMS columns are owed."""
    if kind not in GRADED:
        return 0
    contexts = session.scalars(
        select(ContextLink.id)
        .join(Identity, Identity.platform_id == ContextLink.platform_id)
        .where(ContextLink.course_id == course_id, Identity.user_id == user_id)
    ).all()
    for context_pk in contexts:
        owe(context_pk, f"{kind}:{item_id}", user_id, session=session, now=now)
    if contexts:
        WAKE.set()
    return len(contexts)


def owe(context_pk: int, resource: str, user_id: int, *, session: Session, now: datetime) -> None:
    """Set the row to be sent now (one statement: concurrent changes for one student never collide)."""
    values = {
        "status": OutboxStatus.pending.value,
        "next_at": now,
        "tries": 0,
        "changed_at": now,
        "claimed_until": None,
    }
    stmt = insert_for(session)(Outbox).values(
        context_pk=context_pk, resource=resource, user_id=user_id, version=1, **values
    )
    session.execute(
        stmt.on_conflict_do_update(
            index_elements=["context_pk", "resource", "user_id"], set_={**values, "version": Outbox.version + 1}
        )
    )
