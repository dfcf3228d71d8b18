"""Home page and health check."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from app.content import service as content
from app.deps import SessionDep
from app.web.templating import render

router = APIRouter()


@router.get("/", response_class=HTMLResponse)
def home(request: Request, session: SessionDep) -> HTMLResponse:
    return render(request, "home.html", {"counts": content.live_counts(session)})


@router.get("/healthz")
def healthz(request: Request) -> JSONResponse:
    """200 when the database answers and content has been loaded, 503 otherwise."""
    checks = {"database": False, "content": False}
    try:
        with request.app.state.sessionmaker() as session:
            session.execute(text("SELECT 1"))
            checks["database"] = True
            checks["content"] = content.last_sync(session) is not None
    except SQLAlchemyError:
        pass
    ok = all(checks.values())
    return JSONResponse({"status": "ok" if ok else "unavailable", **checks}, status_code=200 if ok else 503)
