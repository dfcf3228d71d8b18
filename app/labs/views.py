"""Lab pages: list, statement with an editor, live results (htmx polling), history, instructor view."""

from __future__ import annotations

import asyncio
import re
from functools import lru_cache
from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Query, Request, UploadFile
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from app.content.markdown import render as markdown
from app.courses import extensions
from app.courses import policy as course_policy
from app.db import session_scope, utcnow
from app.deps import CurrentUser, OptionalUser, RequireStaff, RowId, SessionDep
from app.errors import DomainError, Forbidden, InvalidInput, NotFound
from app.instructors import exports
from app.labs import catalog, charts, hints, listing, outcome, queue_view, reference, review, service, watch, wire
from app.labs.catalog import PublishedLab as Lab
from app.labs.models import Submission
from app.labs.settings import LabSettings
from app.web.auth import Principal
from app.web.templating import render, templates

router = APIRouter(prefix="/labs", tags=["labs"])
# htmx events, named once: the history table reloads when a result arrives.
EVENT_CHANGED = "labs-submission-changed"
NO_STORE = {"Cache-Control": "no-store"}
PAUSE_MS = 250  # between one held poll's answer and the next: a held poll is answered when the status changes


def _settings(request: Request) -> LabSettings:
    return getattr(request.app.state, "lab_settings", None) or LabSettings()


def limits(request: Request) -> service.Limits:
    return service.Limits.of(_settings(request))


@lru_cache(maxsize=32)
def _statement_html(text: str) -> str:
    return markdown(text)


def _partial(request: Request) -> bool:
    return bool(request.headers.get("hx-request")) and not request.headers.get("hx-history-restore-request")


def result_view(
    submission: Submission | None,
    lab: Lab,
    *,
    session: Session,
    said: str | None = None,
    viewer: Principal | None = None,
) -> dict[str, Any] | None:
    """What the result fragment shows for one submission.

    ``said`` is the queue line the page last showed (the poll sends it back): the line is read out
    when it is news, a queued job that waits and whose line changed, never on every poll. None: a
    full page, where nothing is news. ``viewer``: who looks; its author gets the hints they earned and
    the link to the reference once allowed (an instructor reviewing someone's work gets neither)."""
    if submission is None:
        return None
    own = viewer is not None and viewer.id == submission.user_id and submission.done
    checks = service.checks(submission, lab) if submission.done else []
    verdict = submission.verdict if submission.done else None
    queued = service.estimate(submission, session=session, now=utcnow())
    return {
        "submission": submission,
        "position": queued.position if queued else None,
        "queue": queued,
        "announce_queue": queued is not None and queued.waits and said is not None and said != queued.text,
        "verdict": verdict or {},
        "checks": checks,
        "volume": service.volume_table(checks),
        "wire": wire.comparison(verdict or {}),
        "charts": charts.check_charts(checks),
        "output": sorted((verdict or {}).get("output", {}).items()),
        # The fragment asks again after this pause, held up to hold_s until the status changes (a long poll).
        "poll_ms": PAUSE_MS,
        "hold_s": queue_view.long_poll_s(queued),
        # A GPU-only lab's queued job says what it waits for, and whether any worker could take it.
        "gpu_waiting": not submission.done and service.gpu_waiting(lab, session=session, now=utcnow()),
        "hints": hints.states(lab, submission.user_id, session=session) if own else {},
        "reference_open": own and viewer is not None and _reference_open(lab, viewer, session=session),
    }


def _reference_open(lab: Lab, user: Principal, *, session: Session) -> bool:
    return reference.allowed(lab, user, session=session, now=utcnow()).allowed


_GRADER_HEADING = re.compile(r"(<h2[^>]*>\s*What the grader does\s*</h2>)", re.IGNORECASE)


def _with_reference_link(html: str, lab: Lab) -> str:
    """The statement with a link to the reference comparison under its "What the grader does" heading."""
    link = (
        f'<p class="lab-reference-link"><a href="/labs/{lab.id}/reference">Compare your best submission with '
        "the reference solution</a>, side by side.</p>"
    )
    return _GRADER_HEADING.sub(lambda m: m.group(1) + link, html, count=1)


