"""The reference solution after the fact: when a student may compare their best submission with it.

``reference:`` in ``lab.yaml`` says when: ``after_full_marks`` (the default: once one of the student's
submissions earns every point), ``after_due`` (once the lab's due date has passed) or ``never``.
Instructors may always compare. The rule is pure (``access``); the reference itself, ``solution.py``,
leaves the server only through ``comparison``, after that rule allowed it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.courses import extensions
from app.courses import policy as course_policy
from app.errors import Forbidden
from app.labs.catalog import PublishedLab as Lab
from app.labs.diff import SideBySide, side_by_side
from app.labs.models import Submission, SubmissionStatus
from app.web.auth import Principal

S = Submission


@dataclass(frozen=True)
class Access:
    allowed: bool
    reason: str  # why not, for the 403; empty when allowed


def access(policy: str, *, due: datetime | None, now: datetime, full_marks: bool, instructor: bool) -> Access:
    """Whether the reference may be shown now, and if not, why (in words a student reads)."""
    if instructor:
        return Access(True, "")
    if policy == "never":
        return Access(False, "This lab does not publish its reference solution: compare notes with your instructor.")
    if policy == "after_due":
        if due is not None and now > due:
            return Access(True, "")
        when = f" ({due.strftime('%d %b %Y, %H:%M')} UTC)" if due is not None else ""
        return Access(False, f"The reference solution for this lab opens after its due date{when}.")
    if full_marks:
        return Access(True, "")
    return Access(
        False, "The reference solution opens once one of your submissions to this lab earns full marks. Keep going!"
    )


def best_submission(lab_id: str, user_id: int, *, session: Session) -> Submission | None:
    """The student's highest-scoring graded submission (the newest of equals); None when none was graded."""
    query = (
        select(S)
        .where(S.lab_id == lab_id, S.user_id == user_id, S.status == SubmissionStatus.graded, S.score.is_not(None))
        .order_by(S.score.desc(), S.id.desc())
        .limit(1)
    )
    return session.scalars(query).first()


def _full_marks(best: Submission | None) -> bool:
    return best is not None and best.score is not None and best.max_score is not None and best.score >= best.max_score


def allowed(lab: Lab, user: Principal, *, session: Session, now: datetime) -> Access:
    """May ``user`` compare with the reference of ``lab`` now?"""
    best = best_submission(lab.id, user.id, session=session)
    # The course may say when instead (its show_answers: at_once means "after full marks", a lab's default).
    own = course_policy.Own(lab.spec.due, None, lab.spec.reference)
    terms = extensions.terms_for(user.course_id, user.id, "lab", lab.id, own, session=session)
    when = {"at_once": "after_full_marks"}.get(terms.show_answers or "", terms.show_answers or lab.spec.reference)
    return access(when, due=terms.course_due_at, now=now, full_marks=_full_marks(best), instructor=user.is_staff)


@dataclass(frozen=True)
class Comparison:
    lab: Lab
    submission: Submission | None  # the student's best; None: the starter code stands in for it
    diff: SideBySide


def comparison(lab: Lab, user: Principal, *, session: Session, now: datetime) -> Comparison:
    """The user's own best submission beside ``solution.py``; Forbidden, with the reason, until allowed."""
    verdict = allowed(lab, user, session=session, now=now)
    if not verdict.allowed:
        raise Forbidden(verdict.reason)
    best = best_submission(lab.id, user.id, session=session)
    mine = best.code if best is not None else lab.starter
    return Comparison(lab, best, side_by_side(mine, lab.files.get("solution.py", "")))
