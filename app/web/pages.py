"""Dashboard, instructor overview and health check."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse

from app.accounts import stats as account_stats
from app.content import service as content
from app.db import utcnow
from app.deps import OptionalUser, RequireInstructor, SessionDep
from app.flashcards import study as flashcards
from app.labs import service as labs
from app.labs.settings import LabSettings
from app.quizzes import service as quizzes
from app.web import health
from app.web.templating import render

router = APIRouter()


@router.get("/", response_class=HTMLResponse)
def dashboard(request: Request, session: SessionDep, user: OptionalUser) -> HTMLResponse:
    waiting = None
    if user:
        # What is waiting for this student today.
        now = utcnow()
        waiting = {
            "cards_due": flashcards.cards_due(user.id, session=session, now=now),
            "quizzes_open": quizzes.quizzes_open(user.id, session=session, now=now),
            "labs_pending": labs.in_flight(user.id, session=session),
        }
    return render(request, "home.html", {"counts": content.live_counts(session), "waiting": waiting})


@router.get("/instructor", response_class=HTMLResponse)
def instructor(request: Request, session: SessionDep, user: RequireInstructor) -> HTMLResponse:
    context = {"counts": content.live_counts(session), "people": account_stats.people(session=session)}
    return render(request, "instructor/index.html", context)


@router.get("/healthz")
def healthz(request: Request) -> JSONResponse:
    """200 when the site can do its job, 503 otherwise; a report per component (app.web.health)."""
    max_age = getattr(request.app.state, "lab_settings", None) or LabSettings()
    ok, body = health.report(request.app.state, max_queue_age_s=max_age.health_max_queue_age_s)
    return JSONResponse(body, status_code=200 if ok else 503, headers={"Cache-Control": "no-store"})
