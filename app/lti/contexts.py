"""LMS courses (contexts) and the Ringlab course each one is; the LMS columns our items have in it."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.content.records import Course
from app.courses import members, service
from app.courses.models import CourseRole
from app.errors import Forbidden
from app.lti.claims import Facts
from app.lti.models import ContextLink, LineItem, Platform


def record(platform: Platform, facts: Facts, *, session: Session) -> ContextLink:
    """The context of a launch, created or refreshed with what the launch says of it (title, service URLs)."""
    row = session.scalars(
        select(ContextLink).where(ContextLink.platform_id == platform.id, ContextLink.context_id == facts.context_id)
    ).first()
    if row is None:
        row = ContextLink(platform_id=platform.id, context_id=facts.context_id, ags_scopes=[])
        session.add(row)
    row.title = facts.context_title[:300] or row.title or facts.context_id
    row.deployment_id = facts.deployment_id
    row.lineitems_url = facts.lineitems_url or row.lineitems_url
    row.memberships_url = facts.memberships_url or row.memberships_url
    if facts.ags_scopes:
        row.ags_scopes = facts.ags_scopes
    session.flush()
    if facts.resource is not None and facts.lineitem_url:
        bind_line_item(row, ":".join(facts.resource), facts.lineitem_url, session=session)
    return row


def bind_line_item(context: ContextLink, resource: str, url: str, *, session: Session) -> LineItem:
    item = session.scalars(
        select(LineItem).where(LineItem.context_pk == context.id, LineItem.resource == resource)
    ).first()
    if item is None:
        item = LineItem(context_pk=context.id, resource=resource)
        session.add(item)
    item.url = url
    session.flush()
    return item


def linkable(user_id: int, is_admin: bool, *, session: Session) -> list[Course]:
    """The courses this person may connect an LMS course to: those they teach (every live one for an admin)."""
    courses = service.live_courses(session=session)
    if is_admin:
        return courses
    return [c for c in courses if service.role_in(user_id, c.id, session=session) == CourseRole.instructor]


def link(
    context: ContextLink, course_id: str, *, user_id: int, is_admin: bool, actor: str, session: Session, now: datetime
) -> None:
    """Connect the LMS course to ``course_id``; only an instructor of that course (or an admin) may."""
    if course_id not in {c.id for c in linkable(user_id, is_admin, session=session)}:
        raise Forbidden("You can connect an LMS course only to a Ringlab course you teach.")
    context.course_id = course_id
    context.linked_by_id = user_id
    session.flush()
    members.audit(
        actor, "lti.context.link", session=session, now=now, course=course_id, context=context.context_id,
        title=context.title,
    )  # fmt: skip
