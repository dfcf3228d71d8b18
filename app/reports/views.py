"""A student's problem reports: sending one (htmx, from under the item), and reading their own with the answers."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.db import utcnow
from app.deps import MAX_ROW_ID, CurrentUser, RowId, SessionDep
from app.errors import DomainError, RateLimited
from app.reports import service
from app.web.templating import render

router = APIRouter(prefix="/reports", tags=["reports"])
CONTROL = "reports/_control.html"


def _partial(request: Request) -> bool:
    return bool(request.headers.get("hx-request")) and not request.headers.get("hx-history-restore-request")


@router.post("", response_class=HTMLResponse)
def file_report(
    request: Request,
    session: SessionDep,
    user: CurrentUser,
    kind: Annotated[str, Form(max_length=16)],
    item: Annotated[str, Form(max_length=170)],
    text: Annotated[str, Form(max_length=20_000)] = "",
    attempt: Annotated[int | None, Form(ge=1, le=MAX_ROW_ID)] = None,
) -> Response:
    """Store the report; htmx gets the control back (a thank-you, or the form with what to change, 4xx)."""
    context = {"kind": kind, "item_id": item, "attempt_id": attempt}
    try:
        report = service.file_report(user.id, kind, item, text, attempt_id=attempt, session=session, now=utcnow())
    except DomainError as exc:
        if not _partial(request):
            raise
        response = render(
            request, CONTROL, {**context, "text": text, "error": exc.message}, status_code=exc.status_code
        )
        if isinstance(exc, RateLimited):
            response.headers["Retry-After"] = str(exc.retry_after)
        return response
    if not _partial(request):
        return RedirectResponse(f"/reports/{report.id}", status_code=303)
    return render(request, CONTROL, {**context, "filed": report}, status_code=201)


@router.get("", response_class=HTMLResponse)
def my_reports(request: Request, session: SessionDep, user: CurrentUser) -> HTMLResponse:
    return render(request, "reports/mine.html", {"reports": service.my_reports(user.id, session=session)})


@router.get("/{report_id}", response_class=HTMLResponse)
def my_report(report_id: RowId, request: Request, session: SessionDep, user: CurrentUser) -> HTMLResponse:
    return render(request, "reports/report.html", {"v": service.my_report(report_id, user.id, session=session)})
