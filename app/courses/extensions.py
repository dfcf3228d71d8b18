"""Extensions: staff give one student a later due date or more attempts on one assessment.

Every grant is kept (who, when, what, why); the latest grant for an assessment is the one in force.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.content.records import Course, Lab, Quiz
from app.courses import policy
from app.courses.models import Extension
from app.courses.service import get_course, require_student_of
from app.errors import Conflict, DomainError, Forbidden, InvalidInput

MAX_REASON = 500
MAX_EXTRA_ATTEMPTS = 20
_KINDS = ("quiz", "lab")  # what has a due date and attempts to extend


def _item(kind: str, item_id: str, session: Session) -> Quiz | Lab | None:
    return session.get(Quiz, item_id) if kind == "quiz" else session.get(Lab, item_id) if kind == "lab" else None


@dataclass(frozen=True)
class GrantRecord:
    id: int
    assessment: str
    title: str
    due_at: datetime | None
    extra_attempts: int
    reason: str
    granted_by: str | None
    granted_at: datetime
    in_force: bool  # the latest grant for its assessment


def split(assessment: str) -> tuple[str, str]:
    kind, _, item_id = assessment.partition(":")
    if kind not in _KINDS or not item_id:
        raise InvalidInput(f"Unknown assessment '{assessment}': use quiz:<id> or lab:<id>.", field="assessment")
    return kind, item_id


def grant(
    course_id: str, user_id: int, assessment: str, *, due_at: datetime | None, extra_attempts: int, reason: str,
    granted_by: int | None, session: Session, now: datetime,
) -> Extension:  # fmt: skip
    """Record a grant. InvalidInput, changing nothing, if it names no assessment of the course or grants nothing."""
    course = get_course(course_id, session=session)
    require_student_of(user_id, course_id, session=session)
    kind, item_id = split(assessment)
    row = _item(kind, item_id, session)
    if row is None or row.retired_at is not None or policy.assignment(course.assignments, kind, item_id) is None:
        raise InvalidInput(f"This course has no {kind} '{item_id}'.", field="assessment")
    reason = reason.strip()
    if not reason:
        raise InvalidInput("Give a reason: it is kept with the grant.", field="reason")
    if len(reason) > MAX_REASON:
        raise InvalidInput(f"Keep the reason under {MAX_REASON} characters.", field="reason")
    if not 0 <= extra_attempts <= MAX_EXTRA_ATTEMPTS:
        raise InvalidInput(f"Extra attempts must be 0 to {MAX_EXTRA_ATTEMPTS}.", field="extra_attempts")
    if due_at is None and extra_attempts == 0:
        raise InvalidInput("Grant a new due date, extra attempts, or both.", field="due_at")
    ext = Extension(
        course_id=course_id, user_id=user_id, assessment=assessment, due_at=due_at, extra_attempts=extra_attempts,
        reason=reason, granted_by_id=granted_by, granted_at=now,
    )  # fmt: skip
    session.add(ext)
    session.flush()
    return ext


def in_force(
    course_id: str, assessments: Collection[str] | None = None, user_ids: Collection[int] | None = None,
    *, session: Session,
) -> dict[tuple[int, str], policy.Grant]:  # fmt: skip
    """The grant in force per (student, assessment) in the course: the latest of each."""
    latest = (
        select(func.max(Extension.id))
        .where(Extension.course_id == course_id)
        .group_by(Extension.user_id, Extension.assessment)
    )
    if assessments is not None:
        latest = latest.where(Extension.assessment.in_(list(assessments)))
    if user_ids is not None:
        latest = latest.where(Extension.user_id.in_(list(user_ids)))
    rows = session.execute(
        select(Extension.user_id, Extension.assessment, Extension.due_at, Extension.extra_attempts).where(
            Extension.id.in_(latest)
        )
    ).all()
    return {(uid, a): policy.Grant(due, extra) for uid, a, due, extra in rows}


def terms_for(
    course_id: str, user_id: int, kind: str, item_id: str, own: policy.Own, *, session: Session
) -> policy.Terms:
    """The terms of one assessment for one student in one course."""
    assignments = session.scalar(select(Course.assignments).where(Course.id == course_id))
    grant_ = in_force(course_id, [f"{kind}:{item_id}"], [user_id], session=session).get((user_id, f"{kind}:{item_id}"))
    return policy.terms(policy.assignment(assignments, kind, item_id), own, grant_)


def assigned(course_id: str, kind: str, *, session: Session) -> set[str] | None:
    """The ids of ``kind`` the course assigns; None: every one (a course without a file)."""
    return policy.assigned_ids(session.scalar(select(Course.assignments).where(Course.id == course_id)), kind)


def course_due(
    course_id: str, kind: str, item_id: str, own_due: datetime | None, *, session: Session
) -> datetime | None:
    """The course's due date for an item (what a student without an extension has)."""
    assignments = session.scalar(select(Course.assignments).where(Course.id == course_id))
    return policy.terms(policy.assignment(assignments, kind, item_id), policy.Own(own_due)).course_due_at


_NOUNS = {"quiz": "attempt", "lab": "submission"}


def admit(
    course_id: str, user_id: int, kind: str, item_id: str, own: policy.Own, *, used: Callable[[], int],
    session: Session, now: datetime, closed: type[DomainError] = Conflict, used_up: type[DomainError] = Conflict,
) -> policy.Terms:  # fmt: skip
    """The terms of one more quiz attempt or lab submission, if the course takes it; else why not, as an error.

    Forbidden when the course does not assign the item, ``closed`` past a ``late: refuse`` due date, and
    ``used_up`` when ``used()`` (the student's count in the course) has reached the limit.
    """
    terms = terms_for(course_id, user_id, kind, item_id, own, session=session)
    noun = _NOUNS[kind]
    if not terms.assigned:
        raise Forbidden(f"The {kind} '{item_id}' is not part of this course.")
    if terms.closed(now):
        assert terms.due_at is not None
        raise closed(f"This {kind} closed at {terms.due_at:%Y-%m-%d %H:%M} UTC; it takes no more {noun}s.")
    if terms.max_attempts is not None and used() >= terms.max_attempts:
        raise used_up(f"This {kind} allows {terms.max_attempts} {noun}(s) and you have used them all.")
    return terms


def history(course_id: str, user_id: int, *, session: Session) -> list[GrantRecord]:
    """Every grant to the student in the course, newest first."""
    granter = User.__table__.alias("granter")
    rows = session.execute(
        select(Extension, granter.c.username)
        .outerjoin(granter, granter.c.id == Extension.granted_by_id)
        .where(Extension.course_id == course_id, Extension.user_id == user_id)
        .order_by(Extension.id.desc())
    ).all()
    titles = _titles({e.assessment for e, _ in rows}, session)
    seen: set[str] = set()
    out = []
    for ext, by in rows:
        out.append(
            GrantRecord(
                ext.id,
                ext.assessment,
                titles.get(ext.assessment, ext.assessment),
                ext.due_at,
                ext.extra_attempts,
                ext.reason,
                by,
                ext.granted_at,
                ext.assessment not in seen,
            )
        )
        seen.add(ext.assessment)
    return out


def _titles(assessments: Collection[str], session: Session) -> dict[str, str]:
    out = {}
    for assessment in assessments:
        kind, _, item_id = assessment.partition(":")
        row = _item(kind, item_id, session)
        title = row.title if row is not None else None
        if title:
            out[assessment] = title
    return out
