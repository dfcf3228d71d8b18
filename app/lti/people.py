"""Who an LMS person is in Ringlab: their identity (platform, ``sub``), account, and place in the course.

Accounts an LMS makes have no password (``NO_PASSWORD``: no hash verifies against it): their owner comes in
from the LMS, or sets one with a reset link like any account. Usernames are made from the person's name,
never trusted as a key: the identity is what finds them again.
"""

from __future__ import annotations

import contextlib
import re
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.courses import members, service
from app.courses.models import CourseRole
from app.errors import Conflict
from app.lti.models import Identity, Platform

NO_PASSWORD = "!lti"  # not a hash: app.accounts.service refuses every password for it
_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_.-]+")


def user_of(platform: Platform, sub: str, *, session: Session) -> User | None:
    return session.scalars(
        select(User)
        .join(Identity, Identity.user_id == User.id)
        .where(Identity.platform_id == platform.id, Identity.sub == sub)
    ).first()


def username_for(display_name: str, email: str, sub: str, *, session: Session) -> str:
    """A free username from the person's name (else e-mail's local part, else ``lms-user``)."""
    base = _NOT_ALLOWED.sub("-", display_name.strip().lower()).strip("-._")
    if len(base) < 3:
        base = _NOT_ALLOWED.sub("-", email.partition("@")[0].lower()).strip("-._")
    if len(base) < 3:
        base = "lms-user"
    base = base[:34]
    taken = set(session.scalars(select(User.username_key).where(User.username_key.like(f"{base}%", escape="\\"))).all())
    if base not in taken:
        return base
    n = 2
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"


def create(platform: Platform, sub: str, display_name: str, email: str, *, session: Session, now: datetime) -> User:
    """A new account for an LMS person, with their identity."""
    name = username_for(display_name, email, sub, session=session)
    user = User(
        username=name, username_key=name.lower(), password_hash=NO_PASSWORD, full_name=display_name[:120] or None,
        email=email[:254] or None, created_at=now,
    )  # fmt: skip
    session.add(user)
    session.flush()
    session.add(Identity(platform_id=platform.id, sub=sub, user_id=user.id, created_at=now))
    session.flush()
    return user


def link(platform: Platform, sub: str, user: User, *, session: Session, now: datetime) -> None:
    """Make ``user`` the account of this LMS person; Conflict if either is already someone else's."""
    other = user_of(platform, sub, session=session)
    if other is not None and other.id != user.id:
        raise Conflict("This LMS account already opens another Ringlab account.")
    mine = session.scalars(
        select(Identity).where(Identity.platform_id == platform.id, Identity.user_id == user.id)
    ).first()
    if mine is not None and mine.sub != sub:
        raise Conflict(f"{user.username} is already linked to another account of this LMS.")
    if other is None:
        session.add(Identity(platform_id=platform.id, sub=sub, user_id=user.id, created_at=now))
        session.flush()


def place(user: User, course_id: str, role: CourseRole | None, *, actor: str, session: Session, now: datetime) -> None:
    """The LMS says who they are in the course: enrol them, or change their role to the LMS's.

    Nothing changes for an LMS role the course has no place for (an observer), for a site administrator,
    or where the change would leave the course without an instructor.
    """
    if role is None or user.is_admin or service.role_in(user.id, course_id, session=session) == role:
        return
    with contextlib.suppress(Conflict):  # the course's only instructor stays one
        members.add(course_id, user, role, actor=actor, session=session, now=now)
