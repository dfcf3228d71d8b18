"""Dashboard and health check (the instructor pages are app.instructors)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse

from app.content import service as content
from app.db import utcnow
from app.deps import OptionalUser, SessionDep
from app.labs.settings import LabSettings
from app.web import dashboard as dashboard_service
from app.web import health
from app.web import help as help_text
from app.web.templating import render

router = APIRouter()


@router.get("/", response_class=HTMLResponse)
def dashboard(request: Request, session: SessionDep, user: OptionalUser) -> HTMLResponse:
    board = None
    if user:
        course = user.course_id if user.in_course else None
        board = dashboard_service.build(user.id, session=session, now=utcnow(), course_id=course)
    return render(request, "home.html", {"counts": content.live_counts(session), "board": board})


@router.get("/help", response_class=HTMLResponse)
def help_page(request: Request) -> HTMLResponse:
    """How grading works and what each status means, for everyone, signed in or not."""
    context = {"submission_statuses": help_text.SUBMISSION_STATUSES, "verdicts": help_text.VERDICTS}
    return render(request, "help.html", context)


@router.get("/api/docs", response_class=HTMLResponse, include_in_schema=False)
def api_docs(request: Request) -> HTMLResponse:
    """Swagger UI from static/vendor (npm swagger-ui-dist): no CDN, so the page works under the CSP."""
    return render(request, "api_docs.html")


@router.get("/healthz")
def healthz(request: Request) -> JSONResponse:
    """200 when the site can do its job, 503 otherwise; a report per component (app.web.health)."""
    max_age = getattr(request.app.state, "lab_settings", None) or LabSettings()
    ok, body = health.report(request.app.state, max_queue_age_s=max_age.health_max_queue_age_s)
    headers = {"Cache-Control": "no-store"} | ({} if ok else {"Retry-After": "5"})
    return JSONResponse(body, status_code=200 if ok else 503, headers=headers)
