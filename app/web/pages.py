"""Dashboard and health check (the instructor pages are app.instructors)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from app.content import service as content
from app.db import utcnow
from app.deps import OptionalUser, SessionDep
from app.web import dashboard as dashboard_service
from app.web.templating import render

router = APIRouter()


@router.get("/", response_class=HTMLResponse)
def dashboard(request: Request, session: SessionDep, user: OptionalUser) -> HTMLResponse:
    board = None
    if user:
        content_dir = Path(request.app.state.settings.content_dir)
        board = dashboard_service.build(user.id, session=session, now=utcnow(), content_dir=content_dir)
    return render(request, "home.html", {"counts": content.live_counts(session), "board": board})


@router.get("/api/docs", response_class=HTMLResponse, include_in_schema=False)
def api_docs(request: Request) -> HTMLResponse:
    """Swagger UI from static/vendor (npm swagger-ui-dist): no CDN, so the page works under the CSP."""
    return render(request, "api_docs.html")


@router.get("/healthz")
def healthz(request: Request) -> JSONResponse:
    """200 when the database answers and content has been loaded, 503 otherwise."""
    checks = {"database": False, "content": False}
    try:
        with request.app.state.readers() as session:
            session.execute(text("SELECT 1"))
            checks["database"] = True
            checks["content"] = content.last_sync(session) is not None
    except SQLAlchemyError:
        pass
    ok = all(checks.values())
    return JSONResponse({"status": "ok" if ok else "unavailable", **checks}, status_code=200 if ok else 503)
