"""Lab pages: list, statement with an editor, live results (htmx polling), history, instructor view."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from sqlalchemy.orm import Session

from app.content.markdown import render as markdown
from app.db import utcnow
from app.deps import CurrentUser, OptionalUser, RequireInstructor, RowId, SessionDep
from app.errors import InvalidInput
from app.labs import catalog, service
from app.labs.models import Submission
from app.labs.settings import LabSettings
from app.web.templating import render, templates
from labs.spec import Lab

router = APIRouter(prefix="/labs", tags=["labs"])
# htmx events, named once: the history table reloads when a result arrives.
EVENT_CHANGED = "labs-submission-changed"
POLL_MS = 300
NO_STORE = {"Cache-Control": "no-store"}


def content_dir(request: Request) -> Path:
    return Path(request.app.state.settings.content_dir)


def limits(request: Request) -> service.Limits:
    settings = getattr(request.app.state, "lab_settings", None) or LabSettings()
    return service.Limits.of(settings)


@lru_cache(maxsize=32)
def _statement_html(text: str) -> str:
    return markdown(text)


def _partial(request: Request) -> bool:
    return bool(request.headers.get("hx-request")) and not request.headers.get("hx-history-restore-request")


def result_view(submission: Submission | None, lab: Lab, *, session: Session) -> dict[str, Any] | None:
    """What the result fragment shows for one submission."""
    if submission is None:
        return None
    checks = service.checks(submission, lab) if submission.done else []
    verdict = submission.verdict if submission.done else None
    return {
        "submission": submission,
        "position": service.position(submission, session=session),
        "verdict": verdict or {},
        "checks": checks,
        "volume": service.volume_table(checks),
        "output": sorted((verdict or {}).get("output", {}).items()),
        "poll_ms": POLL_MS,
    }


def _lab_page(request: Request, lab: Lab, user: Any, current: Submission | None, *, session: Session) -> dict[str, Any]:
    return {
        "lab": lab,
        "statement_html": _statement_html(lab.statement),
        "starter": lab.starter,
        "code": current.code if current is not None else lab.starter,
        "result": result_view(current, lab, session=session),
        "history": service.history(lab.id, user.id, session=session) if user else [],
    }


@router.get("", response_class=HTMLResponse)
def lab_list(request: Request) -> HTMLResponse:
    return render(request, "labs/list.html", {"labs": list(catalog.all_labs(content_dir(request)).values())})


@router.get("/submissions/{submission_id}", response_class=HTMLResponse)
def submission_page(submission_id: RowId, request: Request, session: SessionDep, user: CurrentUser) -> Response:
    submission = service.get_submission(submission_id, user, session=session)
    lab = catalog.get_lab(content_dir(request), submission.lab_id)
    if _partial(request):
        response = render(request, "labs/lab.html", {"result": result_view(submission, lab, session=session),
                                                     "lab": lab}, block="result")  # fmt: skip
        if submission.done:
            response.headers["HX-Trigger"] = EVENT_CHANGED
    else:
        response = render(request, "labs/lab.html", _lab_page(request, lab, user, submission, session=session))
    response.headers.update(NO_STORE)
    return response


@router.post("/submissions/{submission_id}/regrade")
def regrade_one(submission_id: RowId, request: Request, session: SessionDep, user: RequireInstructor) -> Response:
    submission = service.get_submission(submission_id, user, session=session)
    service.regrade([submission.id], submission.lab_id, session=session, now=utcnow())
    return _back(request, f"/labs/{submission.lab_id}/all")


@router.get("/{lab_id}", response_class=HTMLResponse)
def lab_page(lab_id: str, request: Request, session: SessionDep, user: OptionalUser) -> HTMLResponse:
    lab = catalog.get_lab(content_dir(request), lab_id)
    latest = service.history(lab.id, user.id, session=session, limit=1) if user else []
    return render(
        request, "labs/lab.html", _lab_page(request, lab, user, latest[0] if latest else None, session=session)
    )


@router.get("/{lab_id}/starter.py", response_class=PlainTextResponse)
def starter(lab_id: str, request: Request) -> PlainTextResponse:
    lab = catalog.get_lab(content_dir(request), lab_id)
    disposition = f'attachment; filename="{lab.id.replace("-", "_")}.py"'
    return PlainTextResponse(lab.starter, media_type="text/x-python", headers={"Content-Disposition": disposition})


@router.post("/{lab_id}/submissions", response_class=HTMLResponse)
async def submit(
    lab_id: str,
    request: Request,
    session: SessionDep,
    user: CurrentUser,
    code: Annotated[str, Form()] = "",
    upload: Annotated[UploadFile | None, File()] = None,
) -> Response:
    lab = catalog.get_lab(content_dir(request), lab_id)
    if upload is not None and upload.filename:
        raw = await upload.read(limits(request).max_code_bytes + 1)
        try:
            code = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInput(f"{upload.filename} is not UTF-8 text: upload a .py file.", field="upload") from None
    submission = service.submit(lab, user, code, session=session, now=utcnow(), limits=limits(request))
    if not _partial(request):
        return RedirectResponse(f"/labs/submissions/{submission.id}", status_code=303)
    context = {"result": result_view(submission, lab, session=session), "lab": lab}
    response = render(request, "labs/lab.html", context, block="result", status_code=202)
    response.headers["HX-Trigger"] = EVENT_CHANGED
    return response


@router.get("/{lab_id}/history", response_class=HTMLResponse)
def history(lab_id: str, request: Request, session: SessionDep, user: CurrentUser) -> HTMLResponse:
    lab = catalog.get_lab(content_dir(request), lab_id)
    context = {"lab": lab, "history": service.history(lab.id, user.id, session=session)}
    response = render(request, "labs/lab.html", context, block="history")
    response.headers.update(NO_STORE)
    return response


@router.get("/{lab_id}/all", response_class=HTMLResponse)
def all_submissions(lab_id: str, request: Request, session: SessionDep, user: RequireInstructor) -> HTMLResponse:
    lab = catalog.get_lab(content_dir(request), lab_id)
    rows = service.all_submissions(lab.id, session=session)
    context = {"lab": lab, "rows": rows, "workers": service.workers(session=session, now=utcnow())}
    return render(request, "labs/submissions.html", context)


@router.post("/{lab_id}/regrade")
def regrade_all(lab_id: str, request: Request, session: SessionDep, user: RequireInstructor) -> Response:
    lab = catalog.get_lab(content_dir(request), lab_id)
    service.regrade(None, lab.id, session=session, now=utcnow())
    return _back(request, f"/labs/{lab.id}/all")


def _back(request: Request, url: str) -> Response:
    if request.headers.get("hx-request"):
        return Response(status_code=204, headers={"HX-Redirect": url})
    return RedirectResponse(url, status_code=303)


def _lab_for_exercise(request: Request, exercise_id: str) -> Lab | None:
    return catalog.lab_for_exercise(content_dir(request), exercise_id)


def _labs(request: Request) -> list[Lab]:
    return list(catalog.all_labs(content_dir(request)).values())


# The exercise pages link to their labs without the exercises package knowing about labs.
templates.env.globals["lab_for_exercise"] = _lab_for_exercise
templates.env.globals["all_labs"] = _labs
templates.env.globals["LAB_EVENT"] = EVENT_CHANGED
