"""Staff's LMS page: the LMS courses connected to this course, what each gradebook column was sent and
what failed (with the reason), "Resend", and pulling the LMS roster."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy import case, func, select
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from app.db import utcnow
from app.deps import RequireStaff, SessionDep, writing
from app.errors import NotFound
from app.lti import roster, sender
from app.lti.models import ContextLink, LineItem, Outbox, OutboxStatus, Platform
from app.web.templating import render

router = APIRouter(prefix="/instructor/lti", tags=["instructors"])


@dataclass(frozen=True)
class Column:
    context: ContextLink
    resource: str
    label: str
    url: str | None
    sent: int
    owed: int
    skipped: int
    failing: int  # owed, with failed tries since their last success
    last_error: str | None
    last_sent_at: datetime | None


def _contexts(course_id: str, session: Session) -> list[tuple[ContextLink, Platform]]:
    rows = session.execute(
        select(ContextLink, Platform)
        .join(Platform, Platform.id == ContextLink.platform_id)
        .where(ContextLink.course_id == course_id)
        .order_by(ContextLink.title)
    )
    return [(c, p) for c, p in rows]


def columns(context: ContextLink, session: Session) -> list[Column]:
    Row = Outbox
    counts = session.execute(
        select(
            Row.resource,
            func.sum(case((Row.status == OutboxStatus.sent, 1), else_=0)),
            func.sum(case((Row.status == OutboxStatus.pending, 1), else_=0)),
            func.sum(case((Row.status == OutboxStatus.skipped, 1), else_=0)),
            func.sum(case(((Row.status == OutboxStatus.pending) & (Row.tries > 0), 1), else_=0)),
            func.max(Row.sent_at),
        )
        .where(Row.context_pk == context.id)
        .group_by(Row.resource)
    ).all()
    errors = dict(
        session.execute(
            select(Row.resource, Row.last_error)
            .where(Row.context_pk == context.id, Row.last_error.is_not(None))
            .order_by(Row.changed_at)
        ).all()
    )
    items = {i.resource: i for i in session.scalars(select(LineItem).where(LineItem.context_pk == context.id))}
    found = {}
    for resource, sent, owed, skipped, failing, last in counts:
        item = items.get(resource)
        found[resource] = Column(
            context, resource, item.label if item and item.label else resource, item.url if item else None,
            int(sent or 0), int(owed or 0), int(skipped or 0), int(failing or 0), errors.get(resource), last,
        )  # fmt: skip
    for resource, item in items.items():
        found.setdefault(resource, Column(context, resource, item.label or resource, item.url, 0, 0, 0, 0, None, None))
    return [found[k] for k in sorted(found)]


def _context(context_pk: int, course_id: str, session: Session) -> ContextLink:
    context = session.get(ContextLink, context_pk)
    if context is None or context.course_id != course_id:
        raise NotFound("That LMS course is not connected to this course.")
    return context


@router.get("", response_class=HTMLResponse)
def page(request: Request, session: SessionDep, user: RequireStaff) -> Response:
    linked = [(c, p, columns(c, session)) for c, p in _contexts(user.course_id, session)]
    notice = request.query_params.get("notice")
    return render(request, "instructor/lti.html", {"linked": linked, "notice": notice})


@router.post("/resend")
def resend(
    session: SessionDep, user: RequireStaff,
    context_pk: Annotated[int, Form()], resource: Annotated[str, Form(max_length=120)],
) -> Response:  # fmt: skip
    context = _context(context_pk, user.course_id, session)
    n = sender.resend(context.id, resource, session=session, now=utcnow())
    return RedirectResponse(f"/instructor/lti?course={user.course_id}&notice=resend-{n}", status_code=303)


@router.post("/roster")
async def pull_roster(request: Request, user: RequireStaff, context_pk: Annotated[int, Form()]) -> Response:
    """Fetch the LMS roster (no transaction open while the LMS answers), then enrol it in one."""
    now = utcnow()
    members = await run_in_threadpool(roster.fetch, context_pk, user.course_id, request.app.state.sessionmaker, now=now)
    async with writing(request) as session:
        pulled = await run_in_threadpool(
            lambda: roster.apply(_context(context_pk, user.course_id, session), members, actor=user.username,
                                 session=session, now=now)
        )  # fmt: skip
    notice = f"roster-{len(pulled.created)}-{pulled.enrolled}"
    return RedirectResponse(f"/instructor/lti?course={user.course_id}&notice={notice}", status_code=303)
