"""Reviewing a lab as an instructor: every submission, filtered and paginated; the best per student."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.labs.models import IN_FLIGHT, Submission, SubmissionStatus

S = Submission
PER_PAGE = 50
STATUSES = tuple(s.value for s in SubmissionStatus)


@dataclass(frozen=True)
class Filters:
    student: str = ""  # a part of the username
    status: str = ""  # one of STATUSES, or "" for any
    best: bool = False  # one row per student: their best graded submission, else their latest
    page: int = 1

    def query(self, **changes: object) -> str:
        """The query string of these filters, with ``changes`` (for links); defaults are left out."""
        values: dict[str, object] = {
            "student": self.student,
            "status": self.status,
            "best": self.best,
            "page": self.page,
        }
        values.update(changes)
        kept = {
            k: ("1" if v is True else v)
            for k, v in values.items()
            if v not in ("", None, False) and not (k == "page" and v == 1)
        }
        return urlencode(kept)


@dataclass(frozen=True)
class ReviewPage:
    rows: list[tuple[Submission, str]]
    total: int
    filters: Filters
    per_page: int
    counts: dict[str, int]  # the lab's submissions per status (unfiltered)

    @property
    def pages(self) -> int:
        return max(1, math.ceil(self.total / self.per_page))

    @property
    def in_flight(self) -> int:
        return sum(self.counts.get(s.value, 0) for s in IN_FLIGHT)


def pick_best(rows: list[tuple[int, int, SubmissionStatus, float | None]]) -> list[int]:
    """Submission ids, one per student: the highest graded score (latest on a tie), else the latest.

    ``rows`` are (id, user id, status, score); ids grow with time. Newest first.
    """
    best: dict[int, tuple[int, float, int]] = {}  # user -> (graded?, score, id)
    for sid, uid, status, score in rows:
        graded = status == SubmissionStatus.graded and score is not None
        key = (1 if graded else 0, score if graded and score is not None else 0, sid)
        if uid not in best or key > best[uid]:
            best[uid] = key
    return sorted((k[2] for k in best.values()), reverse=True)


def _in(lab_id: str, course_id: str | None) -> list[Any]:
    """The lab's submissions made in ``course_id`` (None: in every course)."""
    return [S.lab_id == lab_id] if course_id is None else [S.lab_id == lab_id, S.course_id == course_id]


def status_counts(lab_id: str, *, session: Session, course_id: str | None = None) -> dict[str, int]:
    rows = session.execute(select(S.status, func.count()).where(*_in(lab_id, course_id)).group_by(S.status)).all()
    return {status.value: n for status, n in rows}


def review(
    lab_id: str, filters: Filters, *, session: Session, per_page: int = PER_PAGE, course_id: str | None = None
) -> ReviewPage:
    """One page of the lab's submissions in ``course_id`` (newest first) matching ``filters``, with their authors."""
    where = _in(lab_id, course_id)
    if filters.student.strip():
        where.append(User.username_key.contains(filters.student.strip().lower(), autoescape=True))
    if filters.status in STATUSES:
        where.append(S.status == SubmissionStatus(filters.status))
    base = select(S.id).join(User, User.id == S.user_id).where(*where)
    if filters.best:
        light = session.execute(
            select(S.id, S.user_id, S.status, S.score).join(User, User.id == S.user_id).where(*where)
        ).all()
        ids = pick_best([(sid, uid, st, sc) for sid, uid, st, sc in light])
        total = len(ids)
        page = min(max(filters.page, 1), max(1, math.ceil(total / per_page)))
        chosen = ids[(page - 1) * per_page : page * per_page]
        query = select(S, User.username).join(User, User.id == S.user_id).where(S.id.in_(chosen))
    else:
        total = int(session.scalar(select(func.count()).select_from(base.subquery())) or 0)
        page = min(max(filters.page, 1), max(1, math.ceil(total / per_page)))
        query = (
            select(S, User.username)
            .join(User, User.id == S.user_id)
            .where(*where)
            .order_by(S.id.desc())
            .offset((page - 1) * per_page)
            .limit(per_page)
        )
    rows = [(s, name) for s, name in session.execute(query.order_by(S.id.desc())).all()]
    shown = Filters(filters.student, filters.status, filters.best, page)
    return ReviewPage(rows, total, shown, per_page, status_counts(lab_id, session=session, course_id=course_id))


def regradable(lab_id: str, *, session: Session, course_id: str | None = None) -> int:
    """How many of the lab's submissions "Re-grade all" would queue (those not queued or running)."""
    query = select(func.count()).select_from(S).where(*_in(lab_id, course_id), S.status.not_in(IN_FLIGHT))
    return int(session.scalar(query) or 0)


def every_submission(lab_id: str, *, session: Session, course_id: str | None = None) -> list[tuple[Submission, str]]:
    """All of the lab's submissions in ``course_id``, oldest first, with their authors' names (the CSV export)."""
    query = select(S, User.username).join(User, User.id == S.user_id).where(*_in(lab_id, course_id)).order_by(S.id)
    return [(s, name) for s, name in session.execute(query).all()]


def author_name(submission: Submission, *, session: Session) -> str:
    return session.scalar(select(User.username).where(User.id == submission.user_id)) or "?"
