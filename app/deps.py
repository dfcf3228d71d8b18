"""Request-scoped dependencies, as Annotated aliases routes can name."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

import anyio
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool

from app.accounts import service as accounts
from app.config import Settings
from app.db import utcnow
from app.errors import Forbidden, SignInRequired, Unauthorized
from app.web.auth import Principal

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@asynccontextmanager
async def _turn(request: Request, writes: bool) -> AsyncIterator[None]:
    """On SQLite, writing requests take turns here, before they hold a thread or a connection.

    SQLite has one writer at a time. Waiting for it inside a worker thread would hold that
    thread, and with every thread of the pool waiting, the writer that holds the lock could
    not get one to finish: so requests queue on the event loop instead (first come, first
    served) and only the one whose turn it is runs. Readers and PostgreSQL need no turns.
    """
    turns: asyncio.Lock | None = request.app.state.write_turns
    if turns is None or not writes:
        yield
        return
    async with turns:
        yield


def _finish(session: Session, ok: bool) -> None:
    """Commit if the route succeeded; close either way (closing rolls back what is left)."""
    try:
        if ok:
            session.commit()
    finally:
        session.close()


@asynccontextmanager
async def _request_session(request: Request, factory: sessionmaker[Session], writes: bool) -> AsyncIterator[Session]:
    # Async, so a request costs one thread hop for its session (the commit) instead of two.
    async with _turn(request, writes):
        session = factory()  # no I/O until the first query, which runs in the route's thread
        ok = False
        try:
            yield session
            ok = True
        finally:
            # Shielded: a client that goes away mid-request must not leave the session (and, on
            # SQLite, the write lock) open.
            with anyio.CancelScope(shield=True):
                await run_in_threadpool(_finish, session, ok)


async def get_session(request: Request) -> AsyncIterator[Session]:
    """One session per request, committed when the route returns without error.

    GET and HEAD get a reader (they never write; readers run side by side on SQLite),
    everything else a writer.
    """
    safe = request.method in SAFE_METHODS
    factory = request.app.state.readers if safe else request.app.state.sessionmaker
    async with _request_session(request, factory, writes=not safe) as session:
        yield session


async def get_write_session(request: Request) -> AsyncIterator[Session]:
    """A writer whatever the method: for a GET that may write (an attempt past its deadline)."""
    async with _request_session(request, request.app.state.sessionmaker, writes=True) as session:
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


# Committed before the response is sent, so the next request (a redirect) sees the change.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
WriteSessionDep = Annotated[Session, Depends(get_write_session, scope="function")]


def api_user(
    session: SessionDep, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> Principal:
    """The bearer token's user, looked up in the request's own session (one transaction per request)."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise Unauthorized("Send 'Authorization: Bearer <token>' (get one from POST /api/v1/auth/token).")
    return Principal(*accounts.token_user(credentials.credentials, session=session, now=utcnow()))


SettingsDep = Annotated[Settings, Depends(get_app_settings)]
OptionalUser = Annotated[Principal | None, Depends(optional_user)]
CurrentUser = Annotated[Principal, Depends(current_user)]
RequireInstructor = Annotated[Principal, Depends(require_instructor)]
ApiUser = Annotated[Principal, Depends(api_user)]
