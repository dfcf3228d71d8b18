"""Quiz pages: list, intro with history, taking an attempt (htmx), result, instructor statistics."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.db import utcnow
from app.deps import CurrentUser, OptionalUser, RequireStaff, RowId, SessionDep, WriteSessionDep
from app.errors import NotFound
from app.flashcards import missed, personal
from app.quizzes import accommodations, attempts, service
from app.web.auth import Principal
from app.web.templating import render

router = APIRouter(prefix="/quizzes", tags=["quizzes"])
NO_STORE = {"Cache-Control": "no-store"}


def _partial(request: Request) -> bool:
    """An htmx swap (not a history restore, which needs the whole page)."""
    return bool(request.headers.get("hx-request")) and not request.headers.get("hx-history-restore-request")


def _go(request: Request, url: str) -> Response:
    if request.headers.get("hx-request"):
        return Response(status_code=204, headers={"HX-Redirect": url})
    return RedirectResponse(url, status_code=303)


def _fresh(response: Response) -> Response:
    # An open attempt changes with every answer: never show a cached copy (the back button).
    response.headers.update(NO_STORE)
    return response


def _result_url(attempt_id: int) -> str:
    return f"/quizzes/attempts/{attempt_id}/result"


@router.get("", response_class=HTMLResponse)
def quiz_list(request: Request, session: SessionDep, user: OptionalUser) -> HTMLResponse:
    found = service.list_quizzes(session=session, course_id=_course(user), user_id=user.id if user else None)
    return render(request, "quizzes/list.html", {"quizzes": found})


@router.get("/attempts/{attempt_id}", response_class=HTMLResponse)
def attempt_page(
    attempt_id: RowId,
    request: Request,
    session: WriteSessionDep,
    user: CurrentUser,
    q: Annotated[int | None, Query()] = None,
) -> Response:
    now = utcnow()
    attempt = attempts.get_attempt(attempt_id, user.id, session=session, now=now)
    if not attempt.is_open:
        return _go(request, _result_url(attempt_id))
    page = service.attempt_page(attempt, session=session, now=now)
    # Without a question number (a resume), open the first question not yet answered.
    context = {"page": page, "current": page.question(q or page.resume_number), "confirm": False}
    block = "workspace" if _partial(request) else None
    return _fresh(render(request, "quizzes/attempt.html", context, block=block))


@router.post("/attempts/{attempt_id}/answers/{question_id}", response_class=HTMLResponse)
def save_answer(
    attempt_id: RowId,
    question_id: str,
    request: Request,
    session: SessionDep,
    user: CurrentUser,
    choice: Annotated[str, Form(max_length=4)],
    q: Annotated[int, Form()] = 1,
) -> Response:
    now = utcnow()
    try:
        attempt = attempts.save_answer(attempt_id, user.id, question_id, choice, session=session, now=now)
    except attempts.AttemptClosed:
        if request.headers.get("hx-request"):
            # The page is out of date (time is up, or submitted elsewhere): show the result instead.
            return Response(status_code=409, headers={"HX-Redirect": _result_url(attempt_id)})
        raise
    if not _partial(request):
        return RedirectResponse(f"/quizzes/attempts/{attempt_id}?q={min(q + 1, len(attempt.question_ids))}", 303)
    page = service.attempt_page(attempt, session=session, now=now)
    context = {"page": page, "current": page.question(q), "confirm": False, "saved": True}
    return _fresh(render(request, "quizzes/attempt.html", context, block="overview"))


@router.get("/attempts/{attempt_id}/finish", response_class=HTMLResponse)
def confirm_submit(attempt_id: RowId, request: Request, session: WriteSessionDep, user: CurrentUser) -> Response:
    now = utcnow()
    attempt = attempts.get_attempt(attempt_id, user.id, session=session, now=now)
    if not attempt.is_open:
        return _go(request, _result_url(attempt_id))
    page = service.attempt_page(attempt, session=session, now=now)
    context = {"page": page, "current": None, "confirm": True}
    block = "workspace" if _partial(request) else None
    return _fresh(render(request, "quizzes/attempt.html", context, block=block))


@router.post("/attempts/{attempt_id}/submit")
def submit(attempt_id: RowId, request: Request, session: SessionDep, user: CurrentUser) -> Response:
    attempts.submit(attempt_id, user.id, session=session, now=utcnow())
    return _go(request, _result_url(attempt_id))


@router.get("/attempts/{attempt_id}/result", response_class=HTMLResponse)
def result(attempt_id: RowId, request: Request, session: WriteSessionDep, user: CurrentUser) -> Response:
    now = utcnow()
    try:
        attempt = attempts.get_attempt(attempt_id, user.id, session=session, now=now)
    except NotFound:
        if user.is_staff:  # a student's attempt: the instructor's read-only view of it
            return _go(request, f"/instructor/attempts/{attempt_id}")
        raise
    if attempt.is_open:
        return _go(request, f"/quizzes/attempts/{attempt_id}")
    page = service.result_page(attempt, session=session, now=now)
    to_study = missed.pending_cards(user.id, session=session, now=now, attempt_id=attempt_id)
    made = personal.made_for(user.id, [i.question.id for i in page.items if not i.correct], session=session)
    return render(request, "quizzes/result.html", {"page": page, "to_study": to_study, "made": made})


@router.get("/{quiz_id}", response_class=HTMLResponse)
def quiz_intro(quiz_id: str, request: Request, session: SessionDep, user: OptionalUser) -> HTMLResponse:
    course = _course(user)
    summary = service.get_quiz(quiz_id, session=session, course_id=course, user_id=user.id if user else None)
    past = service.history(quiz_id, user.id, session=session, now=utcnow(), course_id=course) if user else []
    limit = summary.quiz.time_limit_minutes
    # The student's own limit: what their time accommodation, if any, makes of the quiz's.
    mine = accommodations.student_limit(limit, user.id, session=session) if user else limit
    context = {"summary": summary, "attempts": past, "now": utcnow(), "time_limit": mine}
    return render(request, "quizzes/intro.html", context)


@router.post("/{quiz_id}/attempts")
def start(quiz_id: str, request: Request, session: SessionDep, user: CurrentUser) -> Response:
    course = user.working_course()
    attempt, _ = attempts.start_attempt(quiz_id, user.id, session=session, now=utcnow(), course_id=course)
    return _go(request, f"/quizzes/attempts/{attempt.id}")


@router.get("/{quiz_id}/statistics", response_class=HTMLResponse)
def statistics(
    quiz_id: str,
    request: Request,
    session: WriteSessionDep,
    user: RequireStaff,
    which: Annotated[str, Query(alias="attempts", pattern="^(first|all)$")] = "first",
) -> HTMLResponse:
    page = service.quiz_statistics(
        quiz_id, session=session, now=utcnow(), all_attempts=which == "all", course_id=user.course_id
    )
    context = {
        "stats": page.stats,
        "questions": page.questions,
        "all_attempts": page.all_attempts,
        "shuffled": page.shuffled,
        "quiz_id": quiz_id,
    }
    return render(request, "quizzes/statistics.html", context)


def _course(user: Principal | None) -> str | None:
    """The course whose terms a page shows: the user's, when they are in it (else each quiz's own)."""
    return user.course_id if user is not None and user.in_course else None