def _lab_page(request: Request, lab: Lab, user: Any, current: Submission | None, *, session: Session) -> dict[str, Any]:
    reference_open = bool(user) and _reference_open(lab, user, session=session)
    statement = _statement_html(lab.statement)
    return {
        "lab": lab,
        "statement_html": _with_reference_link(statement, lab) if reference_open else statement,
        "starter": lab.starter,
        "code": current.code if current is not None else lab.starter,
        "result": result_view(current, lab, session=session, viewer=user),
        "reference_open": reference_open,
        "history": service.history(lab.id, user.id, session=session) if user else [],
        "gpu_waiting": service.gpu_waiting(lab, session=session, now=utcnow()),
        "queue_long": _queue_long(request, lab, session=session) if user else None,
        "terms": _terms(lab, user, session=session),
    }


def _terms(lab: Lab, user: Principal | None, *, session: Session) -> course_policy.Terms:
    """The lab's terms as the page shows them: the user's course's, with their extension; else the lab's own."""
    own = course_policy.Own(lab.spec.due)
    if user is None or not user.in_course:
        return course_policy.terms({}, own)
    return extensions.terms_for(user.course_id, user.id, "lab", lab.id, own, session=session)


def _queue_long(request: Request, lab: Lab, *, session: Session) -> queue_view.Estimate | None:
    """The wait a submission made now would have, when it is long enough to say so before submitting."""
    ahead = service.estimate_new(lab, session=session, now=utcnow())
    return ahead if queue_view.is_long(ahead, _settings(request).lab_queue_long_s) else None


@router.get("", response_class=HTMLResponse)
def lab_list(request: Request, session: SessionDep, user: OptionalUser) -> HTMLResponse:
    assigned = extensions.assigned(user.course_id, "lab", session=session) if user and user.in_course else None
    labs = listing.lab_path(user.id if user else None, session=session, assigned=assigned)
    waiting = service.gpu_waiting_labs([row.lab for row in labs.rows], session=session, now=utcnow())
    return render(request, "labs/list.html", {"path": labs, "gpu_waiting": waiting})


@router.get("/submissions/{submission_id}", response_class=HTMLResponse)
async def submission_page(
    submission_id: RowId,
    request: Request,
    session: SessionDep,
    user: CurrentUser,
    said: Annotated[str, Query(max_length=200)] = "",
    wait: Annotated[float, Query(ge=0, le=watch.MAX_WAIT_S)] = 0,
    seen: Annotated[watch.Seen | None, Query()] = None,
) -> Response:
    # The result's fragment asks again at once with ?wait= and the status it shows (seen=): held until the
    # status changes (see app.labs.watch). Without seen, the hold first reads the status in a session of its
    # own, so the request's own session holds no connection while it waits.
    held = bool(wait) and _partial(request)
    began = asyncio.get_running_loop().time()
    status: str | None = seen
    if held and status is None:
        status = await run_in_threadpool(_waiting_status, request, submission_id, user)
    if held and status is not None:
        await request.app.state.watch.until_news(submission_id, status, wait)
    try:
        return await run_in_threadpool(_submission_page, submission_id, request, session, user, said)
    except DomainError:
        if held and seen:
            await watch.sit_out(began, wait)
        raise


def _waiting_status(request: Request, submission_id: int, user: Principal) -> str | None:
    with session_scope(request.app.state.readers) as session:
        return service.waiting_status(submission_id, user, session=session)


def _submission_page(submission_id: int, request: Request, session: Session, user: Principal, said: str) -> Response:
    submission = service.get_submission(submission_id, user, session=session)
    lab = catalog.submitted_lab(session, submission.lab_id, submission.lab_version)
    # An instructor looking at a student's work: named as theirs, read-only, no Submit.
    author = review.author_name(submission, session=session) if submission.user_id != user.id else None
    result = result_view(submission, lab, session=session, said=said if _partial(request) else None, viewer=user)
    if author is not None and not _partial(request):
        context = {"lab": lab, "submission": submission, "author": author, "result": result}
        response = render(request, "labs/review_submission.html", context)
    elif _partial(request):
        # Polling asks for this fragment until the verdict is in, so a finished one is news: it is read out.
        context = {"result": result, "lab": lab, "author": author, "announce": submission.done}
        response = render(request, "labs/lab.html", context, block="result")
        if submission.done:
            response.headers["HX-Trigger"] = EVENT_CHANGED
    else:
        response = render(request, "labs/lab.html", _lab_page(request, lab, user, submission, session=session))
    response.headers.update(NO_STORE)
    return response


