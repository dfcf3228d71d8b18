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
from app.db import session_scope, utcnow
from app.flashcards import preferences

COOKIE = "ringlab_session"


@dataclass(frozen=True)
class Principal:
    id: int
    username: str
    role: Role
    time_zone: str = "UTC"  # every time on a page is shown in it (app.web.templating's ``localtime``)

    @property
    def is_instructor(self) -> bool:
        return self.role == Role.instructor

    @classmethod
    def of(cls, user: User, time_zone: str = "UTC") -> Principal:
        return cls(user.id, user.username, user.role, time_zone)


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
                        zone = preferences.zone_of(user.id, session=session) if user else "UTC"
                        state["user"] = Principal.of(user, zone) if user else None
                        state["session_expired"] = expired
        await self.app(scope, receive, send)


def cookie_value(scope: Scope, name: str) -> str | None:
    """The value of cookie ``name`` in the request, if it sent one."""
    for key, value in scope["headers"]:
        if key == b"cookie":
            jar = SimpleCookie(value.decode("latin-1"))
            if name in jar:
                return jar[name].value
    return None
