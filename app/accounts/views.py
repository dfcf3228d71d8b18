"""Sign-up, sign-in and sign-out pages."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.accounts import flows, service
from app.db import utcnow
from app.deps import ClientAddress, OptionalUser, SessionDep, SettingsDep
from app.errors import DomainError
from app.flashcards import preferences
from app.web import cookies
from app.web.auth import COOKIE
from app.web.templating import render

router = APIRouter(tags=["accounts"])


def safe_next(target: str | None) -> str:
    """Only same-site paths: an open redirect would let a link send a student anywhere."""
    if not target:
        return "/"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return "/"
    return target


def _signed_in(request: Request, user_id: int, session: SessionDep, settings: SettingsDep, target: str) -> Response:
    from app.accounts.models import User
    from app.courses import access
    from app.courses.models import STAFF

    user = session.get(User, user_id)
    assert user is not None
    # A new token at every sign-in (and the old one dropped) defeats session fixation.
    service.end_session(request.cookies.get(COOKIE), session=session)
    issued = service.start_session(user, session=session, now=utcnow(), ttl=timedelta(hours=settings.session_ttl_hours))
    # Staff land on their own home, unless they were sent to sign in from another page.
    landing = safe_next(target)
    staff = user.is_admin or access.resolve(user.id, None, session=session).role in STAFF
    response = RedirectResponse("/instructor" if landing == "/" and staff else landing, status_code=303)
    cookies.set_cookie(response, request, COOKIE, issued.token, max_age=settings.session_ttl_hours * 3600)
    return response


@router.get("/signin", response_class=HTMLResponse)
def signin_form(request: Request, user: OptionalUser, next: str = "/") -> Response:
    if user is not None:
        return RedirectResponse(safe_next(next), status_code=303)
    notice = None
    if request.query_params.get("expired"):
        notice = "Your session has expired. Sign in again."
    elif request.query_params.get("reset"):
        notice = "Your new password is set, and every session of the account was signed out. Sign in with it."
    return render(request, "accounts/signin.html", {"next": safe_next(next), "notice": notice})


@router.post("/signin", response_class=HTMLResponse)
def signin(
    request: Request, session: SessionDep, settings: SettingsDep, client: ClientAddress,
    username: Annotated[str, Form(max_length=100)] = "", password: Annotated[str, Form(max_length=1000)] = "",
    next: Annotated[str, Form()] = "/",
) -> Response:  # fmt: skip
    state = request.app.state
    try:
        user = flows.sign_in(
            username, password, client, session=session, limits=state.limits, now=utcnow(), counter=state.sessionmaker
        )
    except DomainError as exc:
        context = {"next": safe_next(next), "error": exc.message, "username": username}
        response = render(request, "accounts/signin.html", context, status_code=exc.status_code)
        if retry := getattr(exc, "retry_after", None):
            response.headers["Retry-After"] = str(retry)
        return response
    return _signed_in(request, user.id, session, settings, next)


def _needs_code(settings: SettingsDep, session: SessionDep) -> bool:
    """A code is needed unless the default course is open (no RINGLAB_JOIN_CODE, no code of its own)."""
    from app.courses.service import default_is_open

    return settings.join_code is not None or not default_is_open(session=session)


@router.get("/signup", response_class=HTMLResponse)
def signup_form(
    request: Request, session: SessionDep, settings: SettingsDep, code: Annotated[str, Query(max_length=200)] = ""
) -> Response:
    """The sign-up form; ``?code=`` fills in a course's join code (a link an instructor hands out)."""
    context = {"needs_code": _needs_code(settings, session), "zones": preferences.time_zones(), "time_zone": "UTC",
               "join_code": code}  # fmt: skip
    return render(request, "accounts/signup.html", context)


@router.post("/signup", response_class=HTMLResponse)
def signup(
    request: Request, session: SessionDep, settings: SettingsDep, client: ClientAddress,
    username: Annotated[str, Form(max_length=100)] = "", password: Annotated[str, Form(max_length=1000)] = "",
    join_code: Annotated[str | None, Form(max_length=200)] = None,
    time_zone: Annotated[str, Form(max_length=64)] = "UTC",
) -> Response:  # fmt: skip
    try:
        user = flows.sign_up(
            username, password, join_code, client, session=session, limits=request.app.state.limits, settings=settings,
            time_zone=time_zone,
            now=utcnow(),
        )  # fmt: skip
    except DomainError as exc:
        context = {
            "needs_code": _needs_code(settings, session),
            "join_code": join_code or "",
            "error": exc.message,
            "field": exc.field,
            "username": username,
            "zones": preferences.time_zones(),
            "time_zone": time_zone,
        }
        response = render(request, "accounts/signup.html", context, status_code=exc.status_code)
        if retry := getattr(exc, "retry_after", None):
            response.headers["Retry-After"] = str(retry)
        return response
    return _signed_in(request, user.id, session, settings, "/")


@router.post("/signout")
def signout(request: Request, session: SessionDep) -> Response:
    service.end_session(request.cookies.get(COOKIE), session=session)
    response = RedirectResponse("/", status_code=303)
    cookies.delete(response, request, COOKIE)
    return response
