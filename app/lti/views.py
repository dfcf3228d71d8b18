"""LTI 1.3 routes: the tool's key set, OIDC login, launch, the first launch's choices, deep linking.

Thin over ``app.lti.flow`` and the library's adapter. Every route here is a plain ``def``: the library's
HTTP calls (a platform's key set) block, so they run in the thread pool, never on the event loop. Login and
launch come from the LMS's site, so they are exempt from the CSRF check (the OIDC state and the single-use
nonce protect them); every later step is an ordinary form of ours.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from pylti1p3.deep_link_resource import DeepLinkResource
from pylti1p3.exception import LtiException, OIDCException
from pylti1p3.lineitem import LineItem as LibLineItem
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from app.accounts import service as accounts
from app.accounts.models import User
from app.db import utcnow
from app.deps import OptionalUser, SessionDep, WriteSessionDep, writing
from app.errors import DomainError
from app.lti import adapter, claims, contexts, flow, frames, keys, offers, people
from app.web import cookies
from app.web.auth import COOKIE as SESSION_COOKIE
from app.web.auth import Principal
from app.web.security import csp
from app.web.templating import render

router = APIRouter(prefix="/lti", tags=["lti"])
FRAMEABLE = {"Content-Security-Policy": csp("*")}  # a refusal shows inside whichever LMS frame asked
LOGIN_PARAMS = ("iss", "login_hint", "target_link_uri", "lti_message_hint", "client_id", "lti_deployment_id")


async def _params(request: Request) -> dict[str, str]:
    params = {k: v for k, v in request.query_params.items()}
    if request.method == "POST":
        form = await request.form()
        params.update({k: v for k, v in form.items() if isinstance(v, str)})
    return params


def _refused(request: Request, message: str, status: int = 400, **extra: object) -> Response:
    context = {"message": message, "status": status, **extra}
    response = render(request, "lti/refused.html", context, status_code=status)
    response.headers.update(FRAMEABLE)
    return response


@router.get("/jwks.json")
def jwks(session: WriteSessionDep) -> JSONResponse:
    """Ringlab's public keys (the signing key and recently retired ones), for platforms to verify us."""
    return JSONResponse(keys.published(session=session, now=utcnow()), headers={"Cache-Control": "max-age=300"})


@router.api_route("/login", methods=["GET", "POST"], response_class=HTMLResponse)
async def login(request: Request) -> Response:
    """OIDC third-party-initiated login: check the platform is registered, then send the browser to its
    authorization endpoint with a fresh state (in a cookie) and nonce (stored, single use)."""
    params = await _params(request)
    async with writing(request) as session:  # in its turn on SQLite; committed when the block ends
        return await run_in_threadpool(_login, request, params, session)


def _login(request: Request, params: dict[str, str], session: Session) -> Response:
    launch_url = str(request.url_for("lti_launch"))
    oidc, jar = adapter.login(params, secure=request.url.scheme == "https", session=session, now=utcnow())
    oidc.pass_params_to_launch({"login": {k: params[k] for k in LOGIN_PARAMS if params.get(k)}})
    try:
        response = oidc.redirect(launch_url)
    except OIDCException as exc:
        issuer, client = params.get("iss", "?"), params.get("client_id", "?")
        return _refused(
            request,
            f"Ringlab does not know this LMS ({exc}; issuer '{issuer}', client id '{client}'). "
            "A Ringlab administrator registers it with `ringlab lti add-platform`.",
        )
    return jar.apply(response)


@router.post("/launch", response_class=HTMLResponse, name="lti_launch")
async def launch(request: Request) -> Response:
    params = await _params(request)
    # Committed whatever the answer: a refused launch still spends its nonce, so it cannot be tried again.
    async with writing(request) as session:
        return await run_in_threadpool(_launch, request, params, session)


