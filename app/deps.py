"""Request-scoped dependencies, as Annotated aliases routes can name."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Annotated, Any, Concatenate, ParamSpec, TypeVar

import anyio
from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool

from app.config import Settings
from app.courses import access
from app.db import NOWAIT, WriterBusy, session_scope, utcnow
from app.errors import Forbidden, SignInRequired, Unauthorized
from app.web.auth import Principal

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
P = ParamSpec("P")
T = TypeVar("T")


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


def writing(request: Request) -> Any:
    """``async with writing(request) as session``: a writer taken after slow work (an LMS call) is done, in
    its turn on SQLite, committed when the block succeeds."""
    return _request_session(request, request.app.state.sessionmaker, writes=True)


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


def client_address(request: Request) -> str:
    """The client's address: the peer, or what a proxy named in RINGLAB_TRUSTED_PROXIES forwarded."""
    return request.client.host if request.client else "unknown"


def optional_user(request: Request) -> Principal | None:
    return request.state.user  # type: ignore[no-any-return]


def current_user(request: Request) -> Principal:
    user: Principal | None = request.state.user
    if user is None:
        expired = request.state.session_expired
        raise SignInRequired("Your session has expired. Sign in again." if expired else "Sign in to continue.")
    return user


def require_staff(user: Annotated[Principal, Depends(current_user)]) -> Principal:
    """A TA or instructor of the request's course (or a site administrator)."""
    if not user.is_staff:
        raise Forbidden("This page is for the course's staff (its instructors and teaching assistants).")
    return user


def require_instructor(user: Annotated[Principal, Depends(current_user)]) -> Principal:
    """An instructor of the request's course (or a site administrator): the course's settings and staff."""
    if not user.is_instructor:
        raise Forbidden("This page is for the course's instructors.")
    return user


def require_admin(user: Annotated[Principal, Depends(current_user)]) -> Principal:
    if not user.is_admin:
        raise Forbidden("This page is for site administrators.")
    return user


bearer = HTTPBearer(auto_error=False, description="A token from POST /api/v1/auth/token")


# Committed before the response is sent, so the next request (a redirect) sees the change.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
WriteSessionDep = Annotated[Session, Depends(get_write_session, scope="function")]


def _bearer_token(credentials: HTTPAuthorizationCredentials | None) -> str:
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise Unauthorized("Send 'Authorization: Bearer <token>' (get one from POST /api/v1/auth/token).")
    return credentials.credentials


