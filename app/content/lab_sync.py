"""Synced labs: each changed lab folder becomes a new numbered version in the database.

Apart from validation (``app.content.labs``), so that ``ringlab content check`` never imports the database layer.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.content import records as r
from app.content.models import LabContent


def sync_labs(labs: list[LabContent], upsert: Any, *, session: Session, now: Any) -> None:
    """Give every changed lab a new version (the files as they are now) and point its row at it.

    ``upsert`` is the content sync's upserter, so labs are added, updated and retired in the
    same transaction and report as everything else.
    """
    for position, lab in enumerate(labs):
        newest = session.execute(
            select(r.LabVersion.version, r.LabVersion.digest)
            .where(r.LabVersion.lab_id == lab.id)
            .order_by(r.LabVersion.version.desc())
            .limit(1)
        ).first()
        digest = lab.digest
        if newest is not None and newest.digest == digest:
            version = newest.version
        else:
            version = 1 if newest is None else newest.version + 1
        values = {"title": lab.title, "exercise_id": lab.exercise, "version": version}
        upsert(r.Lab, "lab", lab.id, position, values)
        if newest is None or newest.digest != digest:
            session.flush()  # the lab row first: its versions refer to it
            session.add(
                r.LabVersion(
                    lab_id=lab.id, version=version, digest=digest, spec=lab.spec, files=lab.files, created_at=now
                )
            )