def _launch(request: Request, params: dict[str, str], session: Session) -> Response:
    now = utcnow()
    message, _, _ = adapter.launch(
        params, dict(request.cookies), secure=request.url.scheme == "https", session=session, now=now
    )
    state = params.get("state", "")
    if state and f"lti1p3-{state}" not in request.cookies:
        return _new_window(request, message)
    try:
        message.validate()
        launched = flow.accepted(message, session=session)
        user = people.user_of(launched.platform, launched.facts.sub, session=session)
        step = flow.route(launched, user, session=session, now=now)
    except LtiException as exc:
        return _refused(request, f"The LMS's launch was refused: {exc}")
    except DomainError as exc:
        return _refused(request, exc.message, exc.status_code)
    response = RedirectResponse(step.location, status_code=303)
    cookies.set_cookie(response, request, flow.LAUNCH_COOKIE, launched.launch_id, max_age=3600, embedded=True)
    cookies.set_cookie(response, request, cookies.EMBEDDED, str(launched.platform.id), embedded=True)
    if step.sign_in is not None:
        _sign_in(request, response, step.sign_in, session, course_id=step.course_id)
    return response


def _new_window(request: Request, message: adapter.Launch) -> Response:
    """The browser did not send back the state cookie (cookies refused in the LMS's frame): start again in a
    window of Ringlab's own, where they are first-party."""
    try:
        login = (message.get_params_from_login() or {}).get("login") or {}
    except Exception:
        login = {}
    again = "/lti/login?" + urlencode({**login, "lti1p3_new_window": "1"}) if login else None
    return _refused(
        request,
        "Your browser did not let Ringlab keep its cookie inside the LMS's page, so this launch could not be checked.",
        status=401,
        new_window=again,
    )


def _sign_in(request: Request, response: Response, user: User, session: SessionDep, *, course_id: str | None) -> None:
    settings = request.app.state.settings
    accounts.end_session(request.cookies.get(SESSION_COOKIE), session=session)
    issued = accounts.start_session(
        user, session=session, now=utcnow(), ttl=timedelta(hours=settings.session_ttl_hours)
    )
    age = settings.session_ttl_hours * 3600
    cookies.set_cookie(response, request, SESSION_COOKIE, issued.token, max_age=age, embedded=True)
    if course_id is not None:
        from app.courses import access

        cookies.set_cookie(response, request, access.COOKIE, course_id, max_age=365 * 24 * 3600, embedded=True)


def _ours(request: Request, launch_id: str) -> None:
    """The later steps of a launch belong to the browser that made it."""
    from app.errors import Forbidden

    if request.cookies.get(flow.LAUNCH_COOKIE) != launch_id:
        raise Forbidden("This step belongs to another launch. Open Ringlab from your LMS again.")


def _go(request: Request, step: flow.Next, session: SessionDep) -> Response:
    response = RedirectResponse(step.location, status_code=303)
    if step.sign_in is not None:
        _sign_in(request, response, step.sign_in, session, course_id=step.course_id)
    return response


@router.get("/welcome/{launch_id}", response_class=HTMLResponse)
def welcome(request: Request, launch_id: str, session: SessionDep, user: OptionalUser) -> Response:
    """A first launch: a new Ringlab account, or (signed in) this LMS person's existing one."""
    _ours(request, launch_id)
    launched = flow.launched(launch_id, session=session, now=utcnow())
    return render(request, "lti/welcome.html", {"launch": launched, "user": user})


@router.post("/welcome/{launch_id}", response_class=HTMLResponse)
def welcome_choice(
    request: Request, launch_id: str, session: SessionDep, user: OptionalUser,
    choice: Annotated[str, Form(max_length=10)] = "",
) -> Response:  # fmt: skip
    _ours(request, launch_id)
    now = utcnow()
    launched = flow.launched(launch_id, session=session, now=now)
    if choice == "link" and user is not None:
        account = flow.link_account(launched, session.get(User, user.id), session=session, now=now)  # type: ignore[arg-type]
    elif choice == "new":
        account = flow.create_account(launched, session=session, now=now)
    else:
        return RedirectResponse(f"/signin?next=/lti/welcome/{launch_id}", status_code=303)
    return _go(request, flow.route(launched, account, session=session, now=now), session)