@router.post("/submissions/{submission_id}/regrade")
def regrade_one(submission_id: RowId, request: Request, session: SessionDep, user: RequireStaff) -> Response:
    submission = service.get_submission(submission_id, user, session=session)
    service.regrade([submission.id], submission.lab_id, session=session, now=utcnow())
    return _back(request, f"/labs/{submission.lab_id}/all")


@router.get("/{lab_id}", response_class=HTMLResponse)
def lab_page(lab_id: str, request: Request, session: SessionDep, user: OptionalUser) -> HTMLResponse:
    lab = catalog.get_lab(session, lab_id)
    latest = service.history(lab.id, user.id, session=session, limit=1) if user else []
    return render(
        request, "labs/lab.html", _lab_page(request, lab, user, latest[0] if latest else None, session=session)
    )


@router.get("/{lab_id}/starter.py", response_class=PlainTextResponse)
def starter(lab_id: str, session: SessionDep) -> PlainTextResponse:
    lab = catalog.get_lab(session, lab_id)
    disposition = f'attachment; filename="{lab.id.replace("-", "_")}.py"'
    return PlainTextResponse(lab.starter, media_type="text/x-python", headers={"Content-Disposition": disposition})


@router.get("/{lab_id}/public/{name}", response_class=PlainTextResponse)
def public_file(lab_id: str, name: str, session: SessionDep) -> PlainTextResponse:
    """A file the lab runs in every rank beside the student's code (``public_files``): not secret, so shown."""
    lab = catalog.get_lab(session, lab_id)
    if name not in lab.spec.public_files:
        raise NotFound(f"Lab '{lab.id}' has no public file {name!r}.")
    return PlainTextResponse(lab.files.get(name, ""), media_type="text/x-python")


@router.post("/{lab_id}/submissions", response_class=HTMLResponse)
async def submit(
    lab_id: str,
    request: Request,
    session: SessionDep,
    user: CurrentUser,
    code: Annotated[str, Form()] = "",
    upload: Annotated[UploadFile | None, File()] = None,
) -> Response:
    lab = catalog.get_lab(session, lab_id)
    if upload is not None and upload.filename:
        raw = await upload.read(limits(request).max_code_bytes + 1)
        try:
            code = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInput(f"{upload.filename} is not UTF-8 text: upload a .py file.", field="upload") from None
    submission = service.submit(lab, user, code, session=session, now=utcnow(), limits=limits(request))
    if not _partial(request):
        return RedirectResponse(f"/labs/submissions/{submission.id}", status_code=303)
    context = {"result": result_view(submission, lab, session=session, said="", viewer=user), "lab": lab}
    response = render(request, "labs/lab.html", context, block="result", status_code=202)
    response.headers["HX-Trigger"] = EVENT_CHANGED
    return response


@router.post("/{lab_id}/hints/{check_id}", response_class=HTMLResponse)
def reveal_hint(
    lab_id: str,
    check_id: str,
    request: Request,
    session: SessionDep,
    user: CurrentUser,
    index: Annotated[int, Form(ge=0, le=100)] = 0,
) -> Response:
    """Reveal an earned hint (0 for a check's first); 403, saying how many more tries it takes, before then."""
    lab = catalog.get_lab(session, lab_id)
    try:
        state = hints.reveal(lab, user.id, check_id, index, session=session, now=utcnow())
    except Forbidden as exc:
        if not _partial(request):
            raise
        # A page older than the student's record: the box again, saying why, in place of the whole error page.
        context = {"lab": lab, "h": hints.states(lab, user.id, session=session)[check_id], "error": exc.message}
        return render(request, "labs/_hints.html", context, status_code=403)
    if not _partial(request):
        return RedirectResponse(f"/labs/{lab.id}#hints-{check_id}", status_code=303)
    context = {"lab": lab, "h": state, "focus": index}
    response = render(request, "labs/_hints.html", context)
    response.headers.update(NO_STORE)
    return response


@router.get("/{lab_id}/reference", response_class=HTMLResponse)
def compare_with_reference(lab_id: str, request: Request, session: SessionDep, user: CurrentUser) -> HTMLResponse:
    """The student's best submission beside the reference solution; 403 with the reason until allowed."""
    lab = catalog.get_lab(session, lab_id)
    found = reference.comparison(lab, user, session=session, now=utcnow())
    response = render(request, "labs/reference.html", {"lab": lab, "comparison": found})
    response.headers.update(NO_STORE)
    return response


