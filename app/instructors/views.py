"""Instructor pages: home, gradebook (htmx filter and sort), a student's page, a read-only attempt, CSV."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from app.accounts import stats as account_stats
from app.content import service as content
from app.db import utcnow
from app.deps import RequireInstructor, SessionDep, WriteSessionDep
from app.instructors import exports, gradebook, overview, students
from app.labs import catalog
from app.quizzes import service as quizzes
from app.web.templating import render

router = APIRouter(prefix="/instructor", tags=["instructor"])
NO_STORE = {"Cache-Control": "no-store"}


def _partial(request: Request) -> bool:
    return bool(request.headers.get("hx-request")) and not request.headers.get("hx-history-restore-request")


@router.get("", response_class=HTMLResponse)
def home(request: Request, session: SessionDep, user: RequireInstructor) -> HTMLResponse:
    context = {
        "figures": overview.overview(session=session, now=utcnow()),
        "counts": content.live_counts(session),
        "people": account_stats.people(session=session),
        "quizzes": quizzes.list_quizzes(session=session),
        "labs": list(catalog.all_labs(session).values()),
    }
    return render(request, "instructor/index.html", context)


@router.get("/gradebook", response_class=HTMLResponse)
def gradebook_page(
    request: Request,
    session: SessionDep,
    user: RequireInstructor,
    q: Annotated[str, Query(max_length=40)] = "",
    sort: Annotated[str, Query(max_length=120)] = "name",
    desc: bool = False,
    page: Annotated[int, Query(ge=1)] = 1,
) -> HTMLResponse:
    ctx = gradebook.Context(now=utcnow())
    book = gradebook.build(session=session, ctx=ctx, query=q, sort=sort, descending=desc, page=page)
    response = render(
        request, "instructor/gradebook.html", {"book": book}, block="table" if _partial(request) else None
    )
    response.headers.update(NO_STORE)
    return response


@router.get("/gradebook.csv")
def gradebook_csv(request: Request, session: SessionDep, user: RequireInstructor) -> Response:
    ctx = gradebook.Context(now=utcnow())
    book = gradebook.build(session=session, ctx=ctx, per_page=None)
    text = exports.to_csv(exports.gradebook_fields(book.columns), exports.gradebook_records(book))
    return exports.csv_response(text, "gradebook.csv")


@router.get("/students/{user_id}", response_class=HTMLResponse)
def student(user_id: int, request: Request, session: SessionDep, user: RequireInstructor) -> HTMLResponse:
    page = students.student_page(user_id, session=session, now=utcnow())
    return render(request, "instructor/student.html", {"page": page})


@router.get("/attempts/{attempt_id}", response_class=HTMLResponse)
def attempt(attempt_id: int, request: Request, session: WriteSessionDep, user: RequireInstructor) -> HTMLResponse:
    # A writer: an attempt past its deadline is submitted when anyone looks at it (see quizzes).
    page = students.attempt_for_instructor(attempt_id, session=session, now=utcnow())
    return render(request, "quizzes/result.html", {"page": page})
