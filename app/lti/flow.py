"""The steps of a launch after it is validated (the routes in ``app.lti.views`` are thin over these).

A validated launch is kept by the library under its launch id; the browser that made it holds that id in a
cookie (``LAUNCH_COOKIE``), so the steps that follow (choose an account, connect the course, pick items to
link) can be taken only in the browser the LMS launched, never by someone who learned the id.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.courses.models import STAFF
from app.errors import Conflict, DomainError, Forbidden, NotFound
from app.lti import adapter, claims, contexts, people
from app.lti.models import ContextLink, Platform

LAUNCH_COOKIE = "ringlab_lti_launch"
ACTOR = "lms"  # who the audit log says made a change a launch brought (enrolment, role)


class LaunchRefused(DomainError):
    status_code = 400


@dataclass(frozen=True)
class Launched:
    launch_id: str
    body: dict[str, Any]
    facts: claims.Facts
    platform: Platform
    context: ContextLink


def _platform(body: dict[str, Any], *, session: Session) -> Platform:
    aud = body.get("aud")
    client_id = aud[0] if isinstance(aud, list) and aud else aud
    platform = session.scalars(
        select(Platform).where(Platform.issuer == body.get("iss"), Platform.client_id == client_id)
    ).first()
    if platform is None:
        raise LaunchRefused("This LMS is no longer registered with Ringlab.")
    return platform


def launched(launch_id: str, *, session: Session, now: datetime) -> Launched:
    """A launch validated earlier in this flow; NotFound once it has expired."""
    try:
        message = adapter.restored(launch_id, session=session, now=now)
    except Exception as exc:
        raise NotFound("This launch has expired or is unknown. Open Ringlab from your LMS again.") from exc
    body = dict(message.get_launch_data())
    facts = claims.facts(body)
    platform = _platform(body, session=session)
    context = session.scalars(  # recorded when the launch came (a GET step must not write)
        select(ContextLink).where(ContextLink.platform_id == platform.id, ContextLink.context_id == facts.context_id)
    ).first()
    if context is None:
        raise NotFound("This launch's LMS course is unknown. Open Ringlab from your LMS again.")
    return Launched(launch_id, body, facts, platform, context)


def accepted(message: adapter.Launch, *, session: Session) -> Launched:
    """What a just-validated launch is; the LMS course is recorded (title, service URLs, line item)."""
    body = dict(message.get_launch_data())
    facts = claims.facts(body)
    if not facts.context_id:
        raise LaunchRefused("The launch names no LMS course (context): Ringlab is opened from inside a course.")
    if not facts.sub:
        raise LaunchRefused("The launch names no user: Ringlab does not take anonymous launches.")
    platform = _platform(body, session=session)
    return Launched(message.get_launch_id(), body, facts, platform, contexts.record(platform, facts, session=session))


def is_staff(facts: claims.Facts) -> bool:
    return facts.role in STAFF


@dataclass(frozen=True)
class Next:
    """Where the browser goes: a page of this flow, or the launched resource (``sign_in``: as that user)."""

    location: str
    sign_in: User | None = None
    course_id: str | None = None


def route(launch: Launched, user: User | None, *, session: Session, now: datetime) -> Next:
    """The next step of a launch for ``user`` (None: the LMS person has no Ringlab account yet)."""
    if user is None:
        return Next(f"/lti/welcome/{launch.launch_id}")
    course_id = launch.context.course_id
    if course_id is None:
        if is_staff(launch.facts) or user.is_admin:
            return Next(f"/lti/course/{launch.launch_id}", sign_in=user)
        raise Conflict(
            f"The LMS course '{launch.context.title}' is not connected to a Ringlab course yet. "
            "Your instructor connects it by opening Ringlab from the LMS once; try again after that."
        )
    people.place(user, course_id, launch.facts.role, actor=ACTOR, session=session, now=now)
    if launch.facts.is_deep_linking:
        if not (is_staff(launch.facts) or user.is_admin):
            raise Forbidden("Only the course's staff choose what Ringlab adds to the LMS.")
        return Next(f"/lti/deep-link/{launch.launch_id}?course={course_id}", sign_in=user, course_id=course_id)
    if launch.facts.resource is not None:
        kind, item = launch.facts.resource
        return Next(claims.resource_path(kind, item, course_id), sign_in=user, course_id=course_id)
    home = "/instructor" if is_staff(launch.facts) else "/"
    return Next(f"{home}?course={course_id}", sign_in=user, course_id=course_id)


def create_account(launch: Launched, *, session: Session, now: datetime) -> User:
    """The LMS person's new Ringlab account (or the one they have, if they made it meanwhile)."""
    existing = people.user_of(launch.platform, launch.facts.sub, session=session)
    if existing is not None:
        return existing
    f = launch.facts
    return people.create(launch.platform, f.sub, f.display_name, f.email, session=session, now=now)


def link_account(launch: Launched, user: User, *, session: Session, now: datetime) -> User:
    people.link(launch.platform, launch.facts.sub, user, session=session, now=now)
    return user
