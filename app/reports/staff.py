"""Staff pages for problem reports: the list (open or all), one report, answering, closing, "Re-score now"."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.db import utcnow
from app.deps import RequireStaff, RowId, SessionDep
from app.errors import InvalidInput
from app.reports import service
from app.web.auth import Principal
from app.web.templating import render

router = APIRouter(prefix="/instructor/reports", tags=["instructor"])
NOTICES = {
    "answered": "Answered and closed: the student reads your answer in their reports.",
    "closed": "Closed without an answer.",
    "rescored": "Re-scored now.",
}


@router.get("", response_class=HTMLResponse)
def reports(
    request: Request,
    session: SessionDep,
    user: RequireStaff,
    state: Annotated[str, Query(pattern="^(open|all)$")] = "open",
) -> HTMLResponse:
    views = service.staff_reports(state, session=session, course_id=_course(user))
    return render(request, "instructor/reports.html", {"reports": views, "state": state})


@router.get("/{report_id}", response_class=HTMLResponse)
def report(
    report_id: RowId,
    request: Request,
    session: SessionDep,
    user: RequireStaff,
    done: Annotated[str, Query(max_length=10)] = "",
) -> HTMLResponse:
    view = service.staff_report(report_id, session=session, course_id=_course(user))
    return render(request, "instructor/report.html", {"v": view, "notice": NOTICES.get(done)})


@router.post("/{report_id}/answer", response_class=HTMLResponse)
def answer(
    report_id: RowId,
    request: Request,
    session: SessionDep,
    user: RequireStaff,
    answer: Annotated[str, Form(max_length=20_000)] = "",
    action: Annotated[str, Form(pattern="^(answer|close)$")] = "answer",
) -> Response:
    """Answer and close (``action=answer``), or close without an answer; a mistake re-shows the form (422)."""
    try:
        if action == "close":
            service.close(report_id, user.id, session=session, now=utcnow(), course_id=_course(user))
        else:
            service.answer(report_id, user.id, answer, session=session, now=utcnow(), course_id=_course(user))
    except InvalidInput as exc:
        view = service.staff_report(report_id, session=session, course_id=_course(user))
        context = {"v": view, "error": exc.message, "draft": answer}
        return render(request, "instructor/report.html", context, status_code=422)
    done = "closed" if action == "close" else "answered"
    return RedirectResponse(f"/instructor/reports/{report_id}?done={done}", status_code=303)


@router.post("/{report_id}/rescore")
def rescore(report_id: RowId, session: SessionDep, user: RequireStaff) -> Response:
    service.rescore(report_id, user.id, session=session, now=utcnow(), course_id=_course(user))
    return RedirectResponse(f"/instructor/reports/{report_id}?done=rescored#rescores", status_code=303)


def _course(user: Principal) -> str | None:
    """Staff see reports by their course's members; a site administrator outside any course sees all."""
    return None if user.is_admin and user.course_role is None else user.course_id
