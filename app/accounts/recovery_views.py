"""Pages to change one's password, download one's data, use a reset link, and for staff to make one.

Thin: the rules are ``app.accounts.recovery``'s. A reset page never sends the link onwards
(``Referrer-Policy: no-referrer``), and a failed form changes nothing.
"""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.accounts import recovery
from app.accounts.export import export_user
from app.accounts.models import User
from app.courses.models import CourseRole
from app.courses.service import role_in
from app.db import utcnow
from app.deps import CurrentUser, RequireStaff, RowId, SessionDep
from app.errors import DomainError, NotFound
from app.web import cookies
from app.web.auth import COOKIE
from app.web.templating import render

router = APIRouter(tags=["accounts"])
PASSWORD = Annotated[str, Form(max_length=1000)]


@router.get("/account/password", response_class=HTMLResponse)
def password_form(request: Request, user: CurrentUser) -> Response:
    changed = request.query_params.get("changed") == "1"
    return render(request, "accounts/password.html", {"changed": changed})


@router.get("/account/data")
def download_data(session: SessionDep, principal: CurrentUser) -> Response:
    """Everything held about the signed-in account, as a JSON file (``app.accounts.export``)."""
    body = json.dumps(export_user(principal.id, session=session), indent=1, sort_keys=True)
    headers = {
        "Content-Disposition": f'attachment; filename="ringlab-{principal.username}.json"',
        "Cache-Control": "no-store",
    }
    return Response(body, media_type="application/json", headers=headers)


@router.post("/account/password", response_class=HTMLResponse)
def change_password(
    request: Request, session: SessionDep, principal: CurrentUser,
    old_password: PASSWORD = "", new_password: PASSWORD = "", confirm: PASSWORD = "",
) -> Response:  # fmt: skip
    user = session.get(User, principal.id)
    assert user is not None  # a signed-in principal's account exists
    try:
        recovery.change_password(
            user, old_password, new_password, confirm, session=session, keep=request.cookies.get(COOKIE)
        )
    except DomainError as exc:
        return render(request, "accounts/password.html", {"error": exc}, status_code=exc.status_code)
    return RedirectResponse("/account/password?changed=1", status_code=303)


def _no_referrer(response: Response) -> Response:
    response.headers["Referrer-Policy"] = "no-referrer"  # the link is a secret: never sent on to another page
    return response


def _reset_page(request: Request, token: str, session: SessionDep, error: DomainError | None = None) -> Response:
    """The form for a live link; the reason, and no form, for one that ended or never was."""
    try:
        reset = recovery.reset_for(token, session=session, now=utcnow())
    except DomainError as exc:
        return _no_referrer(render(request, "accounts/reset.html", {"ended": exc}, status_code=exc.status_code))
    owner = session.get(User, reset.user_id)
    context = {"token": token, "username": owner.username if owner else "", "expires_at": reset.expires_at}
    status = error.status_code if error else 200
    return _no_referrer(render(request, "accounts/reset.html", {**context, "error": error}, status_code=status))


@router.get("/reset/{token}", response_class=HTMLResponse)
def reset_form(token: str, request: Request, session: SessionDep) -> Response:
    return _reset_page(request, token, session)


@router.post("/reset/{token}", response_class=HTMLResponse)
def reset(
    token: str, request: Request, session: SessionDep, new_password: PASSWORD = "", confirm: PASSWORD = ""
) -> Response:
    try:
        recovery.use_reset(token, new_password, confirm, session=session, now=utcnow())
    except DomainError as exc:
        return _reset_page(request, token, session, exc)
    response = RedirectResponse("/signin?reset=1", status_code=303)
    cookies.delete(response, request, COOKIE)  # whoever was signed in on this browser is not any more
    return response


@router.post("/instructor/students/{user_id}/password-reset", response_class=HTMLResponse)
def make_reset_link(user_id: RowId, request: Request, session: SessionDep, staff: RequireStaff) -> Response:
    """A one-time link for a student of the course, shown once on this page for staff to pass on.

    Staff reset only their course's students: never another member of staff, nor a site administrator.
    """
    student = session.get(User, user_id)
    if student is None or student.is_admin or role_in(user_id, staff.course_id, session=session) != CourseRole.student:
        raise NotFound("There is no such student in this course.")
    by = session.get(User, staff.id)
    issued = recovery.issue_reset(student, by=by, session=session, now=utcnow())
    link = str(request.base_url).rstrip("/") + f"/reset/{issued.token}"
    context = {"student": student, "link": link, "expires_at": issued.expires_at}
    response = render(request, "accounts/reset_link.html", context)
    response.headers["Cache-Control"] = "no-store"
    return _no_referrer(response)