@router.get("/{lab_id}/history", response_class=HTMLResponse)
def history(lab_id: str, request: Request, session: SessionDep, user: CurrentUser) -> HTMLResponse:
    lab = catalog.get_lab(session, lab_id)
    history = service.history(lab.id, user.id, session=session)
    context = {"lab": lab, "history": history, "terms": _terms(lab, user, session=session)}
    response = render(request, "labs/lab.html", context, block="history")
    response.headers.update(NO_STORE)
    return response


@router.get("/{lab_id}/all", response_class=HTMLResponse)
def all_submissions(
    lab_id: str,
    request: Request,
    session: SessionDep,
    user: RequireStaff,
    student: Annotated[str, Query(max_length=40)] = "",
    status: Annotated[str, Query(max_length=16)] = "",
    best: bool = False,
    page: Annotated[int, Query(ge=1)] = 1,
    queued: Annotated[int | None, Query(ge=0)] = None,
) -> HTMLResponse:
    lab = catalog.get_lab(session, lab_id)
    found = review.review(
        lab.id, review.Filters(student, status, best, page), session=session, course_id=user.course_id
    )
    context = {"lab": lab, "page": found, "queued": queued, "statuses": review.STATUSES, "poll_ms": 1000,
               "status_names": outcome.STATUS_NAMES,
               "workers": service.workers(session=session, now=utcnow())}  # fmt: skip
    response = render(request, "labs/submissions.html", context, block="rows" if _partial(request) else None)
    response.headers.update(NO_STORE)
    return response


@router.get("/{lab_id}/submissions.csv")
def submissions_csv(lab_id: str, request: Request, session: SessionDep, user: RequireStaff) -> Response:
    lab = catalog.get_lab(session, lab_id)
    rows = review.every_submission(lab.id, session=session, course_id=user.course_id)
    records = exports.submission_records(
        rows, extensions.course_due(user.course_id, "lab", lab.id, lab.spec.due, session=session)
    )
    return exports.csv_response(exports.to_csv(exports.SUBMISSION_FIELDS, records), f"{lab.id}-submissions.csv")


@router.post("/{lab_id}/regrade")
def regrade_all(
    lab_id: str,
    request: Request,
    session: SessionDep,
    user: RequireStaff,
    confirm: Annotated[str, Form()] = "",
) -> Response:
    """Without ``confirm=yes``, a page that says how many jobs it would queue and asks first."""
    lab = catalog.get_lab(session, lab_id)
    if confirm != "yes":
        count = review.regradable(lab.id, session=session, course_id=user.course_id)
        return render(request, "labs/regrade_confirm.html", {"lab": lab, "count": count})
    queued = service.regrade(None, lab.id, session=session, now=utcnow(), course_id=user.course_id)
    return _back(request, f"/labs/{lab.id}/all?queued={queued}")


def _back(request: Request, url: str) -> Response:
    if request.headers.get("hx-request"):
        return Response(status_code=204, headers={"HX-Redirect": url})
    return RedirectResponse(url, status_code=303)


def _labs(request: Request) -> list[Lab]:
    """The live labs (the signed-in user's course's, when it assigns some), read once per request (an exercise
    set page asks for each of its exercises)."""
    labs: list[Lab] | None = getattr(request.state, "live_labs", None)
    if labs is None:
        user: Principal | None = getattr(request.state, "user", None)
        with request.app.state.readers() as session:
            assigned = extensions.assigned(user.course_id, "lab", session=session) if user and user.in_course else None
            labs = [lab for lab in catalog.all_labs(session).values() if assigned is None or lab.id in assigned]
        request.state.live_labs = labs
    return labs


def _lab_for_exercise(request: Request, exercise_id: str) -> Lab | None:
    return next((lab for lab in _labs(request) if lab.spec.exercise == exercise_id), None)


# The exercise pages link to their labs without the exercises package knowing about labs.
templates.env.globals["lab_for_exercise"] = _lab_for_exercise
templates.env.globals["all_labs"] = _labs
templates.env.globals["LAB_EVENT"] = EVENT_CHANGED
templates.env.filters["lab_markdown"] = _statement_html  # hints are authored markdown, as statements