@router.get("/course/{launch_id}", response_class=HTMLResponse)
def course_choice(request: Request, launch_id: str, session: SessionDep, user: OptionalUser) -> Response:
    """Staff's first launch from an LMS course: which Ringlab course it is."""
    _ours(request, launch_id)
    principal = _signed_in(user)
    launched = flow.launched(launch_id, session=session, now=utcnow())
    courses = contexts.linkable(principal.id, principal.is_admin, session=session)
    return render(request, "lti/course.html", {"launch": launched, "courses": courses})


@router.post("/course/{launch_id}", response_class=HTMLResponse)
def link_course(
    request: Request, launch_id: str, session: SessionDep, user: OptionalUser,
    course_id: Annotated[str, Form(max_length=80)] = "",
) -> Response:  # fmt: skip
    _ours(request, launch_id)
    principal, now = _signed_in(user), utcnow()
    launched = flow.launched(launch_id, session=session, now=now)
    contexts.link(
        launched.context, course_id, user_id=principal.id, is_admin=principal.is_admin, actor=principal.username,
        session=session, now=now,
    )  # fmt: skip
    account = session.get(User, principal.id)
    return _go(request, flow.route(launched, account, session=session, now=now), session)


def _signed_in(user: Principal | None) -> Principal:
    from app.errors import SignInRequired

    if user is None:
        raise SignInRequired("Sign in to continue.")
    return user


@router.get("/deep-link/{launch_id}", response_class=HTMLResponse)
def deep_link(request: Request, launch_id: str, session: SessionDep, user: OptionalUser) -> Response:
    """Staff pick what to add to the LMS course."""
    _ours(request, launch_id)
    launched, principal = flow.launched(launch_id, session=session, now=utcnow()), _signed_in(user)
    course_id = _deep_linking_course(launched, principal)
    return render(
        request, "lti/deep_link.html", {"launch": launched, "offers": offers.offers(course_id, session=session)}
    )


def _deep_linking_course(launched: flow.Launched, principal: Principal) -> str:
    from app.errors import Forbidden

    course_id = launched.context.course_id
    if not launched.facts.is_deep_linking or course_id is None:
        raise Forbidden("This launch is not a deep-linking request of a connected course.")
    if not (flow.is_staff(launched.facts) or principal.is_admin):
        raise Forbidden("Only the course's staff choose what Ringlab adds to the LMS.")
    return course_id


@router.post("/deep-link/{launch_id}", response_class=HTMLResponse)
def deep_link_answer(
    request: Request, launch_id: str, session: SessionDep, user: OptionalUser,
    items: Annotated[list[str] | None, Form(max_length=200)] = None,
) -> Response:  # fmt: skip
    """Send the chosen items back to the LMS as resource links (quizzes and labs with a gradebook column)."""
    _ours(request, launch_id)
    now = utcnow()
    launched, principal = flow.launched(launch_id, session=session, now=now), _signed_in(user)
    course_id = _deep_linking_course(launched, principal)
    chosen = offers.chosen(course_id, items or [], session=session)
    launch_url = str(request.url_for("lti_launch"))
    resources = []
    for offer in chosen:
        resource = DeepLinkResource().set_url(launch_url).set_title(offer.title)
        resource.set_custom_params({"resource": offer.resource})
        if offer.max_score is not None and offer.kind in claims.GRADED:
            line = LibLineItem().set_score_maximum(offer.max_score).set_label(offer.title)
            resource.set_lineitem(line.set_resource_id(offer.resource).set_tag("ringlab"))
        resources.append(resource)
    message = adapter.restored(launch_id, session=session, now=now)
    token = message.get_deep_link().get_response_jwt(resources)
    settings = launched.body.get(claims.DL) or {}
    return_url = str(settings.get("deep_link_return_url") or "")
    target = frames.origin(return_url)
    if target is None:
        from app.errors import InvalidInput

        raise InvalidInput("The LMS gave no address to send the chosen items back to.")
    ancestors = " ".join(["'self'", *frames.origins(launched.platform)])
    context = {"return_url": return_url, "jwt": token, "chosen": chosen}
    response = render(request, "lti/deep_link_return.html", context)
    response.headers["Content-Security-Policy"] = csp(ancestors, form_action=f"'self' {target}")
    response.headers["Cache-Control"] = "no-store"
    return response
