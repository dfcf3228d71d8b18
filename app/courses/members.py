"""Changing who is in a course, as its instructors (pages) and operators (``ringlab courses``) do it.

Every change to a course's roster, staff or join code is written to the audit log (``AuditEntry``),
with who made it: a username, or "terminal". Functions take a keyword ``session`` and never commit.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.accounts import recovery
from app.accounts.models import User
from app.accounts.ratelimit import Limit, release, take
from app.accounts.service import Issued, find_user, register
from app.content.courses import DEFAULT_COURSE
from app.content.records import Course
from app.courses import service
from app.courses.models import AuditEntry, CourseRole, Enrollment
from app.courses.roster import RosterRow
from app.errors import Conflict, Forbidden, NotFound

TERMINAL = "terminal"  # the actor of changes made with the ringlab command
# Wrong join codes an account may type: a code has 40 bits, but guessing should still be slow.
JOIN_LIMIT = Limit("join_code", 10, 900)


def audit(actor: str, action: str, *, session: Session, now: datetime, **detail: Any) -> None:
    session.add(AuditEntry(at=now, actor=actor[:80], action=action, detail=detail))


def _member(course_id: str, user: User, session: Session) -> CourseRole:
    role = service.role_in(user.id, course_id, session=session)
    if role is None:
        raise NotFound(f"{user.username} is not in this course.")
    return role


def _keep_an_instructor(course_id: str, user: User, new_role: CourseRole | None, session: Session) -> None:
    """A course keeps at least one instructor: its only one cannot be removed or made something else."""
    if (
        new_role == CourseRole.instructor
        or service.role_in(user.id, course_id, session=session) != CourseRole.instructor
    ):
        return
    instructors = session.scalar(
        select(func.count())
        .select_from(Enrollment)
        .where(Enrollment.course_id == course_id, Enrollment.role == CourseRole.instructor)
    )
    if (instructors or 0) <= 1:
        raise Conflict(
            f"{user.username} is this course's only instructor: make someone else instructor first.", field="role"
        )


def account(username: str, *, session: Session) -> User:
    user = find_user(username.strip(), session=session)
    if user is None:
        raise NotFound(
            f"There is no account '{username.strip()}'. Ask them to sign up, or import them with the roster "
            "(a CSV), which makes their account.",
            field="username",
        )
    return user


def add(course_id: str, user: User, role: CourseRole, *, actor: str, session: Session, now: datetime) -> None:
    """Put ``user`` in the course with ``role`` (or change their role there to it)."""
    service.get_course(course_id, session=session)
    before = service.role_in(user.id, course_id, session=session)
    if before == role:
        return
    _keep_an_instructor(course_id, user, role, session)
    service.enroll(user.id, course_id, role, session=session, now=now)
    action = "course.member.add" if before is None else "course.member.role"
    detail = {"course": course_id, "user": user.username, "role": role.value}
    audit(actor, action, session=session, now=now, **detail, **({"was": before.value} if before else {}))


def set_role(course_id: str, user: User, role: CourseRole, *, actor: str, session: Session, now: datetime) -> None:
    """Change the role of a member of the course; NotFound if they are not in it."""
    _member(course_id, user, session)
    add(course_id, user, role, actor=actor, session=session, now=now)


def remove(course_id: str, user: User, *, actor: str, session: Session, now: datetime) -> None:
    """Take ``user`` out of the course (their work stays in it); NotFound if they are not in it."""
    service.get_course(course_id, session=session)
    before = _member(course_id, user, session)
    _keep_an_instructor(course_id, user, None, session)
    service.unenroll(user.id, course_id, session=session)
    detail = {"course": course_id, "user": user.username, "was": before.value}
    audit(actor, "course.member.remove", session=session, now=now, **detail)


def join(user: User, code: str | None, default_code: str | None, *, session: Session, now: datetime) -> str:
    """Enrol ``user`` as a student of the course whose join code is ``code``; the course's id.

    Someone already in that course keeps their role (a TA who types the code stays a TA); a site
    administrator, in every course already, is enrolled in none. A wrong code is Forbidden, and counts
    against the account (``JOIN_LIMIT``: then RateLimited).
    """
    hit = take(JOIN_LIMIT, str(user.id), "wrong join codes from this account", session=session, now=now)
    course_id = service.course_for_code(code, default_code, session=session)
    release(hit, session=session)
    if not user.is_admin and service.role_in(user.id, course_id, session=session) is None:
        service.enroll(user.id, course_id, CourseRole.student, session=session, now=now)
        audit(user.username, "course.join", session=session, now=now, course=course_id, user=user.username)
    return course_id


def new_join_code(course_id: str, *, actor: str, session: Session, now: datetime) -> str:
    """A fresh join code for the course (the last one stops working)."""
    code = service.new_join_code(course_id, session=session)
    audit(actor, "course.join_code.new", session=session, now=now, course=course_id)
    return code


def close_joining(course_id: str, *, actor: str, session: Session, now: datetime) -> None:
    """No join code joins the course any more (the default course: see ``joining``)."""
    service.get_course(course_id, session=session)
    service.clear_join_code(course_id, session=session)
    session.flush()
    audit(actor, "course.join_code.off", session=session, now=now, course=course_id)


@dataclass(frozen=True)
class Joining:
    """How people join a course by themselves, in words."""

    code: str | None  # the course's own join code
    operator_code: str | None  # the default course's: RINGLAB_JOIN_CODE
    open: bool  # the default course with no code at all: anyone who signs up is in it

    @property
    def closed(self) -> bool:
        return not (self.code or self.operator_code or self.open)


def joining(course: Course, default_code: str | None) -> Joining:
    """``default_code`` is RINGLAB_JOIN_CODE (the default course's code)."""
    is_default = course.id == DEFAULT_COURSE
    operator_code = default_code if is_default else None
    return Joining(course.join_code, operator_code, is_default and not course.join_code and not default_code)


@dataclass(frozen=True)
class NewAccount:
    user: User
    reset: Issued  # a one-time link's token: the account has no password until it is used


@dataclass(frozen=True)
class Imported:
    course_id: str
    created: list[NewAccount]  # new accounts, enrolled as students
    enrolled: list[User]  # existing accounts, enrolled as students
    already: list[tuple[User, CourseRole]]  # in the course before: left as they were


def import_roster(
    course_id: str, rows: Sequence[RosterRow], *, by: User | None, actor: str, session: Session, now: datetime
) -> Imported:
    """Enrol everyone of a parsed roster (``app.courses.roster.parse``) as a student.

    Unknown usernames get an account with the row's name and e-mail and no usable password (the hash
    of a secret no one knows), and a one-time link, made ``by`` a staff member (None: the terminal),
    that sets one. People already in the course keep their role.
    """
    service.get_course(course_id, session=session)
    created: list[NewAccount] = []
    enrolled: list[User] = []
    already: list[tuple[User, CourseRole]] = []
    for row in rows:
        user = find_user(row.username, session=session)
        if user is None:
            user = register(row.username, secrets.token_urlsafe(32), session=session)
            user.full_name, user.email = row.name, row.email
            created.append(NewAccount(user, recovery.issue_reset(user, by=by, session=session, now=now)))
        elif (role := service.role_in(user.id, course_id, session=session)) is not None:
            already.append((user, role))
            continue
        else:
            enrolled.append(user)
        service.enroll(user.id, course_id, CourseRole.student, session=session, now=now)
    session.flush()
    audit(
        actor, "course.roster.import", session=session, now=now, course=course_id,
        created=[n.user.username for n in created], enrolled=[u.username for u in enrolled],
    )  # fmt: skip
    return Imported(course_id, created, enrolled, already)


def counts(course_id: str, *, session: Session) -> Counter[CourseRole]:
    """How many people hold each role in the course."""
    rows = session.execute(
        select(Enrollment.role, func.count()).where(Enrollment.course_id == course_id).group_by(Enrollment.role)
    ).all()
    return Counter({role: n for role, n in rows})


def enter(user: User, course_id: str, *, session: Session) -> CourseRole | None:
    """The role ``user`` has in the course they enter (None: a site administrator who is not in it).

    NotFound for no such course; Forbidden for a course they are not in.
    """
    course = service.get_course(course_id, session=session)
    role = service.role_in(user.id, course_id, session=session)
    if role is None and not user.is_admin:
        raise Forbidden(
            f"You are not in the course '{course.title}'. Join it with its join code (ask its instructor for it) "
            "on the Courses page, /courses."
        )
    return role


def member(course_id: str, user_id: int, *, session: Session) -> User:
    """The account ``user_id`` if it is in the course; NotFound, naming no one, if not."""
    found = member_of(course_id, user_id, session=session)
    if found is None:
        raise NotFound("There is no such person in this course.")
    return found[0]


def user_by_id(user_id: int, *, session: Session) -> User:
    user = session.get(User, user_id)
    if user is None:
        raise NotFound("There is no such account.")
    return user


def member_of(course_id: str, user_id: int, *, session: Session) -> tuple[User, CourseRole] | None:
    """The member ``user_id`` of the course and their role; None if there is no such member."""
    row = session.execute(
        select(User, Enrollment.role)
        .join(Enrollment, Enrollment.user_id == User.id)
        .where(Enrollment.course_id == course_id, Enrollment.user_id == user_id)
    ).first()
    return (row[0], row[1]) if row else None


@dataclass(frozen=True)
class CoursePage:
    """What a course's settings page shows its instructors."""

    course: Course
    joining: Joining
    roster: list[tuple[User, CourseRole]]  # staff first, then by username
    counts: Counter[CourseRole]


def course_page(course_id: str, default_code: str | None, *, session: Session) -> CoursePage:
    course = service.get_course(course_id, session=session)
    roster = service.roster(course_id, session=session)
    return CoursePage(course, joining(course, default_code), roster, Counter(role for _, role in roster))
