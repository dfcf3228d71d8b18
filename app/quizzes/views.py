"""Quiz pages."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from app.deps import SessionDep
from app.quizzes import service
from app.web.templating import render

router = APIRouter(prefix="/quizzes", tags=["quizzes"])


@router.get("", response_class=HTMLResponse)
def quiz_list(request: Request, session: SessionDep) -> HTMLResponse:
    return render(request, "quizzes/list.html", {"quizzes": service.list_quizzes(session=session)})


@router.get("/{quiz_id}", response_class=HTMLResponse)
def quiz_intro(quiz_id: str, request: Request, session: SessionDep) -> HTMLResponse:
    return render(request, "quizzes/intro.html", {"summary": service.get_quiz(quiz_id, session=session)})
