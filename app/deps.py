"""Request-scoped dependencies, as Annotated aliases routes can name."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from app.accounts import service as accounts
from app.config import Settings
from app.db import session_scope, utcnow
from app.errors import Forbidden, SignInRequired, Unauthorized
from app.web.auth import Principal


def get_session(request: Request) -> Iterator[Session]:
    """One session per request, committed when the route returns without error."""
    with session_scope(request.app.state.sessionmaker) as session:
        yield session


def get_app_settings(request: Request) -> Settings:
    return request.app.state.settings  # type: ignore[no-any-return]


def optional_user(request: Request) -> Principal | None:
    return request.state.user  # type: ignore[no-any-return]


def current_user(request: Request) -> Principal:
    user: Principal | None = request.state.user
    if user is None:
        expired = request.state.session_expired
        raise SignInRequired("Your session has expired. Sign in again." if expired else "Sign in to continue.")
    return user


def require_instructor(user: Annotated[Principal, Depends(current_user)]) -> Principal:
    if not user.is_instructor:
        raise Forbidden("This page is for instructors.")
    return user


bearer = HTTPBearer(auto_error=False, description="A token from POST /api/v1/auth/token")


def api_user(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> Principal:
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise Unauthorized("Send 'Authorization: Bearer <token>' (get one from POST /api/v1/auth/token).")
    with session_scope(request.app.state.sessionmaker) as session:
        return Principal.of(accounts.token_user(credentials.credentials, session=session, now=utcnow()))


# Committed before the response is sent, so the next request (a redirect) sees the change.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
SettingsDep = Annotated[Settings, Depends(get_app_settings)]
OptionalUser = Annotated[Principal | None, Depends(optional_user)]
CurrentUser = Annotated[Principal, Depends(current_user)]
RequireInstructor = Annotated[Principal, Depends(require_instructor)]
ApiUser = Annotated[Principal, Depends(api_user)]