def api_user(
    request: Request, session: SessionDep, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> Principal:
    """The bearer token's user, looked up in the request's own session (one transaction per request)."""
    return _api_principal(_bearer_token(credentials), request, session)


def _api_principal(token: str, request: Request, session: Session) -> Principal:
    """The token's user, in the course the request names (``?course=`` or ``X-Ringlab-Course``)."""
    asked = request.query_params.get("course") or request.headers.get(access.HEADER)
    found = access.token_place(token, asked, session=session, now=utcnow())
    if found is None:
        raise Unauthorized("Invalid or expired token.")
    user_id, username, role, place = found
    return Principal(user_id, username, role, course_id=place.course_id, course_role=place.role)


class ApiCall:
    """A bearer-token request whose database work runs in units, each in one session and one hop.

    ``await call.run(work, *args)`` runs ``work(user, session, *args)`` with the token's user
    and commits: GET and HEAD on a reader, other methods on a writer. Routes that take
    ``ApiUser`` and ``SessionDep`` pay three thread hops for the same work (the token, the
    route, the commit), and on SQLite a writer holds the write lock across all three while
    the event loop serves other requests in between.

    A write that must first read (rating a card) splits in two: ``read`` (or ``quick_read``)
    works it out on a reader, then ``write`` writes it, so that a write is only its writes.
    On SQLite a write unit runs on the event loop when the write lock is free, else it queues
    for one writer thread of its own. The token is looked up once per request, in its first unit.
    """

    def __init__(self, request: Request, token: str) -> None:
        self.request = request
        self.token = token
        self.user: Principal | None = None

    async def run(self, work: Callable[Concatenate[Principal, Session, P], T], *args: P.args, **kw: P.kwargs) -> T:
        return await self._unit(self.request.method not in SAFE_METHODS, work, *args, **kw)

    async def read(self, work: Callable[Concatenate[Principal, Session, P], T], *args: P.args, **kw: P.kwargs) -> T:
        return await self._unit(False, work, *args, **kw)

    async def quick_read(
        self, work: Callable[Concatenate[Principal, Session, P], T], *args: P.args, **kw: P.kwargs
    ) -> T:
        """``read`` for a few indexed queries (the next card): on SQLite, on the event loop itself.

        A SQLite read is CPU work that never waits for a lock (WAL mode) and takes a fraction
        of a millisecond here; a worker thread adds a hop each way and a fight over the
        interpreter lock with the event loop, and buys no parallelism, so on the hot routes
        it cost more than the read. Anything longer, and every read on PostgreSQL, which
        waits on the network, goes to a thread.
        """
        if not self.request.app.state.inline_reads:
            return await self._unit(False, work, *args, **kw)
        return self._in_session(self.request.app.state.readers, work, args, kw)

    async def write(self, work: Callable[Concatenate[Principal, Session, P], T], *args: P.args, **kw: P.kwargs) -> T:
        return await self._unit(True, work, *args, **kw)

    async def _unit(self, writes: bool, work: Callable[..., T], *args: Any, **kw: Any) -> T:
        state = self.request.app.state
        factory: sessionmaker[Session] = state.sessionmaker if writes else state.readers
        writer: ThreadPoolExecutor | None = state.writer_thread if writes else None
        if writer is not None:
            # SQLite: a write unit is a few statements and a commit that does not sync to disk (WAL;
            # now and then a commit also checkpoints, a few milliseconds), a fraction of a millisecond
            # of CPU, so it runs on the event loop when the write lock is free: handing it to a
            # thread costs more in hops and in the fight over the interpreter lock than the write.
            try:
                return self._in_session(factory, work, args, kw, {NOWAIT: True})
            except WriterBusy:
                pass  # another process is writing: wait for it on the writer's own thread
        # Shielded: once the work has started, it runs to its commit or rollback even if the
        # client goes away.
        with anyio.CancelScope(shield=True):
            if writer is None:
                done = await run_in_threadpool(self._in_session, factory, work, args, kw)
            else:
                # Write units that must wait queue for one thread of their own and run one after
                # another, none of them holding a thread of the pool.
                loop = asyncio.get_running_loop()
                done = await loop.run_in_executor(writer, self._in_session, factory, work, args, kw)
        return done

    def _in_session(
        self, factory: sessionmaker[Session], work: Callable[..., T], args: Any, kw: Any, options: Any = None
    ) -> T:
        with session_scope(factory) as session:
            if options:
                session.connection(execution_options=options)  # begins the transaction with them
            if self.user is None:
                self.user = _api_principal(self.token, self.request, session)
            return work(self.user, session, *args, **kw)


async def api_call(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> ApiCall:
    """Async and free of I/O: the token is checked when the work runs (see ApiCall)."""
    return ApiCall(request, _bearer_token(credentials))


# Row ids in paths are INTEGER columns: 32-bit on PostgreSQL (2**63 - 1 on SQLite), so a larger
# id is refused as invalid input (422) before it reaches a query, where it would overflow.
MAX_ROW_ID = 2**31 - 1
RowId = Annotated[int, Path(ge=1, le=MAX_ROW_ID)]
SettingsDep = Annotated[Settings, Depends(get_app_settings)]
ClientAddress = Annotated[str, Depends(client_address)]
OptionalUser = Annotated[Principal | None, Depends(optional_user)]
CurrentUser = Annotated[Principal, Depends(current_user)]
RequireStaff = Annotated[Principal, Depends(require_staff)]
RequireInstructor = Annotated[Principal, Depends(require_instructor)]
RequireAdmin = Annotated[Principal, Depends(require_admin)]
ApiUser = Annotated[Principal, Depends(api_user)]
Api = Annotated[ApiCall, Depends(api_call)]
