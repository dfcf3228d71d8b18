"""Filing, reading and answering problem reports. A student reads only their own; staff read them all."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.courses.models import Enrollment
from app.courses.service import role_in
from app.errors import Conflict, NotFound
from app.quizzes.models import QuizAttempt
from app.reports import items, rescores, rules
from app.reports.items import Item
from app.reports.models import ProblemReport
from app.reports.rescores import Mine, Summary


@dataclass(frozen=True)
class ReportView:
    """A report with its item as it stands now. ``changed``: the item's content differs from what was
    reported; ``key_changed``: its marking does (quiz questions and exercise parts)."""

    report: ProblemReport
    item: Item
    changed: bool
    key_changed: bool
    student: str = ""
    answered_by: str = ""
    rescored_by: str = ""
    rescores: Summary | None = None
    mine: Mine | None = None


def _question_attempt(question_id: str, attempt_id: int | None, user_id: int, session: Session) -> int:
    """The student's attempt that shows the question, or NotFound: a question is reported from an attempt."""
    attempt = session.get(QuizAttempt, attempt_id) if attempt_id is not None else None
    if attempt is None or attempt.user_id != user_id or question_id not in attempt.question_ids:
        raise NotFound("That question is not in a quiz attempt of yours: report it from the attempt or its result.")
    return attempt.id


def file_report(
    user_id: int, kind: str, item_id: str, text: str, *, attempt_id: int | None = None, session: Session,
    now: datetime,
) -> ProblemReport:  # fmt: skip
    """Store a report on the item as it is now; InvalidInput, NotFound or RateLimited say why not."""
    text = rules.clean_text(text)
    item = items.resolve(kind, item_id, session=session)
    attempt = _question_attempt(item.id, attempt_id, user_id, session) if kind == "question" else None
    since = now - timedelta(seconds=rules.OPEN_LIMIT.window_s)
    recent = session.scalars(
        select(ProblemReport.created_at).where(
            ProblemReport.user_id == user_id, ProblemReport.state == "open", ProblemReport.created_at > since
        )
    )
    rules.check_open_limit(list(recent), now)
    snap = item.snapshot
    report = ProblemReport(
        user_id=user_id, item_kind=kind, item_id=item.id, attempt_id=attempt, content_version=snap.version,
        content_digest=snap.digest, key_digest=snap.key_digest, text=text, state="open", created_at=now,
    )  # fmt: skip
    session.add(report)
    session.flush()
    return report


def _view(report: ProblemReport, session: Session, *, staff: bool, names: dict[int, str] | None = None) -> ReportView:
    item = items.resolve(report.item_kind, report.item_id, session=session)
    snap = item.snapshot
    names = names or {}
    return ReportView(
        report=report, item=item, changed=snap.digest != report.content_digest,
        key_changed=report.key_digest is not None and snap.key_digest != report.key_digest,
        student=names.get(report.user_id, "") if staff else "",
        answered_by=names.get(report.answered_by, "") if report.answered_by else "",
        rescored_by=names.get(report.rescored_by, "") if staff and report.rescored_by else "",
        rescores=rescores.summary(report, session=session) if staff else None,
        mine=None if staff else rescores.mine(report, session=session),
    )  # fmt: skip


def _names(reports: Sequence[ProblemReport], session: Session, *, staff: bool) -> dict[int, str]:
    """Usernames of the staff who answered (and, for staff, of the students and who re-scored)."""
    ids = {r.answered_by for r in reports} | (
        {x for r in reports for x in (r.user_id, r.rescored_by)} if staff else set()
    )
    ids.discard(None)
    if not ids:
        return {}
    return {uid: name for uid, name in session.execute(select(User.id, User.username).where(User.id.in_(ids)))}


def my_reports(user_id: int, *, session: Session) -> list[ReportView]:
    """The student's reports, newest first."""
    rows = session.scalars(
        select(ProblemReport).where(ProblemReport.user_id == user_id).order_by(ProblemReport.id.desc())
    ).all()
    names = _names(rows, session, staff=False)
    return [_view(r, session, staff=False, names=names) for r in rows]


def my_report(report_id: int, user_id: int, *, session: Session) -> ReportView:
    """One of the student's reports; another's is NotFound, as if it did not exist."""
    report = session.get(ProblemReport, report_id)
    if report is None or report.user_id != user_id:
        raise NotFound("There is no report of yours with that number.")
    return _view(report, session, staff=False, names=_names([report], session, staff=False))


def _of_course(query: Any, course_id: str | None) -> Any:
    """Reports by members of ``course_id`` (None: everyone's): staff see their own course's students."""
    if course_id is None:
        return query
    members = select(Enrollment.user_id).where(Enrollment.course_id == course_id)
    return query.where(ProblemReport.user_id.in_(members))


def open_count(*, session: Session, course_id: str | None = None) -> int:
    query = select(func.count()).select_from(ProblemReport).where(ProblemReport.state == "open")
    return int(session.scalar(_of_course(query, course_id)) or 0)


def staff_reports(which: str, *, session: Session, course_id: str | None = None) -> list[ReportView]:
    """Open reports oldest first (the next to answer on top), or all of them newest first."""
    query = _of_course(select(ProblemReport), course_id)
    if which == "open":
        query = query.where(ProblemReport.state == "open").order_by(ProblemReport.id)
    else:
        query = query.order_by(ProblemReport.id.desc())
    rows = session.scalars(query).all()
    names = _names(rows, session, staff=True)
    return [_view(r, session, staff=True, names=names) for r in rows]


def staff_report(report_id: int, *, session: Session, course_id: str | None = None) -> ReportView:
    report = _get(report_id, session, course_id)
    return _view(report, session, staff=True, names=_names([report], session, staff=True))


def _get(report_id: int, session: Session, course_id: str | None = None) -> ProblemReport:
    report = session.get(ProblemReport, report_id)
    if report is None or (course_id is not None and role_in(report.user_id, course_id, session=session) is None):
        raise NotFound(f"There is no report #{report_id}.")
    return report


def answer(
    report_id: int, staff_id: int, text: str, *, session: Session, now: datetime, course_id: str | None = None
) -> ProblemReport:
    """Answer the student and close the report (an answer can be corrected later: it is replaced)."""
    report = _get(report_id, session, course_id)
    report.answer = rules.clean_answer(text)
    report.state, report.answered_by, report.answered_at = "answered", staff_id, now
    return report


def close(
    report_id: int, staff_id: int, *, session: Session, now: datetime, course_id: str | None = None
) -> ProblemReport:
    """Close without an answer (a duplicate, or nothing to say); an answered report stays answered."""
    report = _get(report_id, session, course_id)
    if report.state == "answered":
        raise Conflict("This report is answered already: its answer stays with the student.")
    report.state, report.answered_by, report.answered_at = "closed", staff_id, now
    return report


def rescore(report_id: int, staff_id: int, *, session: Session, now: datetime, course_id: str | None = None) -> int:
    """ "Re-score now" for the reported question or part; see ``rescores.rescore_now``."""
    return rescores.rescore_now(_get(report_id, session, course_id), staff_id, session=session, now=now)
