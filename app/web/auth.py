"""Who is asking: resolves the session cookie once per request into a Principal.

Templates (the navigation) and dependencies read ``request.state.user``; the
JSON API ignores cookies and uses bearer tokens (app.deps.ApiUser).
"""

from __future__ import annotations

from dataclasses import dataclass
from http.cookies import SimpleCookie

from starlette.types import ASGIApp, Receive, Scope, Send

from app.accounts import service
from app.accounts.models import Role, User
from app.content.courses import DEFAULT_COURSE
from app.courses import access
from app.courses.models import STAFF, CourseRole
from app.db import session_scope, utcnow
from app.errors import Forbidden
from app.flashcards import preferences

COOKIE = "ringlab_session"


@dataclass(frozen=True)
class Principal:
    id: int
    username: str
    role: Role
    time_zone: str = "UTC"  # every time on a page is shown in it (app.web.templating's ``localtime``)
    # The course this request is in and the user's role there (None: not enrolled; app.courses.access).
    course_id: str = DEFAULT_COURSE
    course_role: CourseRole | None = None

    @property
    def is_admin(self) -> bool:
        return self.role == Role.admin

    @property
    def is_staff(self) -> bool:
        """May see and grade the course's students' work: its TAs and instructors, and site administrators."""
        return self.is_admin or self.course_role in STAFF

    @property
    def is_instructor(self) -> bool:
        """May change the course itself (roster, staff, join code): its instructors and site administrators."""
        return self.is_admin or self.course_role == CourseRole.instructor

    @property
    def in_course(self) -> bool:
        """May work in the course (start attempts, submit, review): any member, and site administrators."""
        return self.is_admin or self.course_role is not None

    def working_course(self) -> str:
        """The course this request's work (an attempt, a submission) goes in; Forbidden if the user is not in it."""
        if not self.in_course:
            raise Forbidden(
                f"You are not in the course '{self.course_id}'. Choose one of your courses on /courses, "
                "or join this one with its join code."
            )
        return self.course_id

    def sees_course(self, course_id: str) -> bool:
        """Whether staff pages may show work made in ``course_id``: staff of that course, or an administrator."""
        return self.is_admin or (self.is_staff and course_id == self.course_id)

    @classmethod
    def of(cls, user: User, time_zone: str = "UTC", place: access.Place | None = None) -> Principal:
        place = place or access.Place(DEFAULT_COURSE, None)
        return cls(user.id, user.username, user.role, time_zone, place.course_id, place.role)


class AuthMiddleware:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            state = scope.setdefault("state", {})
            state["user"], state["session_expired"] = None, False
            if not scope["path"].startswith(("/static/", "/api/")):
                token = cookie_value(scope, COOKIE)
                if token:
                    with session_scope(scope["app"].state.readers) as session:
                        user, expired = service.session_user(token, session=session, now=utcnow())
                        if user is not None:
                            zone = preferences.zone_of(user.id, session=session)
                            place = access.resolve(
                                user.id, query_value(scope, "course"), session=session,
                                remembered=cookie_value(scope, access.COOKIE), admin=user.is_admin,
                            )  # fmt: skip
                            state["user"] = Principal.of(user, zone, place)
                        state["session_expired"] = expired
        await self.app(scope, receive, send)


def query_value(scope: Scope, name: str) -> str | None:
    """The first value of query parameter ``name``, if the request has one."""
    from urllib.parse import parse_qs

    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get(name)
    return values[0] if values else None


def cookie_value(scope: Scope, name: str) -> str | None:
    """The value of cookie ``name`` in the request, if it sent one."""
    for key, value in scope["headers"]:
        if key == b"cookie":
            jar = SimpleCookie(value.decode("latin-1"))
            if name in jar:
                return jar[name].value
    return None
