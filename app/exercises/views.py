"""Exercise pages."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from app.deps import SessionDep
from app.exercises import service
from app.web.templating import render

router = APIRouter(prefix="/exercises", tags=["exercises"])


@router.get("", response_class=HTMLResponse)
def set_list(request: Request, session: SessionDep) -> HTMLResponse:
    return render(request, "exercises/list.html", {"sets": service.list_sets(session=session)})


@router.get("/{set_id}", response_class=HTMLResponse)
def set_page(set_id: str, request: Request, session: SessionDep) -> HTMLResponse:
    ex_set, groups = service.get_set(set_id, session=session)
    return render(request, "exercises/set.html", {"set": ex_set, "groups": groups})
