"""Instructor pages: home, gradebook (htmx filter and sort), a student's page (and their time
accommodation), a read-only attempt, CSV."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.accounts import stats as account_stats
from app.content import service as content
from app.courses import extensions
from app.courses import service as courses
from app.db import utcnow
from app.deps import RequireStaff, RowId, SessionDep, WriteSessionDep
from app.errors import InvalidInput
from app.instructors import exports, gradebook, overview, students
from app.labs import catalog
from app.quizzes import accommodations
from app.quizzes import service as quizzes
from app.reports import service as reports
from app.web.templating import render

router = APIRouter(prefix="/instructor", tags=["instructor"])
NO_STORE = {"Cache-Control": "no-store"}


def _partial(request: Request) -> bool:
    return bool(request.headers.get("hx-request")) and not request.headers.get("hx-history-restore-request")


@router.get("", response_class=HTMLResponse)
def home(request: Request, session: SessionDep, user: RequireStaff) -> HTMLResponse:
    context = {
        "figures": overview.overview(session=session, now=utcnow(), course_id=user.course_id),
        "counts": content.live_counts(session),
        "people": account_stats.people(session=session, course_id=user.course_id),
        "quizzes": quizzes.list_quizzes(session=session, course_id=user.course_id),
        "labs": list(catalog.all_labs(session).values()),
        "open_reports": reports.open_count(session=session, course_id=user.course_id),
    }
    return render(request, "instructor/index.html", context)


@router.get("/gradebook", response_class=HTMLResponse)
def gradebook_page(
    request: Request,
    session: SessionDep,
    user: RequireStaff,
    q: Annotated[str, Query(max_length=40)] = "",
    sort: Annotated[str, Query(max_length=120)] = "name",
    desc: bool = False,
    page: Annotated[int, Query(ge=1)] = 1,
    show: Annotated[list[str], Query(max_length=8)] = [],  # noqa: B006 - FastAPI copies a query default
) -> HTMLResponse:
    ctx = gradebook.Context.for_course(user.course_id, now=utcnow(), session=session)
    book = gradebook.build(session=session, ctx=ctx, query=q, sort=sort, descending=desc, page=page, show=show)
    response = render(
        request, "instructor/gradebook.html", {"book": book}, block="table" if _partial(request) else None
    )
    response.headers.update(NO_STORE)
    return response


@router.get("/gradebook.csv")
def gradebook_csv(request: Request, session: SessionDep, user: RequireStaff) -> Response:
    ctx = gradebook.Context.for_course(user.course_id, now=utcnow(), session=session)
    book = gradebook.build(session=session, ctx=ctx, per_page=None)
    text = exports.to_csv(exports.gradebook_fields(book.columns), exports.gradebook_records(book))
    return exports.csv_response(text, "gradebook.csv")


ACCOMMODATION_NOTICES = {
    "saved": "Saved: the extra time applies to the next timed quiz attempt this student starts.",
    "removed": "Removed: this student's next timed quiz attempts get each quiz's own time limit.",
}


@router.get("/students/{user_id}", response_class=HTMLResponse)
def student(
    user_id: RowId,
    request: Request,
    session: SessionDep,
    user: RequireStaff,
    accommodation: Annotated[str, Query(max_length=10)] = "",
    extension: Annotated[str, Query(max_length=10)] = "",
) -> HTMLResponse:
    page = students.student_page(user_id, session=session, now=utcnow(), course_id=user.course_id)
    notice = ACCOMMODATION_NOTICES.get(accommodation)
    ext_notice = "Saved: the extension is in force." if extension == "saved" else None
    return render(request, "instructor/student.html", {"page": page, "notice": notice, "ext_notice": ext_notice})


@router.post("/students/{user_id}/accommodation", response_class=HTMLResponse)
def grant_accommodation(
    user_id: RowId,
    request: Request,
    session: SessionDep,
    user: RequireStaff,
    time_multiplier: Annotated[float, Form()] = 1.0,
    extra_minutes: Annotated[int, Form()] = 0,
    note: Annotated[str, Form(max_length=accommodations.MAX_NOTE)] = "",
) -> Response:
    """Grant or change the student's extra time on timed quizzes; a mistake re-shows the form (422)."""
    courses.require_student_of(user_id, user.course_id, session=session)
    try:
        accommodations.grant(
            user_id, multiplier=time_multiplier, extra_minutes=extra_minutes, note=note, granted_by=user.id,
            session=session, now=utcnow(),
        )  # fmt: skip
    except InvalidInput as exc:
        page = students.student_page(user_id, session=session, now=utcnow(), course_id=user.course_id)
        form = {"time_multiplier": time_multiplier, "extra_minutes": extra_minutes, "note": note}
        context = {"page": page, "error": exc, "form": form}
        return render(request, "instructor/student.html", context, status_code=422)
    return RedirectResponse(f"/instructor/students/{user_id}?accommodation=saved#accommodation", status_code=303)


@router.post("/students/{user_id}/accommodation/remove")
def remove_accommodation(user_id: RowId, session: SessionDep, user: RequireStaff) -> Response:
    courses.require_student_of(user_id, user.course_id, session=session)
    accommodations.remove(user_id, session=session)
    return RedirectResponse(f"/instructor/students/{user_id}?accommodation=removed#accommodation", status_code=303)


@router.get("/attempts/{attempt_id}", response_class=HTMLResponse)
def attempt(attempt_id: RowId, request: Request, session: WriteSessionDep, user: RequireStaff) -> HTMLResponse:
    # A writer: an attempt past its deadline is submitted when anyone looks at it (see quizzes).
    course = None if user.is_admin and user.course_role is None else user.course_id
    page = students.attempt_for_instructor(attempt_id, session=session, now=utcnow(), course_id=course)
    return render(request, "quizzes/result.html", {"page": page})


@router.post("/students/{user_id}/extensions", response_class=HTMLResponse)
def grant_extension(
    user_id: RowId,
    request: Request,
    session: SessionDep,
    user: RequireStaff,
    assessment: Annotated[str, Form(max_length=100)] = "",
    due: Annotated[str, Form(max_length=40)] = "",
    extra_attempts: Annotated[int, Form(ge=0, le=1000)] = 0,
    reason: Annotated[str, Form(max_length=2000)] = "",
) -> Response:
    """Grant the student a new due date and/or extra attempts on one assessment; a mistake re-shows the form (422)."""
    try:
        due_at = _utc(due)
        extensions.grant(
            user.course_id, user_id, assessment, due_at=due_at, extra_attempts=extra_attempts, reason=reason,
            granted_by=user.id, session=session, now=utcnow(),
        )  # fmt: skip
    except InvalidInput as exc:
        page = students.student_page(user_id, session=session, now=utcnow(), course_id=user.course_id)
        form = {"assessment": assessment, "due": due, "extra_attempts": extra_attempts, "reason": reason}
        context = {"page": page, "ext_error": exc, "ext_form": form}
        return render(request, "instructor/student.html", context, status_code=422)
    return RedirectResponse(f"/instructor/students/{user_id}?extension=saved#extensions", status_code=303)


def _utc(value: str) -> datetime | None:
    """A datetime-local field's value, read as UTC; empty is None."""
    if not value.strip():
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidInput(f"'{value}' is not a date and time (YYYY-MM-DDTHH:MM).", field="due_at") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
