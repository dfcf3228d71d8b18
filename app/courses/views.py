"""Course pages: one's courses (enter one, join one by code) and a course's settings for its instructors.

Thin: the rules are ``app.courses.members``'s. Which course a request is in comes from ``?course=``, else
the cookie that entering a course sets (``app.courses.access``); the settings forms post back with the
course in their address, so a change always lands in the course the page showed.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, File, Form, Path, Query, Request, UploadFile
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.accounts.models import User
from app.courses import access, members, roster, service
from app.courses.models import STAFF, CourseRole
from app.db import utcnow
from app.deps import CurrentUser, RequireInstructor, RowId, SessionDep, SettingsDep
from app.errors import DomainError, InvalidInput
from app.web import cookies
from app.web.auth import Principal
from app.web.templating import render

router = APIRouter(tags=["courses"])
COOKIE_MAX_AGE = 365 * 24 * 3600
NO_STORE = {"Cache-Control": "no-store"}
CourseId = Annotated[str, Path(max_length=80)]
MAX_ROSTER_BYTES = 512 * 1024  # a few thousand lines; the request body limit caps it anyway

NOTICES = {
    "code": "A new join code is in force: the old one no longer joins this course.",
    "off": "Joining by code is off: only you and the course's other instructors can add people now.",
    "added": "{who} is now in the course, as {role}.",
    "role": "{who} is now {role} in this course.",
    "removed": "Removed: they are no longer in this course. Their work stays in it.",
}


def _enter(response: Response, request: Request, course_id: str) -> Response:
    """This browser works in ``course_id`` from now on (until another course is entered)."""
    cookies.set_cookie(response, request, access.COOKIE, course_id, max_age=COOKIE_MAX_AGE)
    return response


def _account(user: Principal, session: SessionDep) -> User:
    return members.user_by_id(user.id, session=session)


@router.get("/courses", response_class=HTMLResponse)
def courses_page(request: Request, session: SessionDep, user: CurrentUser) -> Response:
    return _courses(request, session, user)


def _courses(
    request: Request, session: SessionDep, user: Principal, error: DomainError | None = None, code: str = ""
) -> Response:
    context = {
        "memberships": service.memberships(user.id, session=session),
        "every_course": service.live_courses(session=session) if user.is_admin else [],
        "error": error,
        "code": code,
    }
    response = render(request, "courses/index.html", context, status_code=error.status_code if error else 200)
    if error is not None and (retry := getattr(error, "retry_after", None)):
        response.headers["Retry-After"] = str(retry)
    return response


@router.post("/courses/join", response_class=HTMLResponse)
def join(
    request: Request, session: SessionDep, user: CurrentUser, settings: SettingsDep,
    join_code: Annotated[str, Form(max_length=200)] = "",
) -> Response:  # fmt: skip
    """Join the course whose code this is, as a student, and enter it; a wrong code re-shows the form."""
    try:
        course_id = members.join(_account(user, session), join_code, settings.join_code, session=session, now=utcnow())
    except DomainError as exc:
        return _courses(request, session, user, exc, join_code)
    return _enter(RedirectResponse("/", status_code=303), request, course_id)


@router.post("/courses/{course_id}/enter")
def enter(course_id: CourseId, request: Request, session: SessionDep, user: CurrentUser) -> Response:
    """Work in this course from now on: its staff go to its instructor pages, its students to the dashboard."""
    role = members.enter(_account(user, session), course_id, session=session)
    target = "/instructor" if user.is_admin or role in STAFF else "/"
    return _enter(RedirectResponse(target, status_code=303), request, course_id)


# --- a course's settings, for its instructors (and site administrators) -----------------------------------


def _back(user: Principal, done: str, member: int | None = None, anchor: str = "people") -> RedirectResponse:
    query = {"course": user.course_id, "done": done} | ({"member": str(member)} if member else {})
    return RedirectResponse(f"/instructor/course?{urlencode(query)}#{anchor}", status_code=303)


def _settings(
    request: Request, session: SessionDep, user: Principal, settings: SettingsDep, *, status_code: int = 200,
    **context: Any,
) -> Response:  # fmt: skip
    page = members.course_page(user.course_id, settings.join_code, session=session)
    context = {"page": page, "roles": list(CourseRole), **context}
    response = render(request, "courses/settings.html", context, status_code=status_code)
    response.headers.update(NO_STORE)
    return response


@router.get("/instructor/course", response_class=HTMLResponse)
def course_settings(
    request: Request, session: SessionDep, user: RequireInstructor, settings: SettingsDep,
    done: Annotated[str, Query(max_length=20)] = "", member: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
) -> Response:  # fmt: skip
    notice = NOTICES.get(done)
    if notice and "{who}" in notice:
        # Named only while they are in this course: the page shows no one else's username.
        found = members.member_of(user.course_id, member, session=session) if member else None
        notice = notice.format(who=found[0].username, role=_a(found[1])) if found else None
    return _settings(request, session, user, settings, notice=notice)


def _a(role: CourseRole) -> str:
    """ "a student", "a teaching assistant", "an instructor"."""
    label = role.label.lower()
    return f"{'an' if label[0] in 'aeiou' else 'a'} {label}"


@router.post("/instructor/course/join-code")
def new_join_code(session: SessionDep, user: RequireInstructor) -> Response:
    members.new_join_code(user.course_id, actor=user.username, session=session, now=utcnow())
    return _back(user, "code", anchor="joining")


@router.post("/instructor/course/join-code/off")
def join_code_off(session: SessionDep, user: RequireInstructor) -> Response:
    members.close_joining(user.course_id, actor=user.username, session=session, now=utcnow())
    return _back(user, "off", anchor="joining")


def _role(value: str) -> CourseRole:
    return service.check_role(value.strip().lower())


@router.post("/instructor/course/members", response_class=HTMLResponse)
def add_member(
    request: Request, session: SessionDep, user: RequireInstructor, settings: SettingsDep,
    username: Annotated[str, Form(max_length=100)] = "", role: Annotated[str, Form(max_length=20)] = "student",
) -> Response:  # fmt: skip
    """Add an existing account to the course (or change their role); a mistake re-shows the form."""
    try:
        person = members.account(username, session=session)
        members.add(user.course_id, person, _role(role), actor=user.username, session=session, now=utcnow())
    except DomainError as exc:
        form = {"username": username, "role": role}
        return _settings(request, session, user, settings, status_code=exc.status_code, add_error=exc, add_form=form)
    return _back(user, "added", person.id)


@router.post("/instructor/course/members/{user_id}/role", response_class=HTMLResponse)
def change_role(
    user_id: RowId, request: Request, session: SessionDep, user: RequireInstructor, settings: SettingsDep,
    role: Annotated[str, Form(max_length=20)] = "",
) -> Response:  # fmt: skip
    try:
        person = members.member(user.course_id, user_id, session=session)
        members.set_role(user.course_id, person, _role(role), actor=user.username, session=session, now=utcnow())
    except DomainError as exc:
        return _settings(request, session, user, settings, status_code=exc.status_code, people_error=exc)
    return _back(user, "role", person.id)


@router.post("/instructor/course/members/{user_id}/remove", response_class=HTMLResponse)
def remove_member(
    user_id: RowId, request: Request, session: SessionDep, user: RequireInstructor, settings: SettingsDep
) -> Response:
    try:
        person = members.member(user.course_id, user_id, session=session)
        members.remove(user.course_id, person, actor=user.username, session=session, now=utcnow())
    except DomainError as exc:
        return _settings(request, session, user, settings, status_code=exc.status_code, people_error=exc)
    return _back(user, "removed")


def _roster_text(upload: UploadFile | None, text: str) -> str:
    if upload is not None and upload.filename:
        raw = upload.file.read(MAX_ROSTER_BYTES + 1)
        if len(raw) > MAX_ROSTER_BYTES:
            raise roster.RosterError([f"{upload.filename} is over {MAX_ROSTER_BYTES // 1024} KiB: split it."])
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise roster.RosterError(
                [f"{upload.filename} is not UTF-8 text: save it from the spreadsheet as 'CSV UTF-8'."]
            ) from None
    if not text.strip():
        raise InvalidInput("Choose a CSV file, or paste the roster into the box.", field="roster")
    return text


@router.post("/instructor/course/roster", response_class=HTMLResponse)
def import_roster(
    request: Request, session: SessionDep, user: RequireInstructor, settings: SettingsDep,
    upload: Annotated[UploadFile | None, File()] = None, text: Annotated[str, Form(max_length=MAX_ROSTER_BYTES)] = "",
) -> Response:  # fmt: skip
    """Enrol a CSV roster as students, making accounts for new usernames; their one-time links are shown once.

    A roster with any bad line is refused whole (422, naming each line): nothing changes.
    """
    try:
        rows = roster.parse(_roster_text(upload, text))
    except InvalidInput as exc:
        # Nothing was written: the roster is read whole before anyone is enrolled.
        return _settings(request, session, user, settings, status_code=422, roster_error=exc, roster_text=text)
    done = members.import_roster(
        user.course_id, rows, by=_account(user, session), actor=user.username, session=session, now=utcnow()
    )
    base = str(request.base_url).rstrip("/")
    links = [(new.user, f"{base}/reset/{new.reset.token}", new.reset.expires_at) for new in done.created]
    course = service.get_course(user.course_id, session=session)
    response = render(request, "courses/imported.html", {"course": course, "done": done, "links": links})
    response.headers.update(NO_STORE)
    response.headers["Referrer-Policy"] = "no-referrer"  # the links are secrets: never sent on to another page
    return response
