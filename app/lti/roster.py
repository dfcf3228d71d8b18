"""Pull an LMS course's roster (NRPS) into its Ringlab course: accounts for people who have not launched yet,
each in the course with the role the LMS gives them, so the gradebook lists every student from day one."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from pylti1p3.names_roles import NamesRolesProvisioningService
from sqlalchemy.orm import Session, sessionmaker

from app.courses import members, service
from app.db import session_scope
from app.errors import Conflict, NotFound
from app.lti import adapter, claims, people
from app.lti.models import ContextLink, Platform

MEMBERSHIP_SCOPE = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"


@dataclass
class Pulled:
    created: list[str] = field(default_factory=list)  # usernames of new accounts
    enrolled: int = 0  # people now in the course with the LMS's role (new or changed)
    skipped: int = 0  # inactive members, and roles the course has no place for


def fetch(context_pk: int, course_id: str, factory: sessionmaker[Session], *, now: datetime) -> list[dict[str, Any]]:
    """Every member of the LMS course (connected to ``course_id``), paging as the platform says (blocking)."""
    with session_scope(factory) as session:
        context = session.get(ContextLink, context_pk)
        if context is None or context.course_id != course_id:
            raise NotFound("That LMS course is not connected to this course.")
        if not context.memberships_url:
            raise Conflict("This LMS course offers no roster to Ringlab (its launches name no membership service).")
        platform = session.get(Platform, context.platform_id)
        assert platform is not None
        registration = adapter.registration(platform, session=session, now=now)
        url = context.memberships_url
    service = NamesRolesProvisioningService(
        adapter.Connector(registration), cast(Any, {"context_memberships_url": url, "service_versions": ["2.0"]})
    )
    return [dict(m) for m in service.get_members()]


def apply(
    context: ContextLink, people_rows: list[dict[str, Any]], *, actor: str, session: Session, now: datetime
) -> Pulled:
    if context.course_id is None:
        raise Conflict("Connect this LMS course to a Ringlab course first (open Ringlab from it once).")
    platform = session.get(Platform, context.platform_id)
    assert platform is not None
    pulled = Pulled()
    for member in people_rows:
        role = claims.course_role([r for r in member.get("roles", []) if isinstance(r, str)])
        sub = str(member.get("user_id") or "")
        if not sub or role is None or member.get("status", "Active") != "Active":
            pulled.skipped += 1
            continue
        user = people.user_of(platform, sub, session=session)
        if user is None:
            name = str(
                member.get("name") or " ".join(filter(None, (member.get("given_name"), member.get("family_name"))))
            )
            user = people.create(platform, sub, name, str(member.get("email") or ""), session=session, now=now)
            pulled.created.append(user.username)
        before = service.role_in(user.id, context.course_id, session=session)
        people.place(user, context.course_id, role, actor=actor, session=session, now=now)
        pulled.enrolled += service.role_in(user.id, context.course_id, session=session) != before
    context.roster_pulled_at = now
    members.audit(
        actor, "lti.roster.pull", session=session, now=now, course=context.course_id, context=context.context_id,
        created=len(pulled.created), enrolled=pulled.enrolled,
    )  # fmt: skip
    return pulled
